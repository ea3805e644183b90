"""Team folder of 20,000 files: how long a pull with nothing new and a push of one edit hold
the event loop, old code against new, side by side in one run.

    .venv/bin/python bench/bench_team_state_save.py [--old REV] [--files 20000] [--rounds 5]

One `memoryd-team serve` (this checkout, SQLite) holds `--files` notes (~330 bytes each, in 350
folders), pushed by a seeding folder. Then, for the old tree (a `git worktree` of `--old`) and
this one, each in a process of its own: a `SyncEngine` pulls them into a fresh folder (not
timed), then `--rounds` times a pull the server answers 304 (what each `get_context` does once
a minute) and a push of one edited file (what the watcher does after every edit). A ticker
task sleeping 1 ms records the longest gap between its wake-ups during each call: how long
every other request of the daemon waited at worst. Printed: the median over the rounds of that
longest gap and of the call's wall time, for both trees.

The change measured (session 22): the sync state (4 MB of JSON for 20,000 files, saved after
every pull and push) is encoded and written in a thread (`StateStore.save_off_loop`), not on
the loop. Measured on the shared 2-core session machine (other suites running), 20,000 files,
5 rounds: see docs/team-memory.md, "Benchmark".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _harness import REPO, WORST_GAP_CODE, child_json, old_worktree
from _team_server import start_team_server

REPO_NAME = "acme/widgets"
# The last commit before the change measured.
DEFAULT_OLD = "da766df"

CHILD = (
    WORST_GAP_CODE
    + r"""
import asyncio, json, sys, time
from pathlib import Path
from memoryd.team.service import find_secret
from memoryd.team.sync.client import TeamClient
from memoryd.team.sync.engine import SyncEngine
from memoryd.team.sync.localfs import LocalFolder
from memoryd.team.sync.state import StateStore

url, token, repo, work, rounds = sys.argv[1:6]
team_dir = Path(work) / "team"
team_dir.mkdir(parents=True)


async def notify(_event, _params):
    return None


async def main():
    store = StateStore(Path(work) / "state.json")
    state = store.load(repo=repo, server=url, team_dir=team_dir)
    client = TeamClient(url, token, timeout_s=300)
    engine = SyncEngine(state=state, store=store, folder=LocalFolder(team_dir), client=client,
                        notify=notify, find_secret=find_secret)
    out = {"pull 304": [], "push one edit": []}
    try:
        cold = await engine.pull()
        out["cold pull: files written"] = len(cold.pulled)
        for n in range(int(rounds)):
            out["pull 304"].append(await worst_gap(engine.pull))
            (team_dir / "area1" / "sub1" / "note00001.md").write_text(f"edit {n}\n")
            out["push one edit"].append(await worst_gap(engine.push))
    finally:
        await client.close()
    out["state file bytes"] = store.path.stat().st_size
    print(json.dumps(out))


asyncio.run(main())
"""
)


async def seed(url: str, token: str, work: Path, files: int) -> None:
    sys.path.insert(0, str(REPO))
    from memoryd.team.service import find_secret
    from memoryd.team.sync.client import TeamClient
    from memoryd.team.sync.engine import SyncEngine
    from memoryd.team.sync.localfs import LocalFolder
    from memoryd.team.sync.state import StateStore

    team_dir = work / "seed" / "team"
    for i in range(files):
        path = team_dir / f"area{i % 50}" / f"sub{i % 7}" / f"note{i:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Note {i}\n\n" + "A line of team memory.\n" * 12, encoding="utf-8")

    async def notify(_event: str, _params: dict[str, object]) -> None:
        return None

    store = StateStore(work / "seed" / "state.json")
    client = TeamClient(url, token, timeout_s=300)
    engine = SyncEngine(
        state=store.load(repo=REPO_NAME, server=url, team_dir=team_dir),
        store=store,
        folder=LocalFolder(team_dir),
        client=client,
        notify=notify,
        find_secret=find_secret,
    )
    try:
        report = await engine.push()
    finally:
        await client.close()
    assert len(report.pushed) == files, len(report.pushed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--old", default=DEFAULT_OLD)
    parser.add_argument("--files", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="bench-state-save-") as raw,
        old_worktree(args.old) as old,
    ):
        work = Path(raw)
        database = f"sqlite://{work / 'team.sqlite3'}"
        server, url = start_team_server(
            database, work / "server.log", ("--max-entries", str(2 * args.files))
        )
        try:
            token = create_token(database)
            asyncio.run(seed(url, token, work, args.files))
            results = {}
            for label, tree in (("old", old), ("new", REPO)):
                measured = child_json(
                    CHILD, url, token, REPO_NAME, str(work / label), str(args.rounds), root=tree
                )
                results[label] = measured
        finally:
            server.terminate()
            server.wait(30)
    for label, measured in results.items():
        print(
            f"{label}: {measured['cold pull: files written']} files pulled, a state file of "
            f"{measured['state file bytes']:,} bytes"
        )
    print(f"{args.files} files, {args.rounds} rounds, median over the rounds")
    print(f"{'':16} {'longest loop stall (ms)':>26} {'wall (ms)':>20}")
    print(f"{'':16} {'old':>12} {'new':>12} {'old':>9} {'new':>9}")
    for op in ("pull 304", "push one edit"):  # the other keys are the diagnostics above
        gap = {k: statistics.median(g for g, _ in results[k][op]) * 1000 for k in results}
        wall = {k: statistics.median(w for _, w in results[k][op]) * 1000 for k in results}
        print(
            f"{op:16} {gap['old']:12.0f} {gap['new']:12.0f} {wall['old']:9.0f} {wall['new']:9.0f}"
        )
    print(json.dumps(results))
    return 0


def create_token(database: str) -> str:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "memoryd_team.cli",
            "token",
            "create",
            "--repo",
            REPO_NAME,
            "--database",
            database,
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    return done.stdout.strip().splitlines()[-1]


if __name__ == "__main__":
    raise SystemExit(main())
