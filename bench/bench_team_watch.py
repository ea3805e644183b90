"""Team watcher: how long setting up the watch of a large team tree holds the event loop.

    .venv/bin/python bench/bench_team_watch.py [--folders 20000] [--rounds 3]

A team folder of `--folders` folders (100 per level-1 folder) is watched as the team sync
runner watches it (`fswatch.watch(team_dir, recursive=True)`, debounce and step 50 ms). A
ticker task sleeping 1 ms records the longest gap between its wake-ups while the watch is set
up: that is how long every other request of the daemon waited. Then a file is written in the
last folder made, and the time until its event arrives says when the whole tree was watched.

On Linux the recursive watch puts one inotify watch per folder (a scandir and an
inotify_add_watch each); the watch limit (`fs.inotify.max_user_watches`) must exceed
`--folders`. Measured on the 2-core session machine shared with other work, 20,000 folders,
median of 3 rounds: fswatch setting up its watches on the loop (session 20): a 315 ms loop
stall (250 ms on a quieter machine), the tree watched after 366 ms; with the setup in a thread
(the change proposed for `fswatch._inotify` in session 20): 23 ms (GIL switches), 315 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memoryd import fswatch  # noqa: E402


def make_tree(root: Path, folders: int) -> Path:
    """`folders` folders under `root`, 100 per level-1 folder; the deepest last one made."""
    last = root
    for i in range(folders):
        last = root / f"d{i // 100:04d}" / f"s{i % 100:02d}"
        last.mkdir(parents=True, exist_ok=True)
    return last


async def one_round(team: Path, last: Path) -> tuple[float, float]:
    """(the loop's longest stall while the watch is set up, seconds until the last folder's
    event arrived)."""
    stop = asyncio.Event()
    seen = asyncio.Event()
    probe = last / "probe.md"
    gaps: list[float] = []

    async def ticker() -> None:
        before = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - before)
            before = now

    async def watcher() -> None:
        async for changes in fswatch.watch(
            team, stop=stop, recursive=True, debounce_ms=50, step_ms=50
        ):
            if any(path == str(probe) for _, path in changes):
                seen.set()

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    started = time.perf_counter()
    watching = asyncio.create_task(watcher())
    # Write the probe again and again until its event arrives: a write before the last
    # folder's watch exists is not reported.
    while not seen.is_set():
        probe.write_text(f"{time.perf_counter()}\n")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(seen.wait(), 0.02)
    ready = time.perf_counter() - started
    stop.set()
    await watching
    await ticking
    probe.unlink()
    return max(gaps), ready


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folders", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-team-watch-"))
    try:
        team = tmp / "team"
        last = make_tree(team, args.folders)
        stalls: list[float] = []
        readies: list[float] = []
        for _ in range(args.rounds):
            stall, ready = asyncio.run(one_round(team, last))
            stalls.append(stall)
            readies.append(ready)
        print(f"team watch of {args.folders:,} folders, {args.rounds} rounds")
        print(
            f"  loop stall while setting up: median {statistics.median(stalls) * 1000:.1f} ms, "
            f"max {max(stalls) * 1000:.1f} ms"
        )
        print(f"  whole tree watched after:    median {statistics.median(readies) * 1000:.0f} ms")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
