"""Editor plugins: the editor-side round trip of `get_context` against `memctl call`.

    .venv/bin/python bench/bench_editors.py [--runs 200] [--rounds 3]

One daemon (a `python -m memoryd` subprocess, temp HOME) serves the generated monorepo of
bench_context.py (12 levels of CLAUDE.md, rules and includes; ~130 KiB replies), asked about a
file in its deepest folder, as `:MemorydRules` (and VS Code's Rules in Effect view) asks for
that buffer. In the same run, alternating in rounds so a noisy machine hits every side alike:

- nvim: headless Neovim with clients/nvim; `get_context` through the plugin's connection
  (warm, one call at a time: encode, socket, decode, callback on the main loop), and the
  whole `:MemorydRules` (request plus drawing the view);
- vscode: the VS Code extension's socket client (clients/vscode, built by `npm run build`) in
  one long-lived node process, as in the editor: `get_context` warm, one call at a time
  (encode, socket, decode, promise), and the Rules in Effect view (the call plus its tree);
- memctl: `memctl call get_context '{…}'`, a new process per call, as a shell or a hook runs it;
- python client: `memoryd_client.Client.call` on one open connection (the
  daemon's own time plus one socket round trip).

Medians and p95 in milliseconds; the ratio is memctl's median over the editor's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _harness import REPO, daemon_process, median, percentile, temp_home, time_calls
from bench_context import generate

from memoryd_client import Client
from tests.editors.headless_nvim import NVIM, run_script

VSCODE_DRIVER = REPO / "clients" / "vscode" / "out" / "tools" / "bench-get-context.js"
MEMCTL = Path(sys.executable).with_name("memctl")


def nvim_side(env: dict[str, str], cwd: Path, touched: str, runs: int) -> dict[str, list[float]]:
    """Round trips (ms) measured inside headless Neovim; also the :MemorydRules view."""
    if NVIM is None:
        return {}
    with tempfile.TemporaryDirectory(prefix="mdbench-nvim-") as tmp:
        result = Path(tmp) / "timings.json"
        bench_env = {
            **env,
            "MEMORYD_BENCH_CWD": str(cwd),
            "MEMORYD_BENCH_TOUCHED": touched,
            "MEMORYD_BENCH_RUNS": str(runs),
        }
        proc = run_script("bench_get_context.lua", bench_env, result, cwd=None, timeout=600)
        proc.check_returncode()
        timings: dict[str, list[float]] = json.loads(result.read_text())
        return timings


def vscode_side(
    env: dict[str, str], sock: Path, cwd: Path, touched: str, runs: int
) -> dict[str, list[float]]:
    """Round trips (ms) measured inside node by the extension's own client; also the view."""
    node = shutil.which("node")
    if node is None or not VSCODE_DRIVER.is_file():
        return {}
    proc = subprocess.run(
        [node, str(VSCODE_DRIVER), str(sock), str(cwd), touched, str(runs)],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    timings: dict[str, list[float]] = json.loads(proc.stdout)
    return timings


def memctl_side(env: dict[str, str], params: dict[str, object], runs: int) -> list[float]:
    argv = [str(MEMCTL), "call", "get_context", json.dumps(params)]
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
        out.append((time.perf_counter() - start) * 1000)
    return out


def client_side(sock: Path, params: dict[str, object], runs: int) -> list[float]:
    with Client(sock, timeout=30) as conn:
        conn.call("get_context", params)
        call: Callable[[], object] = lambda: conn.call("get_context", params)  # noqa: E731
        return [s * 1000 for s in time_calls(call, runs)]


def row(name: str, values: list[float], base: float | None) -> str:
    if not values:
        return f"| {name} | — | — | (not run) |"
    med = median(values)
    ratio = f"{base / med:.1f}×" if base else "—"
    return f"| {name} | {med:.2f} | {percentile(values, 95):.2f} | {ratio} |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="editor and client calls per round")
    parser.add_argument("--memctl-runs", type=int, default=20, help="memctl calls per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not VSCODE_DRIVER.is_file():
        print(
            "clients/vscode is not built (npm ci && npm run build there): no vscode rows",
            file=sys.stderr,
        )

    with temp_home() as env, tempfile.TemporaryDirectory(prefix="mdbench-repo-") as tmp:
        deepest, _, _ = generate(Path(tmp) / "mono")
        # The file being edited: deepest folder, activating that level's conditional rule 9.
        edited = deepest / "src" / "module9" / "component" / "view.tsx"
        edited.parent.mkdir(parents=True)
        edited.write_text("export const view = 1;\n")
        cwd, touched_file = edited.parent, str(edited)
        # What :MemorydRules sends for that buffer; every side sends the same.
        params: dict[str, object] = {"cwd": str(cwd), "touched_paths": [touched_file]}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # memctl as installed: bytecode cached
        with daemon_process(env) as sock:
            with Client(sock) as conn:
                reply = conn.call("get_context", params)
            size = len(json.dumps(reply))
            sides: dict[str, list[float]] = {}
            for _ in range(args.rounds):
                for name, values in nvim_side(env, cwd, touched_file, args.runs).items():
                    sides.setdefault(f"nvim {name}", []).extend(values)
                for name, values in vscode_side(env, sock, cwd, touched_file, args.runs).items():
                    sides.setdefault(f"vscode {name}", []).extend(values)
                sides.setdefault("memctl call", []).extend(
                    memctl_side(env, params, args.memctl_runs)
                )
                sides.setdefault("python client", []).extend(client_side(sock, params, args.runs))

    print(
        f"get_context: {len(reply['files'])} files, reply {size / 1024:.0f} KiB, "
        f"{args.rounds} rounds, load {os.getloadavg()[0]:.2f}"
    )
    memctl = median(sides["memctl call"])
    print("| side | median ms | p95 ms | memctl call / side |")
    print("|---|---|---|---|")
    sides_shown = ("nvim round_trip", "nvim rules_view", "vscode round_trip", "vscode rules_view")
    for name in (*sides_shown, "python client", "memctl call"):
        print(row(name, sides.get(name, []), memctl))
    return 0


if __name__ == "__main__":
    sys.exit(main())
