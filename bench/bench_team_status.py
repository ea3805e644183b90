"""`team.status` on a team folder of 10,000 files: how long it holds the event loop and how
long it takes before it answers.

    .venv/bin/python bench/bench_team_status.py [--files 10000] [--rounds 9]

In a process of its own: a folder of `--files` notes (~330 bytes each, in 350 folders) in step
with the server (its sync state says so; no server is asked: `team.status` never is), then
`--rounds` times what `team.status` does before it answers (`SyncEngine.refresh_pending`: a
scan of the folder in a thread, a stat per file, and the pending delta). A ticker task sleeping
1 ms records the longest gap between its wake-ups during each call: how long every other
request of the daemon waited at worst. Printed: the median over the rounds of that longest
gap and of the call's wall time, run twice. Figures in docs/team-memory.md ("Status").
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

files, rounds = int(sys.argv[1]), int(sys.argv[2])


async def notify(_event, _params):
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
        measured = [await worst_gap(engine.refresh_pending) for _ in range(rounds)]
        assert engine.state.pending == []
        print(json.dumps(measured))


asyncio.run(main())
"""
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--files", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    print(f"team.status (refresh_pending), {args.files} files, median of {args.rounds} calls")
    print(f"{'run':6} {'longest loop stall (ms)':>24} {'wall (ms)':>10}")
    results = {}
    for run in ("1", "2"):
        measured = child_json(CHILD, str(args.files), str(args.rounds))
        results[run] = measured
        gap = statistics.median(g for g, _ in measured) * 1000
        wall = statistics.median(w for _, w in measured) * 1000
        print(f"{run:6} {gap:24.1f} {wall:10.0f}")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
