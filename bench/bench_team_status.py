"""`team.status` on a team folder of 10,000 files: how long it holds the event loop and how
long it takes before it answers.

    .venv/bin/python bench/bench_team_status.py [--files 10000] [--rounds 9]

In a process of its own: a folder of `--files` notes (~330 bytes each, in 350 folders) in step
with the server (its sync state says so; no server is asked: `team.status` never is), then
`--rounds` times what `team.status` does before it answers (`SyncEngine.refresh_pending`), in
three ways:

  rescan     every call scans the folder (in a thread: a stat per file) and computes the
             pending delta: what every call did before session 24, and still does while the
             folder is not watched (off Linux, before the watch is in place);
  unchanged  the folder's runner watches it (inotify) and nothing changed: the last scan is
             reused, the delta computed again;
  edited     one file is rewritten just before each call: the watch is not clear, so the
             call scans (the edit must be pending in its answer).

A ticker task sleeping 1 ms records the longest gap between its wake-ups during each call: how
long every other request of the daemon waited at worst. Printed: the median over the rounds
of that longest gap and of the call's wall time per way, and each way's ratio to `rescan`,
run twice. Figures in docs/team-memory.md ("Status") and docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import statistics

from _harness import WORST_GAP_CODE, child_json

CHILD = (
    WORST_GAP_CODE
    + r"""
import asyncio, json, sys, tempfile, time
from pathlib import Path
from memoryd.team.protocol import checksum
from memoryd.team.service import find_secret
from memoryd.team.sync.engine import SyncEngine
from memoryd.team.sync.localfs import LocalFolder
from memoryd.team.sync.state import StateStore
from memoryd.team.sync.watcher import SyncRunner, Tuning

files, rounds = int(sys.argv[1]), int(sys.argv[2])


async def notify(_event, _params):
    return None


async def report_error(_worker, _message):
    return None


async def main():
    with tempfile.TemporaryDirectory(prefix="bench-team-status-") as work:
        team_dir = Path(work) / "team"
        digests = {}
        for i in range(files):
            key = f"area{i % 50}/sub{i % 7}/note{i:05d}.md"
            text = f"# Note {i}\n\n" + "A line of team memory.\n" * 12
            path = team_dir / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            digests[key] = checksum(text)
        store = StateStore(Path(work) / "state.json")
        state = store.load(repo="acme/widgets", server="http://127.0.0.1:9", team_dir=team_dir)
        state.server_checksums, state.synced = dict(digests), dict(digests)
        engine = SyncEngine(state=state, store=store, folder=LocalFolder(team_dir), client=None,
                            notify=notify, find_secret=find_secret)
        await engine.refresh_pending()  # the first scan reads every file; later ones stat
        measured = {}

        # rescan: no runner vouches for the folder
        measured["rescan"] = [await worst_gap(engine.refresh_pending) for _ in range(rounds)]
        assert engine.state.pending == []

        # unchanged: the runner's watch in place (its pushes never due: a day's debounce)
        runner = SyncRunner(engine, tuning=Tuning(debounce_s=86400), report_error=report_error)
        ready = asyncio.Event()
        watching = asyncio.create_task(runner._watch(ready))
        await ready.wait()
        deadline = time.monotonic() + 60
        while runner.unchanged_token() is None:  # the setup's own events handed over
            assert time.monotonic() < deadline, "the watch never came clear"
            await asyncio.sleep(0.01)
        await engine.refresh_pending()  # the scan the next calls reuse
        measured["unchanged"] = [await worst_gap(engine.refresh_pending) for _ in range(rounds)]
        assert engine.state.pending == []

        # edited: one file rewritten just before each call
        edited = []
        for i in range(rounds):
            key = f"area{i % 50}/sub{i % 7}/note{i:05d}.md"
            (team_dir / key).write_text(f"# Note {i}\n\nEdited.\n", encoding="utf-8")
            edited.append(await worst_gap(engine.refresh_pending))
            assert key in engine.state.pending, key
        measured["edited"] = edited
        await runner.close()
        await watching
        print(json.dumps(measured))


asyncio.run(main())
"""
)


WAYS = ("rescan", "unchanged", "edited")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--files", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    print(f"team.status (refresh_pending), {args.files} files, median of {args.rounds} calls")
    print(
        f"{'run':4} {'way':10} {'longest loop stall (ms)':>24} {'wall (ms)':>10} "
        f"{'stall ratio':>12} {'wall ratio':>11}"
    )
    results = {}
    for run in ("1", "2"):
        measured = child_json(CHILD, str(args.files), str(args.rounds))
        results[run] = measured
        medians = {
            way: (
                statistics.median(g for g, _ in measured[way]) * 1000,
                statistics.median(w for _, w in measured[way]) * 1000,
            )
            for way in WAYS
        }
        base_gap, base_wall = medians["rescan"]
        for way in WAYS:
            gap, wall = medians[way]
            print(
                f"{run:4} {way:10} {gap:24.1f} {wall:10.1f} "
                f"{gap / base_gap:12.2f} {wall / base_wall:11.3f}"
            )
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
