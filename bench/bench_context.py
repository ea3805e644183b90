"""Instruction files: a warm `get_context` from the daemon against a cold load, and edit latency.

    .venv/bin/python bench/bench_context.py [--warm 300] [--cold 10] [--edits 40]

A generated monorepo (12 folder levels, a CLAUDE.md at every level, 60 rule files of which
20 conditional, 40 `@include`s) is loaded three ways, side by side in one run:

- warm: `get_context` through a real daemon (a `python -m memoryd` subprocess) whose cache
  already holds the context — what a session start costs with memoryd;
- cold: a fresh `python -c` process that imports the domain code, discovers, loads and
  assembles the same context — what an agent without a daemon pays at every start;
- in-process: the same discovery and assembly in this process, files in the page cache
  (no interpreter start), to show what the cache saves beyond process start.

Then edit-to-visible latency: a file involved in the context is edited and `get_context` is
polled until the edit shows; p50/p95 over `--edits` edits (a CLAUDE.md, a rule, an include,
in turn), for the watching daemon and for one started with `--no-watch` (stat checks).

    .venv/bin/python bench/bench_context.py --touched 50000 [--old REV] [--seconds 8]

A session of many touched paths, old code against new in one run (the old tree a
`git worktree add --detach` of REV, its daemon imported from there): one client calls
`get_context` for the session again and again, every tenth call with a burst of 20 new
paths, while three other clients each poll a small `get_context` every 10 ms; printed are
the pollers' median, p99 and worst wait and the session's calls, old / new.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from _harness import (
    REPO,
    daemon_process,
    median,
    old_worktree,
    percentile,
    temp_home,
    time_calls,
)

from memoryd_client import Client

LEVELS = 12
RULES = 60
CONDITIONAL = 20
INCLUDES = 40


def generate(root: Path) -> tuple[Path, list[str], dict[str, Path]]:
    """The monorepo; returns (cwd, touched paths, files to edit)."""
    repo = root / "mono"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    levels = [repo]
    for depth in range(1, LEVELS):
        levels.append(levels[-1] / f"level{depth:02d}")
    for folder in levels:
        folder.mkdir(parents=True, exist_ok=True)
    docs = repo / "docs"
    docs.mkdir()
    para = "Follow the conventions of this folder. " * 12 + "\n"
    for index in range(INCLUDES):
        (docs / f"topic{index:02d}.md").write_text(f"# Topic {index}\n\n{para * 3}")
    # 40 includes: 24 from the level CLAUDE.md files (2 each), 16 from rule files.
    include_refs = [f"@{docs}/topic{i:02d}.md" for i in range(INCLUDES)]
    for depth, folder in enumerate(levels):
        refs = include_refs[2 * depth : 2 * depth + 2]
        (folder / "CLAUDE.md").write_text(
            f"# Level {depth}\n\n{para}\nSee {refs[0]} and {refs[1]}.\n\n"
            "Code like `@scope/package` is not an include; nor is a@b.com.\n"
            "<!-- a maintainer note that is stripped -->\n"
        )
    rule_levels = [levels[0], levels[3], levels[6], levels[9], levels[11]]
    rule_refs = iter(include_refs[2 * LEVELS :])
    for index in range(RULES):
        folder = rule_levels[index % len(rule_levels)] / ".claude" / "rules"
        if index % 4 == 0:
            folder = folder / "group"
        folder.mkdir(parents=True, exist_ok=True)
        conditional = index % 3 == 0  # 20 of 60
        head = f"---\npaths:\n  - 'src/module{index}/**/*.{{ts,tsx}}'\n---\n" if conditional else ""
        ref = next(rule_refs, None) if not conditional else None
        tail = f"\nMore in {ref}.\n" if ref else ""
        (folder / f"rule{index:02d}.md").write_text(f"{head}# Rule {index}\n\n{para}{tail}")
    cwd = levels[-1]
    # Touched paths activate 5 of the 20 conditional rules, each relative to its .claude's folder.
    touched = []
    for index in range(0, 15, 3):
        base = rule_levels[index % len(rule_levels)]
        touched.append(str(base / f"src/module{index}/component/view.tsx"))
    edits = {
        "CLAUDE.md": levels[6] / "CLAUDE.md",
        "rule": rule_levels[2] / ".claude" / "rules" / "rule02.md",
        "include": docs / "topic05.md",
    }
    return cwd, touched, edits


COLD_SCRIPT = r"""
import hashlib, os, sys
from datetime import date
from pathlib import Path
from memoryd import gitfacts, paths, settings
from memoryd.rules import approvals, assembly
from memoryd.rules.loader import load_context
from memoryd.rules.model import ContextRequest
from memoryd.rules.realfs import RealFS

cwd = Path(os.path.realpath(sys.argv[1]))
touched = frozenset(Path(p) for p in sys.argv[2:])
facts = gitfacts.discover(cwd)
effective = settings.load(facts.project_root)
request = ContextRequest(
    cwd=cwd, project_root=facts.project_root, worktree_root=facts.worktree_root,
    config_dir=paths.config_dir(), managed_dir=paths.managed_dir(), home=paths.home(),
    touched=touched, excludes=tuple(effective.get("claudeMdExcludes") or ()),
    agents_md_fallback=bool(effective.get("agentsMdFallback")),
    max_include_depth=effective.get("maxIncludeDepth"),
    external_approved=approvals.is_approved(facts.project_root),
)
result = load_context(request, RealFS())
text = assembly.assemble(assembly.render_files(result.files))
date_line = assembly.current_date_line(date.today())
print(len(result.files), hashlib.sha256(text.encode()).hexdigest())
"""


def cold_runs(
    env: dict[str, str], cwd: Path, touched: list[str], n: int
) -> tuple[list[float], str]:
    child_env = {**env, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "clients")])}
    times: list[float] = []
    output = ""
    for _ in range(n):
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", COLD_SCRIPT, str(cwd), *touched],
            env=child_env,
            capture_output=True,
            text=True,
            check=True,
        )
        times.append(time.perf_counter() - start)
        output = done.stdout.strip()
    return times, output


def in_process_runs(env: dict[str, str], cwd: Path, touched: list[str], n: int) -> list[float]:
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        from memoryd import gitfacts, paths, settings
        from memoryd.rules import assembly
        from memoryd.rules.loader import load_context
        from memoryd.rules.model import ContextRequest
        from memoryd.rules.realfs import RealFS

        def once() -> None:
            facts = gitfacts.discover(cwd)
            effective = settings.load(facts.project_root)
            request = ContextRequest(
                cwd=cwd,
                project_root=facts.project_root,
                worktree_root=facts.worktree_root,
                config_dir=paths.config_dir(),
                managed_dir=paths.managed_dir(),
                home=paths.home(),
                touched=frozenset(Path(p) for p in touched),
                excludes=tuple(effective.get("claudeMdExcludes") or ()),
            )
            result = load_context(request, RealFS())
            assembly.assemble(assembly.render_files(result.files))

        once()
        return time_calls(once, n)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def wait_trusted(conn: Client, params: dict[str, object]) -> None:
    """Call until the cached entry is covered by the live watcher (no stat checks any more)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        conn.call("get_context", params)
        features = conn.call("status")["features"]["instruction_files"]
        if features["trusted"]:
            return
        time.sleep(0.01)


def edit_latencies(
    conn: Client, params: dict[str, object], edits: dict[str, Path], n: int, watching: bool
) -> list[float]:
    latencies: list[float] = []
    names = list(edits)
    for index in range(n):
        target = edits[names[index % len(names)]]
        marker = f"edit-marker-{index}-{time.monotonic_ns()}"
        if watching:
            wait_trusted(conn, params)
        else:
            conn.call("get_context", params)
        original = target.read_text()
        start = time.perf_counter()
        target.write_text(original + f"\n{marker}\n")
        while marker not in conn.call("get_context", params)["claude_md"]:
            if time.perf_counter() - start > 10:
                raise RuntimeError(f"edit of {target} not visible after 10 s")
            time.sleep(0.002)
        latencies.append(time.perf_counter() - start)
        target.write_text(original)
    return latencies


# -- a session of many touched paths, old code against new ------------------------------
# The commit before a session's touched Path set was cached in SessionPaths.
DEFAULT_OLD = "52bb2cc"
POLLERS = 3
BURST = 20


def touched_round(tree: Path, count: int, seconds: float) -> dict[str, list[float]]:
    """The pollers' waits and the session's calls against the daemon of `tree`."""
    with temp_home() as env:
        cwd, touched, _ = generate(Path(env["HOME"]).parent)
        many = [f"src/d{i // 100:04d}/f{i}.py" for i in range(count)]
        session = {"cwd": str(cwd), "session_id": "many"}
        small: dict[str, object] = {"cwd": str(cwd), "touched_paths": touched}
        with daemon_process(env, tree=tree) as sock, Client(sock, timeout=120) as heavy:
            heavy.call("get_context", {**session, "touched_paths": many})
            stop = threading.Event()
            waits: list[float] = []
            calls: list[float] = []

            def poll() -> None:
                with Client(sock, timeout=120) as conn:
                    conn.call("get_context", small)
                    while not stop.is_set():
                        start = time.perf_counter()
                        conn.call("get_context", small)
                        waits.append(time.perf_counter() - start)
                        time.sleep(0.01)

            pollers = [threading.Thread(target=poll) for _ in range(POLLERS)]
            for thread in pollers:
                thread.start()
            end = time.monotonic() + seconds
            index = 0
            while time.monotonic() < end:
                burst = (
                    [f"src/burst/b{index}-{j}.py" for j in range(BURST)] if index % 10 == 9 else []
                )
                start = time.perf_counter()
                heavy.call("get_context", {**session, "touched_paths": burst})
                calls.append(time.perf_counter() - start)
                index += 1
            stop.set()
            for thread in pollers:
                thread.join()
    return {"waits": waits, "calls": calls}


def touched_main(args: argparse.Namespace) -> int:
    with old_worktree(args.old) as old_tree:
        old = touched_round(old_tree, args.touched, args.seconds)
        new = touched_round(REPO, args.touched, args.seconds)
    print(
        f"a session of {args.touched:,} touched paths, {POLLERS} pollers, {args.seconds:g} s "
        f"each; old = {args.old}, new = the working tree; ms, lower is better"
    )
    print(f"{'measure':<34} {'old':>9} {'new':>9} {'old/new':>8}")
    rows = [
        ("poll wait, median", median, "waits"),
        ("poll wait, p99", lambda v: percentile(v, 99), "waits"),
        ("poll wait, worst", max, "waits"),
        ("session's get_context, median", median, "calls"),
    ]
    for label, measure, series in rows:
        before, after = measure(old[series]) * 1000, measure(new[series]) * 1000
        print(f"{label:<34} {before:>9.2f} {after:>9.2f} {before / after:>8.1f}")
    print(f"{'session calls made':<34} {len(old['calls']):>9} {len(new['calls']):>9}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm", type=int, default=300)
    parser.add_argument("--cold", type=int, default=10)
    parser.add_argument("--edits", type=int, default=40)
    parser.add_argument("--touched", type=int, help="measure a session of this many paths")
    parser.add_argument("--old", default=DEFAULT_OLD, help="the revision --touched compares with")
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    if args.touched:
        return touched_main(args)
    with temp_home() as env:
        root = Path(env["HOME"]).parent
        cwd, touched, edits = generate(root)
        params: dict[str, object] = {"cwd": str(cwd), "touched_paths": touched}
        cold, cold_out = cold_runs(env, cwd, touched, args.cold)
        in_process = in_process_runs(env, cwd, touched, max(args.cold, 20))
        results: dict[str, tuple[list[float], list[float], str, int]] = {}
        for label, extra in (("watching", ()), ("--no-watch", ("--no-watch",))):
            with daemon_process(env, *extra) as sock, Client(sock, timeout=30) as conn:
                first = conn.call("get_context", params)
                if label == "watching":
                    wait_trusted(conn, params)
                warm = time_calls(lambda conn=conn: conn.call("get_context", params), args.warm)
                latencies = edit_latencies(conn, params, edits, args.edits, label == "watching")
                digest = hashlib.sha256(first["claude_md"].encode()).hexdigest()
                results[label] = (warm, latencies, digest, len(first["files"]))
    files_cold, digest_cold = cold_out.split()
    print(
        f"monorepo: {LEVELS} levels, {RULES} rules ({CONDITIONAL} conditional), {INCLUDES} includes"
    )
    print(
        f"files loaded: daemon {results['watching'][3]}, cold {files_cold}; "
        f"same text: {results['watching'][2] == digest_cold}"
    )
    cold_ms = median(cold) * 1000
    in_ms = median(in_process) * 1000
    print(f"cold load, fresh process     median {cold_ms:8.2f} ms  (n={len(cold)})")
    print(f"load in process, no start    median {in_ms:8.2f} ms  (n={len(in_process)})")
    for label, (warm, latencies, _digest, _files) in results.items():
        warm_ms = median(warm) * 1000
        print(
            f"warm get_context [{label:10}] median {warm_ms:8.3f} ms  p95 {percentile(warm, 95) * 1000:.3f} ms"
        )
        print(
            f"  cold / warm = {cold_ms / warm_ms:7.1f}x   in-process / warm = {in_ms / warm_ms:6.1f}x"
        )
        print(
            f"  edit visible: p50 {percentile(latencies, 50) * 1000:6.1f} ms  "
            f"p95 {percentile(latencies, 95) * 1000:6.1f} ms  max {max(latencies) * 1000:6.1f} ms  (n={len(latencies)})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
