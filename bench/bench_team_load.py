"""Team server at company scale: many repositories, many clients, several server processes.

    .venv/bin/python bench/bench_team_load.py [--repos 50] [--clients 20] [--seconds 60]
        [--workers 3] [--client-procs 2] [--fault] [--no-sqlite]

`repos × clients` teammates (separate `httpx.AsyncClient`s, one connection each, spread over
`--client-procs` processes) pull and push concurrently for `--seconds` against
`memoryd-team serve --workers N` on a real, durable PostgreSQL (a throwaway cluster started as
the tests start one), then against one process on SQLite, in the same run; loopback only.

A teammate loops as the daemon does: GET the first page (`view=page`, If-None-Match: the ETag
it knows; it carries every checksum), then only the pages that start at a key it does not have;
then PUT its own note — and one time in five the repository's shared note, so some PUTs really
conflict — with If-Match; a 412 pulls and retries (twice). A 5xx or a dropped connection backs
off (exponential, jittered, capped at 2 s) and retries.

Printed per backend: requests/s and p50/p95/p99 latency per operation, status counts, and the
server's peak RSS (the sum over its processes, sampled every 0.2 s). Then the checks, read
straight from the database afterwards:
- every version a client got a 200 for is in the server's history (lost must be 0);
- every 412 was a real conflict: the ETag in the 412 differs from the one sent (no false
  412), and the one sent had been replaced by a write some client got a 200 for (its If-Match).
  In the fault run a write whose 200 was lost with the connection can replace a state too:
  those 412s are counted apart, not as failures.

`--fault` (PostgreSQL only): during the load, SIGKILL one server worker (uvicorn starts a new
one) and restart PostgreSQL once; clients back off and finish; the same checks must hold.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from _harness import percentile  # noqa: E402
from _team_server import start_team_server  # noqa: E402

from memoryd.team.protocol import TEAM_MEMORY_PATH, checksum  # noqa: E402
from tests.team_server.pg import PgCluster, find_pg_bin, missing_message  # noqa: E402

NOTE_BYTES = 1_500
BACKOFF_CAP_S = 2.0


# --- one client process ------------------------------------------------------------------------


class Teammate:
    """One teammate: its own httpx client (one connection), its repo's token and its note."""

    def __init__(self, url: str, repo: str, token: str, index: int, log: list[dict[str, Any]]):
        self.repo = repo
        self.key = f"notes/teammate-{index:02d}.md"
        self.index = index
        self.http = httpx.AsyncClient(
            base_url=url,
            headers={"Authorization": f"Bearer {token}"},
            # Idle connections are dropped before uvicorn's 5 s keep-alive closes them, so a
            # request never races the server's close (a client-side artefact, not a failure).
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=3),
            timeout=httpx.Timeout(30.0, connect=5.0),
            verify=False,  # noqa: S501 - plain HTTP on loopback; skips loading CA certificates
        )
        self.etag: str | None = None
        self.checksums: dict[str, str] = {}
        self.log = log
        self.edits = 0
        self.failures = 0

    async def request(self, op: str, method: str, **kwargs: Any) -> httpx.Response | None:
        """One request, logged; None after a transport error or a 5xx (the caller backs off)."""
        start = time.perf_counter()
        try:
            response = await self.http.request(method, TEAM_MEMORY_PATH, **kwargs)
        except httpx.HTTPError as exc:
            self.log.append({"op": op, "status": type(exc).__name__, "ms": _ms(start)})
            return None
        self.log.append({"op": op, "status": response.status_code, "ms": _ms(start)})
        return None if response.status_code >= 500 else response

    async def backoff(self) -> None:
        self.failures += 1
        delay = min(BACKOFF_CAP_S, 0.05 * 2 ** min(self.failures, 6))
        await asyncio.sleep(delay * random.uniform(0.5, 1.5))

    async def pull(self) -> bool:
        """As the daemon pulls: the first page (every checksum, 304 when nothing changed),
        then only the pages that start at a key whose checksum this teammate does not have."""
        headers = {"If-None-Match": self.etag} if self.etag else {}
        params = {"repo": self.repo, "view": "page"}
        response = await self.request("get", "GET", params=params, headers=headers)
        if response is None:
            return False
        if response.status_code in (304, 404):
            return True
        document = response.json()
        etag = response.headers["etag"]
        server = document["entryChecksums"]
        needed = sorted(k for k, v in server.items() if self.checksums.get(k) != v)
        while True:
            for key, content in document["entries"].items():
                if checksum(content) != document["entryChecksums"][key]:
                    raise SystemExit(f"{self.repo} {key}: content does not match its checksum")
            following = document["next"]
            start = next((k for k in needed if following is not None and k >= following), None)
            if start is None:
                break
            params = {"repo": self.repo, "view": "page", "from": start}
            page = await self.request("get_page", "GET", params=params)
            if page is None:
                return False
            document = page.json()
        self.checksums = dict(server)
        self.etag = etag
        return True

    async def push(self, accepted: list[dict[str, Any]], refused: list[dict[str, Any]]) -> bool:
        self.edits += 1
        key = "shared.md" if random.random() < 0.2 else self.key
        line = (
            f"teammate {self.index} of {self.repo}, edit {self.edits}: deploy after the migration. "
        )
        content = (line * (NOTE_BYTES // len(line) + 1))[:NOTE_BYTES]
        for _ in range(3):
            headers = {"Content-Type": "application/json"}
            if self.etag:
                headers["If-Match"] = self.etag
            sent = self.etag
            body = json.dumps({"entries": {key: content}}).encode()
            response = await self.request(
                "put", "PUT", params={"repo": self.repo}, headers=headers, content=body
            )
            if response is None:
                return False
            if response.status_code == 200:
                new = response.headers["etag"]
                accepted.append(
                    {"repo": self.repo, "key": key, "checksum": checksum(content), "sent": sent}
                )
                self.etag = new
                self.checksums[key] = checksum(content)
                return True
            if response.status_code == 412:
                refused.append(
                    {"repo": self.repo, "sent": sent, "current": response.headers.get("etag")}
                )
                if not await self.pull():
                    return False
                continue
            raise SystemExit(f"unexpected PUT status {response.status_code}: {response.text}")
        return True

    async def run(
        self, deadline: float, accepted: list[dict[str, Any]], refused: list[Any]
    ) -> None:
        try:
            await asyncio.sleep(random.uniform(0, 1.0))  # do not all start in the same instant
            while time.monotonic() < deadline:
                ok = await self.pull() and await self.push(accepted, refused)
                if ok:
                    self.failures = 0
                    await asyncio.sleep(random.uniform(0.05, 0.3))
                else:
                    await self.backoff()
        finally:
            await self.http.aclose()


async def client_process(spec: dict[str, Any]) -> dict[str, Any]:
    log: list[dict[str, Any]] = []
    accepted: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []
    deadline = time.monotonic() + spec["seconds"]
    teammates = [Teammate(spec["url"], repo, token, i, log) for repo, token, i in spec["teammates"]]
    await asyncio.gather(*(t.run(deadline, accepted, refused) for t in teammates))
    return {"log": log, "accepted": accepted, "refused": refused}


# --- the driver ----------------------------------------------------------------------------------


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def make_tokens(database: str, repos: list[str]) -> dict[str, str]:
    """One token per repository, bound to it alone, made straight in the database."""
    from memoryd_team import auth
    from memoryd_team.storage import open_storage

    async def make() -> dict[str, str]:
        storage = open_storage(database)
        await storage.open()
        try:
            return {
                repo: (await auth.create_token(storage, (repo,), repo)).secret for repo in repos
            }
        finally:
            await storage.close()

    return asyncio.run(make())


def history(database: str, repos: list[str]) -> dict[str, set[tuple[str, str]]]:
    """(key, checksum) of every stored version, per repository."""
    from memoryd_team.storage import open_storage

    async def read() -> dict[str, set[tuple[str, str]]]:
        storage = open_storage(database)
        await storage.open()
        try:
            return {
                repo: {(v.key, v.checksum) for v in await storage.history(repo)} for repo in repos
            }
        finally:
            await storage.close()

    return asyncio.run(read())


def process_tree_rss_kb(pid: int) -> list[int]:
    """VmRSS of `pid` and each of its descendants, in KiB."""
    sizes: list[int] = []
    pids = [pid]
    while pids:
        current = pids.pop()
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    sizes.append(int(line.split()[1]))
        with contextlib.suppress(OSError):
            for child in Path(f"/proc/{current}/task/{current}/children").read_text().split():
                pids.append(int(child))
    return sizes


def worker_pids(pid: int) -> list[int]:
    """uvicorn's worker processes under the supervisor `pid` (not the resource tracker)."""
    workers: list[int] = []
    with contextlib.suppress(OSError):
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            with contextlib.suppress(OSError):
                if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                    workers.append(int(child))
    return workers


class RssSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_kb = 0  # all the server's processes together
        self.peak_process_kb = 0  # the largest one
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.2):
            sizes = process_tree_rss_kb(self.pid)
            self.peak_kb = max(self.peak_kb, sum(sizes))
            self.peak_process_kb = max([self.peak_process_kb, *sizes])


def run_clients(
    url: str, tokens: dict[str, str], args: argparse.Namespace, tmp: Path
) -> dict[str, Any]:
    teammates = [(repo, tokens[repo], i) for repo in tokens for i in range(args.clients)]
    shards = [teammates[n :: args.client_procs] for n in range(args.client_procs)]
    procs = []
    for n, shard in enumerate(shards):
        spec = tmp / f"clients-{n}.json"
        spec.write_text(json.dumps({"url": url, "seconds": args.seconds, "teammates": shard}))
        out = tmp / f"clients-{n}.out.json"
        procs.append(
            (
                subprocess.Popen([sys.executable, __file__, "--client-spec", str(spec), str(out)]),
                out,
            )
        )
    merged: dict[str, Any] = {"log": [], "accepted": [], "refused": []}
    for proc, out in procs:
        if proc.wait(timeout=args.seconds + 120) != 0:
            raise SystemExit(f"a client process failed ({proc.returncode})")
        part = json.loads(out.read_text())
        for name in merged:
            merged[name] += part[name]
    return merged


def report(label: str, result: dict[str, Any], seconds: float, sampler: RssSampler) -> None:
    by_op: dict[str, list[float]] = defaultdict(list)
    statuses: dict[str, Counter[str]] = defaultdict(Counter)
    for row in result["log"]:
        by_op[row["op"]].append(row["ms"])
        statuses[row["op"]][str(row["status"])] += 1
    total = sum(len(v) for v in by_op.values())
    print(
        f"\n== {label}: {total} requests in {seconds:.0f} s = {total / seconds:.0f} req/s; "
        f"server peak RSS {sampler.peak_kb / 1024:.0f} MB in all "
        f"({sampler.peak_process_kb / 1024:.0f} MB the largest process)"
    )
    print(f"  {'op':<11}{'req/s':>8}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}  statuses")
    for op in ("get", "get_page", "put"):
        values = by_op.get(op, [])
        counts = ", ".join(f"{s}×{n}" for s, n in sorted(statuses[op].items()))
        print(
            f"  {op:<11}{len(values) / seconds:>8.1f}{percentile(values, 50):>9.1f}"
            f"{percentile(values, 95):>9.1f}{percentile(values, 99):>9.1f}  {counts}"
        )


def check(
    label: str, result: dict[str, Any], database: str, repos: list[str], *, fault: bool
) -> bool:
    stored = history(database, repos)
    lost = [a for a in result["accepted"] if (a["key"], a["checksum"]) not in stored[a["repo"]]]
    # The ETags each repository moved away from through an accepted write.
    replaced: dict[str, set[str | None]] = defaultdict(set)
    for a in result["accepted"]:
        replaced[a["repo"]].add(a["sent"])
    false = [r for r in result["refused"] if r["current"] == r["sent"]]
    unexplained = [
        r
        for r in result["refused"]
        if r["current"] != r["sent"] and r["sent"] not in replaced[r["repo"]]
    ]
    print(
        f"  {label}: {len(result['accepted'])} PUTs got a 200, lost {len(lost)}; "
        f"{len(result['refused'])} × 412: same ETag (false) {len(false)}, "
        f"state not replaced by an acknowledged write {len(unexplained)}"
        + (" (writes whose 200 was lost in the faults)" if fault else "")
    )
    for item in (lost + false + ([] if fault else unexplained))[:5]:
        print("   ", item)
    return not lost and not false and (fault or not unexplained)


def run_backend(
    label: str,
    database: str,
    args: argparse.Namespace,
    tmp: Path,
    *,
    workers: int,
    cluster: PgCluster | None = None,
) -> bool:
    repos = [f"load/repo-{i:02d}" for i in range(args.repos)]
    tokens = make_tokens(database, repos)
    extra = ["--page-bytes", str(args.page_bytes), "--workers", str(workers)]
    logs = Path(args.log_dir) if args.log_dir else tmp
    process, url = start_team_server(database, logs / f"{label.split(',')[0]}.log", extra)
    sampler = RssSampler(process.pid)
    sampler.start()
    faults: list[threading.Timer] = []
    if args.fault and cluster is not None:

        def kill_worker() -> None:
            victims = worker_pids(process.pid)
            if victims:
                os.kill(victims[0], signal.SIGKILL)
                print(f"  [fault] SIGKILL server worker {victims[0]}", flush=True)

        def restart_postgres() -> None:
            print("  [fault] restarting PostgreSQL", flush=True)
            cluster.restart()
            print("  [fault] PostgreSQL is back", flush=True)

        faults = [
            threading.Timer(args.seconds * 0.3, kill_worker),
            threading.Timer(args.seconds * 0.6, restart_postgres),
        ]
        for timer in faults:
            timer.start()
    start = time.monotonic()
    try:
        result = run_clients(url, tokens, args, tmp)
    finally:
        elapsed = time.monotonic() - start
        for timer in faults:
            timer.join()
        sampler.stop.set()
        sampler.join()
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
    report(label, result, min(elapsed, args.seconds + 1.0), sampler)
    return check(label, result, database, repos, fault=args.fault and cluster is not None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repos", type=int, default=50)
    parser.add_argument("--clients", type=int, default=20, help="teammates per repository")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=3, help="server processes on PostgreSQL")
    parser.add_argument("--client-procs", type=int, default=2)
    parser.add_argument(
        "--page-bytes",
        type=int,
        default=16_384,
        help="the servers' page size: small, so a repository spans a few pages under load",
    )
    parser.add_argument("--fault", action="store_true", help="kill a worker, restart PostgreSQL")
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--log-dir", help="keep the servers' logs here")
    parser.add_argument("--client-spec", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client_spec:
        spec = json.loads(Path(args.client_spec[0]).read_text())
        Path(args.client_spec[1]).write_text(json.dumps(asyncio.run(client_process(spec))))
        return 0
    print(
        f"{args.repos} repositories × {args.clients} teammates = {args.repos * args.clients} "
        f"clients in {args.client_procs} processes, {args.seconds:.0f} s per backend"
        + (" — fault run" if args.fault else "")
    )
    ok = True
    with tempfile.TemporaryDirectory(prefix="memoryd-load-") as raw:
        tmp = Path(raw)
        bin_dir = find_pg_bin()
        if bin_dir is None:
            print(f"PostgreSQL skipped: {missing_message()}")
        else:
            cluster = PgCluster(bin_dir, durable=True).start()
            try:
                database = cluster.create_database("load")
                ok &= run_backend(
                    f"PostgreSQL, {args.workers} server processes",
                    database,
                    args,
                    tmp,
                    workers=args.workers,
                    cluster=cluster,
                )
            finally:
                cluster.stop()
        if not args.no_sqlite and not args.fault:
            ok &= run_backend(
                "SQLite, 1 server process", f"sqlite://{tmp / 'team.sqlite3'}", args, tmp, workers=1
            )
    print("\nOK" if ok else "\nFAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
