"""Many clients pushing to one repository at once: the 412 path, old code against new, one run.

    .venv/bin/python bench/bench_team_contention.py [--old REV] [--clients 200]
        [--entries 2000] [--seconds 15] [--workers 1] [--no-sqlite] [--no-postgres]

`--clients` teammates (one httpx connection each, asyncio, in this process) loop for
`--seconds` on one repository of `--entries` entries: GET `view=hashes` (its ETag), then PUT
their own note with `If-Match`; a 412 starts the loop again, a 5xx or a dropped connection
backs off 0.1 s. Almost every PUT is stale under such contention: what a 412 costs decides how
many writes get through. Each backend runs `memoryd-team serve` from the old checkout (a `git
worktree` of `--old`) and then from this one, each on a fresh database seeded the same way
(SQLite; a durable PostgreSQL cluster started as the tests start one).

Printed per backend and code: successful writes/s, 412s/s, 5xx and transport errors, and the
p50/p95 latency of a 412 and of a successful PUT.

The change measured (session 21): a PUT's `If-Match` is checked against the repository's stored
ETag, one row, before the write lock (then again under it), where it was checked against every
entry's checksum, read and hashed under the lock.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from _harness import percentile
from _team_server import old_against_new, start_team_server

from memoryd.team.protocol import TEAM_MEMORY_PATH
from memoryd_team import auth
from memoryd_team.storage import open_storage
from memoryd_team.storage.base import Author

# The last commit before the change measured.
DEFAULT_OLD = "239f6f9"
REPO_NAME = "acme/monorepo"


def seed(database: str, entries: int) -> str:
    """A repository of `entries` notes, and a token for it; made with this checkout's code
    (the schema is the same in both)."""

    async def run() -> str:
        storage = open_storage(database)
        await storage.open()
        try:
            token = await auth.create_token(storage, (REPO_NAME,), "bench")
            notes = {
                f"notes/area-{i // 100:03d}/note-{i:05d}.md": f"note {i}: deploy after the migration.\n"
                * 8
                for i in range(entries)
            }
            await storage.put_entries(
                REPO_NAME,
                notes,
                None,
                max_entries=None,
                author=Author(token.info.id, "seed"),
                at=datetime.now(UTC),
            )
            return token.secret
        finally:
            await storage.close()

    return asyncio.run(run())


async def race(url: str, token: str, clients: int, seconds: float) -> dict[str, Any]:
    statuses: Counter[str] = Counter()
    latency: dict[str, list[float]] = {"200": [], "412": []}
    deadline = time.monotonic() + seconds

    async def teammate(index: int) -> None:
        async with httpx.AsyncClient(
            base_url=url,
            headers={"Authorization": f"Bearer {token}"},
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            timeout=httpx.Timeout(60.0, connect=10.0),
        ) as http:
            await asyncio.sleep(random.uniform(0, 0.5))
            edit = 0
            while time.monotonic() < deadline:
                try:
                    hashes = await http.get(
                        TEAM_MEMORY_PATH, params={"repo": REPO_NAME, "view": "hashes"}
                    )
                    if hashes.status_code != 200:
                        statuses[f"get {hashes.status_code}"] += 1
                        await asyncio.sleep(0.1)
                        continue
                    edit += 1
                    started = time.perf_counter()
                    reply = await http.put(
                        TEAM_MEMORY_PATH,
                        params={"repo": REPO_NAME},
                        json={"entries": {f"team/{index:03d}.md": f"edit {edit}\n"}},
                        headers={"If-Match": hashes.headers["etag"]},
                    )
                except httpx.HTTPError as exc:
                    statuses[type(exc).__name__] += 1
                    await asyncio.sleep(0.1)
                    continue
                status = str(reply.status_code)
                statuses[status] += 1
                if status in latency:
                    latency[status].append((time.perf_counter() - started) * 1000)
                elif reply.status_code >= 500:
                    await asyncio.sleep(0.1)

    started = time.monotonic()
    await asyncio.gather(*(teammate(i) for i in range(clients)))
    return {"statuses": statuses, "latency": latency, "elapsed": time.monotonic() - started}


def run_one(
    label: str, root: Path, database: str, args: argparse.Namespace, tmp: Path
) -> dict[str, Any]:
    token = seed(database, args.entries)
    process, url = start_team_server(
        database, tmp / f"{label}.log", ["--workers", str(args.workers)], root
    )
    try:
        return asyncio.run(race(url, token, args.clients, args.seconds))
    finally:
        process.terminate()
        process.wait(30)


def show(backend: str, results: dict[str, dict[str, Any]]) -> None:
    print(f"\n{backend}")
    print(
        f"  {'code':<5}{'writes/s':>9}{'412/s':>8}{'5xx+err':>8}"
        f"{'412 p50':>9}{'412 p95':>9}{'200 p50':>9}{'200 p95':>9}  ms"
    )
    for code, result in results.items():
        statuses, latency, elapsed = result["statuses"], result["latency"], result["elapsed"]
        errors = sum(n for s, n in statuses.items() if s not in ("200", "412"))
        print(
            f"  {code:<5}{statuses['200'] / elapsed:>9.1f}{statuses['412'] / elapsed:>8.1f}"
            f"{errors:>8}{percentile(latency['412'], 50):>9.1f}"
            f"{percentile(latency['412'], 95):>9.1f}{percentile(latency['200'], 50):>9.1f}"
            f"{percentile(latency['200'], 95):>9.1f}"
        )
        other = {s: n for s, n in statuses.items() if s not in ("200", "412")}
        if other:
            print(f"       other: {other}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", default=DEFAULT_OLD, help="the checkout to compare with")
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--workers", type=int, default=1, help="server processes")
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    os.environ.pop("MEMORYD_TEAM_DATABASE", None)
    print(
        f"{args.clients} clients on one repository of {args.entries} entries, {args.seconds:g} s "
        f"per run, {args.workers} server process(es), {os.cpu_count()} cores; old = {args.old}"
    )
    old_against_new(args, run_one, show)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
