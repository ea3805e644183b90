"""Team sync client: cold push of 5,000 entries (20 MB) vs a plain httpx loop, and no-op pushes.

    .venv/bin/python bench/bench_team_push.py [--entries 5000] [--entry-bytes 4000] [--rounds 2]

A real `memoryd-team serve` (SQLite, one uvicorn worker) runs on loopback. Measured side by
side in one run, each round on fresh empty repositories:
- baseline: a plain httpx loop PUTting the same batches (planned in advance from memory,
  If-Match chained) — the floor any client pays for the wire and the server;
- memoryd: `SyncEngine.push()` from a cold state — scanning and hashing 5,000 files, the
  secret scan of every entry, batching, the PUTs, persisting the sync state.
  ratio = baseline time / memoryd time (1.0 = no client overhead; goal ≥ 0.8);
- memoryd without the secret scan (diagnostic: how much of the gap the scanner is).
- no-op push: 5,000 unchanged files, warm stat cache (the steady state): no request at all.
- no-op push after a restart: a new engine over the persisted state (cold stat cache: every
  file is hashed again, still no request).
File mtimes are set 1 h back before the no-op runs: files written in the last 2 s are always
re-hashed (the "racy git" guard in localfs.py), which is not the steady state being measured.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from _team_server import start_team_server  # noqa: E402

from memoryd.team.protocol import TEAM_MEMORY_PATH, plan_batches  # noqa: E402
from memoryd.team.service import find_secret  # noqa: E402
from memoryd.team.sync.client import TeamClient  # noqa: E402
from memoryd.team.sync.engine import SyncEngine  # noqa: E402
from memoryd.team.sync.localfs import LocalFolder  # noqa: E402
from memoryd.team.sync.state import StateStore  # noqa: E402

WORDS = [
    "the",
    "deploy",
    "runs",
    "migrations",
    "first",
    "then",
    "restarts",
    "workers;",
    "staging",
    "mirrors",
    "production;",
    "ask",
    "the",
    "on-call",
    "before",
    "touching",
    "billing;",
    "tests",
    "use",
    "a",
    "real",
    "database,",
    "never",
    "mocks;",
    "the",
    "API",
    "is",
    "versioned",
    "under",
    "/v2",
    "and",
    "old",
    "clients",
    "keep",
    "/v1",
    "for",
    "a",
    "year;",
]


def entry_text(n: int, size: int) -> str:
    head = f"---\nname: note {n}\ndescription: team note number {n}\ntype: project\n---\n"
    body: list[str] = []
    length = len(head)
    i = n
    while length < size:
        word = WORDS[i % len(WORDS)]
        body.append(word)
        length += len(word) + 1
        i += 7
    return (head + " ".join(body))[:size]


def start_server(tmp: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    database = f"sqlite://{tmp / 'team.sqlite3'}"
    process, url = start_team_server(database, tmp / "server.log")
    return process, url, database


def token_for(database: str, repos: list[str]) -> str:
    args = [
        sys.executable,
        "-m",
        "memoryd_team.cli",
        "token",
        "create",
        "--database",
        database,
    ]
    for repo in repos:
        args += ["--repo", repo]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return out.strip().splitlines()[-1]


async def baseline(url: str, token: str, repo: str, entries: dict[str, str]) -> float:
    batches = [{k: entries[k] for k in batch} for batch in plan_batches(entries).batches]
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60
    ) as http:
        etag: str | None = None
        start = time.perf_counter()
        for batch in batches:
            headers = {"If-Match": etag} if etag else {}
            reply = await http.put(
                TEAM_MEMORY_PATH, params={"repo": repo}, json={"entries": batch}, headers=headers
            )
            reply.raise_for_status()
            etag = reply.headers["etag"]
        return time.perf_counter() - start


POOL: ProcessPoolExecutor | None = None


def scan_pool() -> ProcessPoolExecutor:
    """The daemon's arrangement (TeamSync.scan_pool): one spawned worker for large scans."""
    global POOL
    if POOL is None:
        POOL = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    return POOL


def make_engine(
    url: str, token: str, repo: str, team: Path, state_file: Path, *, scan: bool = True
) -> SyncEngine:
    store = StateStore(state_file)
    state = store.load(repo=repo, server=url, team_dir=team)

    async def notify(_event: str, _params: dict[str, Any]) -> None:
        return None

    return SyncEngine(
        state=state,
        store=store,
        folder=LocalFolder(team),
        client=TeamClient(url, token),
        notify=notify,
        find_secret=find_secret if scan else (lambda _text: None),
        scan_pool=scan_pool if scan else None,
    )


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="mdbench-team-") as raw:
        tmp = Path(raw)
        os.environ["XDG_STATE_HOME"] = str(tmp / "state")
        process, url, database = start_server(tmp)
        try:
            await measure(args, tmp, url, database)
        finally:
            process.terminate()
            process.wait(15)
            if POOL is not None:
                POOL.shutdown()


async def measure(args: argparse.Namespace, tmp: Path, url: str, database: str) -> None:
    entries = {f"notes/n{i:05d}.md": entry_text(i, args.entry_bytes) for i in range(args.entries)}
    total = sum(len(v.encode()) for v in entries.values())
    plan = plan_batches(entries)
    print(
        f"{len(entries)} entries, {total / 1e6:.1f} MB, {len(plan.batches)} PUT batches of ≤ 200,000 bytes"
    )
    repos = [f"bench/r{i}" for i in range(3 * args.rounds)]
    token = token_for(database, repos)
    base_times: list[float] = []
    ours_times: list[float] = []
    unscanned_times: list[float] = []
    engine: SyncEngine | None = None
    team = tmp / "team"
    for path_key, text in entries.items():
        path = team / path_key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for r in range(args.rounds):
        base_times.append(await baseline(url, token, repos[3 * r], entries))
        for scan, times, repo in (
            (True, ours_times, 3 * r + 1),
            (False, unscanned_times, 3 * r + 2),
        ):
            if engine is not None and engine.client is not None:
                await engine.client.close()
            state_file = tmp / f"state-{repo}.json"
            engine = make_engine(url, token, repos[repo], team, state_file, scan=scan)
            start = time.perf_counter()
            report = await engine.push()
            times.append(time.perf_counter() - start)
            assert len(report.pushed) == len(entries), (len(report.pushed), report.skipped)
        print(
            f"round {r + 1}: baseline {base_times[-1]:.2f} s, memoryd {ours_times[-1]:.2f} s, "
            f"memoryd without the secret scan {unscanned_times[-1]:.2f} s "
            f"({report.requests} requests each)"
        )
    best_base, best_ours = min(base_times), min(ours_times)
    print(
        f"cold push: baseline {best_base:.2f} s, memoryd {best_ours:.2f} s, "
        f"ratio {best_base / best_ours:.2f} (goal >= 0.8; best of {args.rounds}); "
        f"without the secret scan {min(unscanned_times):.2f} s, "
        f"ratio {best_base / min(unscanned_times):.2f}"
    )

    assert engine is not None
    assert engine.client is not None
    past = time.time() - 3600
    for path in team.rglob("*.md"):
        os.utime(path, (past, past))
    await engine.push()  # re-stat once after the utime (ctime moved): fills the cache
    noop: list[float] = []
    for _ in range(args.noop_runs):
        before = engine.client.requests
        start = time.perf_counter()
        report = await engine.push()
        noop.append((time.perf_counter() - start) * 1000)
        assert engine.client.requests == before
        assert not report.pushed
    print(
        f"no-op push, {len(entries)} unchanged files: median {statistics.median(noop):.1f} ms, "
        f"max {max(noop):.1f} ms over {len(noop)} runs, 0 requests (goal < 50 ms)"
    )
    await engine.client.close()

    restarted = make_engine(url, token, repos[3 * args.rounds - 1], team, engine.store.path)
    start = time.perf_counter()
    report = await restarted.push()
    cold_noop = (time.perf_counter() - start) * 1000
    assert restarted.client is not None
    assert restarted.client.requests == 0
    print(f"no-op push after a restart (every file re-hashed): {cold_noop:.0f} ms, 0 requests")
    await restarted.client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=5000)
    parser.add_argument("--entry-bytes", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--noop-runs", type=int, default=15)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
