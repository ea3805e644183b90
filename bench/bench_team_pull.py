"""A push, then every teammate pulls it: the server's cost per pull, old code against new, one run.

    .venv/bin/python bench/bench_team_pull.py [--old REV] [--teammates 50] [--entries 10000]
        [--rounds 5] [--no-sqlite] [--no-postgres]

A repository of `--entries` notes (~330 bytes each); each round one note changes (a PUT) and
then `--teammates` clients (asyncio + httpx, in this process) pull at once as the daemon does:
the first page (`view=page`, `If-None-Match` the ETag before the push: a 200 with every
checksum and the first 2 MiB of entries). One `memoryd-team serve` process per run, from the
old checkout (a `git worktree` of `--old`) and then from this one, each on a fresh database
seeded the same way (SQLite; a durable PostgreSQL cluster started as the tests start one).

Printed per backend and code: the server process's CPU time per pull (user + system, from
/proc), pulls/s, and the p50/p95 latency of a pull.

The change measured (session 21): GET bodies are kept encoded per ETag (`app.ReplyCache`), so
a state's first page is read and encoded once, not once per teammate.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path
from typing import Any

import httpx
from _harness import cpu_seconds, percentile
from _team_server import old_against_new, start_team_server
from bench_team_contention import REPO_NAME, seed

from memoryd.team.protocol import TEAM_MEMORY_PATH

# The last commit before the change measured.
DEFAULT_OLD = "8ecd918"


def note(i: int, edit: int = 0) -> str:
    return f"note {i} (edit {edit}): deploy after the migration, then warm the caches.\n" * 4


async def run_rounds(url: str, token: str, pid: int, args: argparse.Namespace) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=args.teammates + 1)
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=120) as http:
        params = {"repo": REPO_NAME}
        notes = {f"notes/area-{i // 100:03d}/note-{i:05d}.md": note(i) for i in range(args.entries)}
        keys = sorted(notes)
        etag: str | None = None
        for start in range(0, len(keys), 500):  # PUT bodies stay under the 2 MiB cap
            batch = {key: notes[key] for key in keys[start : start + 500]}
            reply = await http.put(
                TEAM_MEMORY_PATH,
                params=params,
                json={"entries": batch},
                headers={"If-Match": etag} if etag else {},
            )
            reply.raise_for_status()
            etag = reply.headers["etag"]
        latencies: list[float] = []
        cpu = 0.0
        wall = 0.0
        for round_ in range(args.rounds):
            assert etag is not None
            before_push = etag
            reply = await http.put(
                TEAM_MEMORY_PATH,
                params=params,
                json={"entries": {keys[round_]: note(round_, edit=1)}},
                headers={"If-Match": etag},
            )
            reply.raise_for_status()
            etag = reply.headers["etag"]

            async def pull(before_push: str, etag: str) -> None:
                started = time.perf_counter()
                got = await http.get(
                    TEAM_MEMORY_PATH,
                    params={**params, "view": "page"},
                    headers={"If-None-Match": before_push},
                )
                assert got.status_code == 200, got.status_code
                assert got.headers["etag"] == etag
                latencies.append((time.perf_counter() - started) * 1000)

            cpu_before, started = cpu_seconds(pid), time.perf_counter()
            await asyncio.gather(*(pull(before_push, etag) for _ in range(args.teammates)))
            wall += time.perf_counter() - started
            cpu += cpu_seconds(pid) - cpu_before
    pulls = args.rounds * args.teammates
    return {"cpu_ms": cpu / pulls * 1000, "per_s": pulls / wall, "latencies": latencies}


def run_one(label: str, root: Path, database: str, args: argparse.Namespace, tmp: Path) -> Any:
    token = seed(database, 0)  # a token; the notes go up over HTTP
    process, url = start_team_server(database, tmp / f"{label}.log", root=root)
    try:
        return asyncio.run(run_rounds(url, token, process.pid, args))
    finally:
        process.terminate()
        process.wait(30)


def show(backend: str, results: dict[str, dict[str, Any]]) -> None:
    print(f"\n{backend}")
    print(f"  {'code':<5}{'CPU ms/pull':>12}{'pulls/s':>9}{'p50 ms':>9}{'p95 ms':>9}")
    for code, r in results.items():
        print(
            f"  {code:<5}{r['cpu_ms']:>12.1f}{r['per_s']:>9.1f}"
            f"{percentile(r['latencies'], 50):>9.1f}{percentile(r['latencies'], 95):>9.1f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", default=DEFAULT_OLD, help="the checkout to compare with")
    parser.add_argument("--teammates", type=int, default=50)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    os.environ.pop("MEMORYD_TEAM_DATABASE", None)
    print(
        f"{args.teammates} teammates pull after each of {args.rounds} pushes, a repository of "
        f"{args.entries} entries, one server process, {os.cpu_count()} cores; old = {args.old}"
    )
    old_against_new(args, run_one, show)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
