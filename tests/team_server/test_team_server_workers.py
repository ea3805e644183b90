"""`serve --workers N`: several processes behind one port, one winner per ETag; `migrate`:
safe to run twice, on a database from before migrations, and while servers run; once it ran,
a role that may only read and write rows runs everything."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import uuid
from pathlib import Path

import asyncpg
import httpx
import pytest

from memoryd.team.protocol import TEAM_MEMORY_PATH, checksum
from memoryd_team.storage import postgres, sqlite
from tests.team_server.conftest import create_token, history_checksums, start_server_process
from tests.team_server.pg import PgCluster
from tests.team_server.test_team_server_cli import team

REPO = "acme/widgets"
RACERS = 12
ROUNDS = 4


def worker_pids(supervisor: int) -> list[int]:
    """uvicorn's worker processes (not multiprocessing's resource tracker)."""
    children = Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split()
    return [
        int(pid) for pid in children if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]


def test_workers_accept_one_push_per_etag(database_url: str, tmp_path: Path) -> None:
    token = create_token(database_url, REPO)
    server = start_server_process(database_url, tmp_path / "serve.log", "--workers", "2")
    headers = {"Authorization": f"Bearer {token}"}
    url = server.url + TEAM_MEMORY_PATH
    try:
        assert len(worker_pids(server.process.pid)) == 2
        seed = httpx.put(
            url, params={"repo": REPO}, json={"entries": {"s.md": "0"}}, headers=headers
        )
        etag = seed.headers["etag"]
        statuses: list[tuple[int, str]] = []
        lock = threading.Lock()
        start = threading.Barrier(RACERS)

        def racer(n: int, etag: str, round_: int) -> None:
            content = f"round {round_} racer {n}"
            # A client of its own: a connection of its own, to whichever worker accepts it.
            with httpx.Client(headers=headers, timeout=30) as http:
                start.wait()
                reply = http.put(
                    url,
                    params={"repo": REPO},
                    json={"entries": {"s.md": content}},
                    headers={"If-Match": etag},
                )
            with lock:
                statuses.append((reply.status_code, content))

        for round_ in range(ROUNDS):
            statuses.clear()
            threads = [
                threading.Thread(target=racer, args=(n, etag, round_)) for n in range(RACERS)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            winners = [content for status, content in statuses if status == 200]
            assert len(winners) == 1, statuses
            assert sorted(s for s, _ in statuses) == [200] + [412] * (RACERS - 1)
            current = httpx.get(url, params={"repo": REPO}, headers=headers)
            assert current.json()["entries"]["s.md"] == winners[0]
            etag = current.headers["etag"]
        history = history_checksums(database_url, REPO)
        assert len(history["s.md"]) == 1 + ROUNDS  # the seed and one winner per round
    finally:
        server.stop()


def test_migrate_twice_and_while_a_server_runs(database_url: str, tmp_path: Path) -> None:
    first = team("migrate", "--database", database_url)
    assert first.stdout.startswith("applied schema steps 1")
    again = team("migrate", "--database", database_url)
    latest = "2" if database_url.startswith("postgresql") else "1"
    assert again.stdout.strip() == f"schema up to date at version {latest}"
    token = create_token(database_url, REPO)
    server = start_server_process(database_url, tmp_path / "serve.log")
    try:
        put = lambda text: httpx.put(  # noqa: E731
            server.url + TEAM_MEMORY_PATH,
            params={"repo": REPO},
            json={"entries": {"a.md": text}},
            headers={"Authorization": f"Bearer {token}", "If-Match": "*"},
        )
        httpx.put(
            server.url + TEAM_MEMORY_PATH,
            params={"repo": REPO},
            json={"entries": {"a.md": "one"}},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert team("migrate", "--database", database_url).returncode == 0
        assert put("two").status_code == 200
    finally:
        server.stop()
    assert history_checksums(database_url, REPO)["a.md"] == [checksum("one"), checksum("two")]


def test_migrate_takes_a_database_from_before_migrations(database_url: str, tmp_path: Path) -> None:
    """A database made by a server without the migrations table keeps its data."""
    if database_url.startswith("postgresql"):

        async def old_schema() -> None:
            conn = await asyncpg.connect(database_url)
            try:
                await conn.execute(postgres._SCHEMA)
                await conn.execute(
                    "INSERT INTO team_repos (name, etag, updated_at) VALUES ('x/y', 'e', now())"
                )
            finally:
                await conn.close()

        asyncio.run(old_schema())
    else:
        path = database_url.removeprefix("sqlite://")
        with sqlite3.connect(path) as conn:
            conn.executescript(sqlite._SCHEMA)
            conn.execute("INSERT INTO team_repos VALUES ('x/y', 'e', '2026-01-01T00:00:00')")
        conn.close()
    result = team("migrate", "--database", database_url)
    assert result.stdout.startswith("applied schema steps 1")
    token = create_token(database_url, "x/y")
    server = start_server_process(database_url, tmp_path / "serve.log")
    try:
        reply = httpx.get(
            server.url + TEAM_MEMORY_PATH,
            params={"repo": "x/y", "view": "hashes"},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert reply.headers["etag"] == "e"  # the row written before the migration
    finally:
        server.stop()


@pytest.mark.postgres
def test_a_role_that_may_only_read_and_write_rows_runs_after_migrate(
    pg_cluster: PgCluster, tmp_path: Path
) -> None:
    """Least privilege: the schema's owner migrates, the server runs as a role with SELECT,
    INSERT and UPDATE only (every open used to CREATE the migrations table: permission denied
    for schema public)."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    role = f"dml_{uuid.uuid4().hex[:8]}"
    owner = pg_cluster.create_database(name)
    pg_cluster.psql(f"CREATE ROLE {role} LOGIN")
    try:
        assert team("migrate", "--database", owner).stdout.startswith("applied schema steps")
        pg_cluster.psql(
            f"GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO {role}", name
        )
        url = pg_cluster.url(name, user=role)
        assert team("migrate", "--database", url).stdout.strip() == (
            "schema up to date at version 2"
        )
        token = create_token(url, REPO)
        server = start_server_process(url, tmp_path / "serve.log")
        try:
            headers = {"Authorization": f"Bearer {token}"}
            endpoint = server.url + TEAM_MEMORY_PATH
            put = httpx.put(
                endpoint, params={"repo": REPO}, json={"entries": {"a.md": "1"}}, headers=headers
            )
            assert put.status_code == 200, put.text
            again = httpx.put(
                endpoint,
                params={"repo": REPO},
                json={"entries": {"a.md": "2"}},
                headers={**headers, "If-Match": put.headers["etag"]},
            )
            assert again.status_code == 200, again.text
            got = httpx.get(endpoint, params={"repo": REPO}, headers=headers)
            assert got.json()["entries"] == {"a.md": "2"}
        finally:
            server.stop()
        assert team("history", "--repo", REPO, "--database", url).returncode == 0
    finally:
        pg_cluster.drop_database(name)
        pg_cluster.psql(f"DROP ROLE {role}")
