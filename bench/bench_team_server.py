"""Team server throughput: 20 concurrent clients, PUT and GET, on SQLite and on PostgreSQL.

    .venv/bin/python bench/bench_team_server.py [--clients 20] [--puts 40] [--gets 100]

Each backend gets its own `memoryd-team serve` process (one uvicorn worker) on loopback; the
clients run in this process on asyncio + httpx. Both databases run durable (SQLite WAL with
synchronous=FULL, PostgreSQL with its default fsync/synchronous_commit), so their figures
compare like with like. PostgreSQL is a throwaway cluster started like the tests start it
(tests/team_server/pg.py); without its binaries that half is skipped with a message.

Scenarios, all measured in one run:
- put/own-repo: each client PUTs a batch of 10 entries × 2 KB to its own repo, If-Match chained.
- put/one-repo: all clients write one shared repo (GET hashes → PUT If-Match, retry on 412):
  successful writes per second and the 412 rate, i.e. the cost of the repo write lock.
- get/full: GET the whole repo (100 entries × 2 KB = 200 KB).
- get/304: GET with a matching If-None-Match (the client's steady state).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from _team_server import start_team_server  # noqa: E402

from memoryd.team.protocol import TEAM_MEMORY_PATH  # noqa: E402
from tests.team_server.pg import PgCluster, find_pg_bin, missing_message  # noqa: E402

ENTRY_BYTES = 2_000


def _content(tag: str, n: int) -> str:
    line = f"{tag} entry {n}: remember to run the migrations before the deploy. "
    return (line * (ENTRY_BYTES // len(line) + 1))[:ENTRY_BYTES]


def create_token(database: str, repos: list[str]) -> str:
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
    result = subprocess.run(args, capture_output=True, text=True, check=True)
    return result.stdout.strip().splitlines()[-1]


async def timed(clients: int, work: Callable[[int], Awaitable[int]]) -> tuple[float, int]:
    """Run `work(i)` for every client at once; returns elapsed seconds and total requests."""
    start = time.perf_counter()
    counts = await asyncio.gather(*(work(i) for i in range(clients)))
    return time.perf_counter() - start, sum(counts)


async def run_backend(
    label: str, database: str, args: argparse.Namespace, tmp: Path
) -> dict[str, str]:
    clients = args.clients
    repos = [f"bench/repo{i}" for i in range(clients)] + ["bench/shared"]
    token = create_token(database, repos)
    process, url = start_team_server(database, tmp / f"{label}.log")
    results: dict[str, str] = {}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Authorization": f"Bearer {token}"}
    try:
        async with httpx.AsyncClient(
            base_url=url, headers=headers, limits=limits, timeout=60
        ) as http:
            endpoint = TEAM_MEMORY_PATH

            # put/own-repo ---------------------------------------------------------------
            async def own_repo(i: int) -> int:
                repo = repos[i]
                etag: str | None = None
                for n in range(args.puts):
                    batch = {f"k{j:02d}.md": _content(f"{repo} {n}", j) for j in range(10)}
                    extra = {"If-Match": etag} if etag else {}
                    reply = await http.put(
                        endpoint, params={"repo": repo}, json={"entries": batch}, headers=extra
                    )
                    reply.raise_for_status()
                    etag = reply.headers["etag"]
                return args.puts

            elapsed, count = await timed(clients, own_repo)
            mb = count * 10 * ENTRY_BYTES / 1e6
            results["put/own-repo"] = f"{count / elapsed:8.1f} req/s  {mb / elapsed:6.2f} MB/s"

            # put/one-repo (contended) ----------------------------------------------------
            seed = await http.put(
                endpoint, params={"repo": "bench/shared"}, json={"entries": {"seed.md": "0"}}
            )
            seed.raise_for_status()
            conflicts = 0

            async def one_repo(i: int) -> int:
                nonlocal conflicts
                requests = 0
                for n in range(args.puts // 4):
                    while True:
                        hashes = await http.get(
                            endpoint, params={"repo": "bench/shared", "view": "hashes"}
                        )
                        reply = await http.put(
                            endpoint,
                            params={"repo": "bench/shared"},
                            json={"entries": {f"c{i}.md": _content(f"c{i} {n}", 0)}},
                            headers={"If-Match": hashes.headers["etag"]},
                        )
                        requests += 2
                        if reply.status_code == 200:
                            break
                        if reply.status_code != 412:
                            reply.raise_for_status()
                        conflicts += 1
                return requests

            elapsed, count = await timed(clients, one_repo)
            writes = clients * (args.puts // 4)
            results["put/one-repo"] = (
                f"{writes / elapsed:8.1f} writes/s  ({conflicts} × 412 for {writes} writes)"
            )

            # get/full and get/304 -------------------------------------------------------
            big = {f"g{j:03d}.md": _content("get", j) for j in range(100)}
            for repo in repos[:clients]:
                # Each own-repo already holds 10 keys; give it the 100-entry read set too.
                etag = (await http.get(endpoint, params={"repo": repo, "view": "hashes"})).headers[
                    "etag"
                ]
                (
                    await http.put(
                        endpoint,
                        params={"repo": repo},
                        json={"entries": big},
                        headers={"If-Match": etag},
                    )
                ).raise_for_status()
            etags = {
                repo: (await http.get(endpoint, params={"repo": repo, "view": "hashes"})).headers[
                    "etag"
                ]
                for repo in repos[:clients]
            }

            async def get_full(i: int) -> int:
                for _ in range(args.gets):
                    (await http.get(endpoint, params={"repo": repos[i]})).raise_for_status()
                return args.gets

            elapsed, count = await timed(clients, get_full)
            results["get/full"] = f"{count / elapsed:8.1f} req/s  (220 KB bodies)"

            async def get_304(i: int) -> int:
                for _ in range(args.gets):
                    reply = await http.get(
                        endpoint,
                        params={"repo": repos[i]},
                        headers={"If-None-Match": etags[repos[i]]},
                    )
                    assert reply.status_code == 304, reply.status_code
                return args.gets

            elapsed, count = await timed(clients, get_304)
            results["get/304"] = f"{count / elapsed:8.1f} req/s"
    finally:
        process.terminate()
        process.wait(15)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--puts", type=int, default=40, help="PUTs per client (own repo)")
    parser.add_argument("--gets", type=int, default=100, help="GETs per client")
    args = parser.parse_args()
    os.environ.pop("MEMORYD_TEAM_DATABASE", None)

    with tempfile.TemporaryDirectory(prefix="bench-team-") as raw:
        tmp = Path(raw)
        table: dict[str, dict[str, str]] = {}
        table["sqlite"] = asyncio.run(
            run_backend("sqlite", f"sqlite://{tmp / 'team.sqlite3'}", args, tmp)
        )
        bin_dir = find_pg_bin()
        if bin_dir is None:
            print(f"postgresql: skipped ({missing_message()})")
        else:
            cluster = PgCluster(bin_dir, durable=True).start()
            try:
                url = cluster.create_database("bench")
                table["postgresql"] = asyncio.run(run_backend("postgresql", url, args, tmp))
            finally:
                cluster.stop()

    print(
        f"team server, {args.clients} concurrent clients, one server process, {os.cpu_count()} cores"
    )
    for scenario in table["sqlite"]:
        print(f"\n{scenario}")
        for backend, results in table.items():
            print(f"  {backend:<10} {results[scenario]}")
    if "postgresql" in table:
        print("\nratios postgresql / sqlite (req/s):")
        for scenario in ("put/own-repo", "get/full", "get/304"):
            pg = float(table["postgresql"][scenario].split()[0])
            lite = float(table["sqlite"][scenario].split()[0])
            print(f"  {scenario:<14} {pg / lite:5.2f}")


if __name__ == "__main__":
    main()
