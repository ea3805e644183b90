"""Shared bits for the benchmarks: a temp HOME, a daemon subprocess, timing helpers."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "clients")]

from memoryd_client import Client, DaemonUnavailable  # noqa: E402


def eval_dir() -> Path | None:
    configured = os.environ.get("MEMORYD_EVAL_DIR")
    for candidate in (configured, REPO.parent / "shared" / "eval", REPO / ".." / "shared" / "eval"):
        if candidate and Path(candidate).is_dir():
            return Path(candidate).resolve()
    return None


@contextmanager
def temp_home() -> Iterator[dict[str, str]]:
    # A daemon killed with -9 (fault_kill9_storm) leaves its model conversion's process
    # writing under the state dir for a moment: the cleanup met a folder it was filling and
    # failed the run after its figures were printed.
    with tempfile.TemporaryDirectory(prefix="mdbench-", ignore_cleanup_errors=True) as tmp:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ANTHROPIC_", "MEMORYD_", "CLAUDE_", "XDG_"))
        }
        env.update(
            HOME=f"{tmp}/home",
            XDG_STATE_HOME=f"{tmp}/state",
            XDG_DATA_HOME=f"{tmp}/data",
            MEMORYD_MANAGED_DIR=f"{tmp}/managed",
            MEMORYD_SOCKET=f"{tmp}/s/memoryd.sock",
        )
        Path(env["HOME"]).mkdir(parents=True)
        yield env


@contextmanager
def process_home(prefix: str) -> Iterator[Path]:
    """This process's HOME and state dir in a new temp folder, embeddings on, for the benches
    that run the ranker in process; the folder is removed after."""
    work = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    os.environ["HOME"] = str(work / "home")
    os.environ["XDG_STATE_HOME"] = str(work / "state")
    os.environ["MEMORYD_EMBEDDINGS"] = "on"
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def start_daemon(env: dict[str, str], *extra: str, tree: Path = REPO) -> subprocess.Popen[bytes]:
    """Start memoryd (imported from checkout `tree`) on env's socket and return once it
    answers `status`."""
    sock = Path(env["MEMORYD_SOCKET"])
    proc = subprocess.Popen(
        [sys.executable, "-m", "memoryd", "--socket", str(sock), "--log-level", "warning", *extra],
        env={**env, "PYTHONPATH": f"{tree}:{tree / 'clients'}"} if tree != REPO else env,
        cwd=tree,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            with Client(sock, timeout=2) as conn:
                conn.call("status")
            return proc
        except (DaemonUnavailable, OSError):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("memoryd did not start") from None
            time.sleep(0.05)


@contextmanager
def daemon_process(env: dict[str, str], *extra: str, tree: Path = REPO) -> Iterator[Path]:
    proc = start_daemon(env, *extra, tree=tree)
    try:
        yield Path(env["MEMORYD_SOCKET"])
    finally:
        proc.terminate()
        proc.wait(30)


@contextmanager
def old_worktree(rev: str) -> Iterator[Path]:
    """A checkout of `rev` (`git worktree add --detach`) under /tmp, removed after: the old
    code a bench compares with, in one run."""
    tree = Path(tempfile.mkdtemp(prefix="memoryd-bench-old-"))
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), rev],
        check=True,
        capture_output=True,
    )
    try:
        yield tree
    finally:
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(tree, ignore_errors=True)


def rss_mb(pid: int | str = "self") -> float:
    """A process's resident memory (VmRSS, from /proc: Linux only), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU time so far (from /proc: Linux only), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_json(code: str, *args: str, root: Path = REPO) -> Any:
    """What `code`, run by this Python in a process of its own in checkout `root` (its
    memoryd imported), prints as JSON: a fresh interpreter per measurement, no state shared."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
        env={"PYTHONPATH": str(root)},
    )
    return json.loads(done.stdout)


# Prepended to a bench's child script: `await worst_gap(call)` runs `call()` beside a ticker
# task sleeping 1 ms and returns the longest gap between the ticker's wake-ups (how long every
# other request on the loop waited at worst) and the call's wall time, in seconds.
WORST_GAP_CODE = r"""
import asyncio, time


async def worst_gap(call):
    gaps = []

    async def tick():
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            gaps.append(time.perf_counter() - before)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.01)
    started = time.perf_counter()
    await call()
    wall = time.perf_counter() - started
    # Let the ticker wake once more: a stall at the end of the call (the state saved last, say)
    # ends its current sleep, which cancelling it now would leave unrecorded.
    await asyncio.sleep(0.01)
    ticker.cancel()
    return max(gaps), wall
"""


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0–100) of `values`; nan when there are none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def time_calls(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def median(values: list[float]) -> float:
    return statistics.median(values)
