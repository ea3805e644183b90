"""The periodic full sweep's time on the event loop, before and after the comparison moved into
the scan's thread, side by side in one run.

A memory directory of N files (default 10,000) with an index listing every one is loaded
once; then, alternating the two ways for each round, a sweep runs as the daemon runs it
(`DirStates._sweep_in_background`: scan in a thread, fold in on the loop, then the orphan
check) in two cases: nothing changed, and one file edited in place before the sweep (so one
file is re-read and the orphan check passes over the index again). Measured: the event-loop
thread's CPU time during the sweep (`time.thread_time`; the loop holds no CPU while it waits
for the thread), the longest single hold of the loop (a 1 ms ticker running beside it, in
separate rounds), and the whole sweep's wall time.

"before": as it was (a stamp of every entry taken on the loop, `scan_tree` in the thread,
every scanned file compared on the loop; the orphan check reading and comparing every index
line and file on the loop). "after": memoryd's (`scan_changes` compares in the thread,
`apply_changes` visits the differences only; the orphan check reads and compares in a thread).

    .venv/bin/python bench/bench_sweep.py [--files 10000] [--rounds 15]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memoryd.automem import index as index_mod
from memoryd.automem.index_writer import IndexWriter
from memoryd.automem.layout import index_file, index_path, is_team, read_index_for_rewrite
from memoryd.automem.locks import WriterLocks
from memoryd.automem.stamps import stat_stamp
from memoryd.automem.store import DirState, Stamp, scan_tree
from memoryd.automem.warmup import DirStates


def write_dir(folder: Path, n: int) -> None:
    lines = []
    for i in range(n):
        name = f"m{i:05d}.md"
        (folder / name).write_text(
            f"---\nname: fact {i}\ndescription: fact number {i}\ntype: user\n---\n\n"
            f"Fact {i} says the tide was at {i % 97} at noon.\n",
            encoding="utf-8",
        )
        lines.append(f"- [fact {i}]({name}) — fact number {i}")
    (folder / "MEMORY.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def fold_before(
    state: DirState, before: Mapping[str, Stamp], seen: Mapping[str, tuple[str, Stamp]]
) -> None:
    """`DirState.apply_scan` as it was until session 4: every scanned file compared here."""
    changed = False
    for key, stamp in before.items():
        if key not in seen:
            entry = state.entries.get(key)
            if entry is not None and entry.stamp == stamp:
                state._drop(key)
                changed = True
    for key, (path, stamp) in seen.items():
        entry = state.entries.get(key)
        if entry is None or (entry.stamp != stamp and entry.stamp == before.get(key)):
            state._load(key, Path(path), stamp)
            changed = True
    if changed:
        state.generation += 1


async def orphans_before(writer: IndexWriter, memory_dir: Path) -> None:
    """`IndexWriter.index_orphans` after a sweep as it was until session 4 (every index line
    and file compared on the loop), for an index with no orphans (the case measured here)."""
    await writer._states.ready(memory_dir)
    async with writer._locks(memory_dir):
        state = writer._states.state(memory_dir)
        pending = writer._pending.get(memory_dir, {})
        for team in (False, True):
            path = index_path(memory_dir, team=team)
            seen = (state.generation, stat_stamp(path))
            if writer._in_step.get((memory_dir, team)) == seen:
                continue
            headers = {
                index_file(k, team): e.header
                for k, e in state.entries.items()
                if is_team(k) == team and k not in pending
            }
            text = read_index_for_rewrite(path) if headers else ""
            unlisted = index_mod.unlisted(text, sorted(headers))
            assert not unlisted, "the bench's index lists every file"
            writer._in_step[(memory_dir, team)] = seen


async def sweep_before(writer: IndexWriter, state: DirState) -> None:
    before = {key: entry.stamp for key, entry in state.entries.items()}
    seen = await asyncio.to_thread(scan_tree, state.memory_dir)
    fold_before(state, before, seen)
    await orphans_before(writer, state.memory_dir)


async def longest_hold(run: Callable[[], Awaitable[None]]) -> float:
    """The longest the loop went without running a 1 ms ticker while `run` ran (ms)."""
    done = False
    longest = 0.0

    async def ticker() -> None:
        nonlocal longest
        while not done:
            started = time.perf_counter()
            await asyncio.sleep(0.001)
            longest = max(longest, time.perf_counter() - started - 0.001)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    longest = 0.0
    await run()
    done = True
    await task
    return 1000 * longest


async def measure(folder: Path, rounds: int) -> None:
    states = DirStates(asyncio.create_task)
    states.sweep_interval_s = 3600.0  # sweeps run here, when measured
    writer = IndexWriter(states, WriterLocks())
    states.index_orphans = writer.index_orphans
    started = time.perf_counter()
    state = await states.ready(folder)
    await states.index_orphans(folder, 0.0)
    print(f"{len(state.entries):,} files loaded in {time.perf_counter() - started:.1f} s")
    ways: dict[str, Callable[[], Awaitable[None]]] = {
        "before": lambda: sweep_before(writer, state),
        "after": lambda: states._sweep_in_background(state),
    }
    edited = folder / "m00042.md"
    for case in ("nothing changed", "one file edited in place"):
        cpu: dict[str, list[float]] = {w: [] for w in ways}
        wall: dict[str, list[float]] = {w: [] for w in ways}
        hold: dict[str, list[float]] = {w: [] for w in ways}
        for round_ in range(rounds):
            for way, run in ways.items():
                for probe in ("cpu", "hold"):
                    if case != "nothing changed":
                        with edited.open("a", encoding="utf-8") as handle:
                            handle.write(f"edit {way} {round_} {probe}\n")
                    updates = state.updates
                    if probe == "hold":
                        hold[way].append(await longest_hold(run))
                    else:
                        t_cpu, t_wall = time.thread_time(), time.perf_counter()
                        await run()
                        cpu[way].append(1000 * (time.thread_time() - t_cpu))
                        wall[way].append(1000 * (time.perf_counter() - t_wall))
                    expected = 0 if case == "nothing changed" else 1
                    assert state.updates - updates == expected, (way, case)
        print(f"\n{case} ({rounds} rounds, median ms; ratio after/before)")
        print(f"{'':<28}{'before':>10}{'after':>10}{'ratio':>8}")
        for label, values in (
            ("event loop CPU per sweep", cpu),
            ("longest hold of the loop", hold),
            ("sweep wall time", wall),
        ):
            b, a = statistics.median(values["before"]), statistics.median(values["after"])
            print(f"{label:<28}{b:>10.2f}{a:>10.2f}{a / b:>7.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mdb-sweep-", dir="/tmp") as work:
        folder = Path(work) / "memory"
        folder.mkdir()
        write_dir(folder, args.files)
        asyncio.run(measure(folder, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
