"""What a loaded memory dir costs the garbage collector, for this checkout and others side by side.

Each full collection walks every object the collector tracks, on the event loop: a memory dir
loaded adds a few a memory. For each checkout (`--root`, this one by default; a `git worktree`
of an older commit to compare), in a process of its own, a dir of synthetic memories (as
bench_recall_latency.py writes them) is loaded by DirState, then:
  - tracked: objects the collector tracks, a memory (after a collection);
  - full collection: CPU of one, best of 3;
  - during the load: CPU of the full collections the load set off, and the longest.

    .venv/bin/python bench/bench_recall_gc.py [--memories 20000] [--root DIR ...]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
from pathlib import Path

from _harness import REPO, child_json
from bench_recall_latency import vocabulary, write_memories

_CHILD = """
import gc, json, sys, time
from pathlib import Path
from memoryd.automem.store import DirState

folder = Path(sys.argv[1])
fulls, started = [], [0.0]
def timed(phase, info):
    if info["generation"] != 2:
        return
    if phase == "start":
        started[0] = time.thread_time()
    else:
        fulls.append(time.thread_time() - started[0])

gc.collect()
before = len(gc.get_objects())
gc.callbacks.append(timed)
state = DirState(folder)
state.refresh(force=True)
gc.callbacks.remove(timed)
gc.collect()
tracked = len(gc.get_objects()) - before
best = float("inf")
for _ in range(3):
    start = time.process_time()
    gc.collect()
    best = min(best, time.process_time() - start)
print(json.dumps({
    "per_memory": tracked / len(state.entries),
    "full_ms": best * 1e3,
    "load_full_ms": sum(fulls) * 1e3,
    "load_fulls": len(fulls),
    "load_longest_ms": max(fulls, default=0.0) * 1e3,
}))
"""


def measure(root: Path, folder: Path) -> dict[str, float]:
    result: dict[str, float] = child_json(_CHILD, str(folder), root=root)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--root", type=Path, action="append", help="a checkout (repeatable)")
    args = parser.parse_args()
    roots = [r.resolve() for r in args.root or [REPO]]
    work = Path(tempfile.mkdtemp(prefix="bench-gc-"))
    try:
        rng = random.Random(42)
        write_memories(work / "memory", args.memories, rng, vocabulary(rng))
        print(f"{args.memories:,} memories loaded; CPU ms")
        print(
            f"{'checkout':40} {'tracked/memory':>14} {'full':>7} {'load: fulls':>11} {'longest':>8}"
        )
        for root in roots:
            got = measure(root, work / "memory")
            print(
                f"{str(root)[-40:]:40} {got['per_memory']:14.2f} {got['full_ms']:7.0f} "
                f"{got['load_full_ms']:7.0f} ({got['load_fulls']:.0f}) {got['load_longest_ms']:8.0f}"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
