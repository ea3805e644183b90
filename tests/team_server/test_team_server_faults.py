"""The server when its database goes away: a retryable 503 in JSON, never a hang or a crash;
and when it can never do what is asked: refused at open, or a 500 that says not to retry."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx
import pytest

from memoryd.team.protocol import TEAM_MEMORY_PATH
from memoryd_team.settings import ServerSettings
from memoryd_team.storage import base as storage_base
from memoryd_team.storage.base import Storage, StorageUnavailable
from memoryd_team.storage.postgres import PostgresStorage
from memoryd_team.storage.sqlite import SqliteStorage
from tests.team_server.conftest import Repo, ThreadedServer
from tests.team_server.pg import PgCluster, free_port
from tests.team_server.stall import StallingProxy
from tests.team_server.test_team_server_cli import team


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_a_dropped_database_is_503_and_the_server_keeps_serving(
    repo: Repo, pg_cluster: PgCluster
) -> None:
    assert repo.put({"a.md": "1"}).status_code == 200
    name = repo.server.database_url.rsplit("/", 1)[1]
    pg_cluster.drop_database(name)
    for _ in range(3):
        reply = repo.get()
        assert reply.status_code == 503
        assert reply.json()["error"] == "storage_unavailable"
    assert repo.http.get("/healthz").status_code == 200
    pg_cluster.create_database(name)  # so the fixture's teardown finds it


async def test_a_sqlite_file_that_is_not_a_database_fails_open_and_leaves_nothing_open(
    tmp_path: Path,
) -> None:
    path = tmp_path / "team.sqlite3"
    path.write_bytes(b"this is not a sqlite database, just some bytes " * 100)
    storage = SqliteStorage(path)
    with pytest.raises(StorageUnavailable):
        await storage.open()
    assert storage._executor is None  # the thread pool was shut down
    assert storage._connections == []


@pytest.mark.postgres
def test_a_database_that_is_not_utf8_is_refused_at_open(pg_cluster: PgCluster) -> None:
    """LATIN1 used to be accepted, then every entry with an emoji was a 503 for ever."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    pg_cluster.psql(f"CREATE DATABASE \"{name}\" ENCODING 'LATIN1' TEMPLATE template0")
    try:
        for command in (["token", "list"], ["serve", "--port", str(free_port())]):
            result = team(*command, "--database", pg_cluster.url(name), check=False)
            assert result.returncode == 2
            assert result.stderr == (
                "memoryd-team: database: postgresql: the database's encoding is LATIN1;"
                " memoryd-team needs a UTF8 database"
                " (CREATE DATABASE … ENCODING 'UTF8' TEMPLATE template0)\n"
            )
    finally:
        pg_cluster.drop_database(name)


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_data_the_database_refuses_is_500_not_503(repo: Repo, pg_cluster: PgCluster) -> None:
    """A data error (SQLSTATE class 22) fails the same way on every retry: 503 would make the
    client retry it for ever."""
    assert repo.put({"a.md": "1"}).status_code == 200
    name = repo.server.database_url.rsplit("/", 1)[1]
    pg_cluster.psql(
        """
        CREATE FUNCTION refuse_marked() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.content LIKE '%refuse me%' THEN
                RAISE EXCEPTION 'no equivalent in the database encoding'
                    USING ERRCODE = 'untranslatable_character';
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER refuse_marked BEFORE INSERT ON team_entry_versions
            FOR EACH ROW EXECUTE FUNCTION refuse_marked();
        """,
        name,
    )
    etag = repo.hashes().headers["etag"]
    refused = repo.put({"b.md": "refuse me"}, if_match=etag)
    assert refused.status_code == 500
    assert refused.json()["error"] == "storage_error"
    assert repo.hashes().headers["etag"] == etag  # nothing of it stored
    assert repo.put({"b.md": "fine"}, if_match=etag).status_code == 200


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_a_stalled_database_is_503_in_bounded_time_and_then_recovers(database_url: str) -> None:
    """A frozen host or a partition: requests used to wait on it for ever, and once the pool's
    10 connections were stuck, every repository did."""
    proxy = StallingProxy(int(urlsplit(database_url).port or 0)).start()
    url = database_url.replace(f":{urlsplit(database_url).port}/", f":{proxy.port}/")
    server = ThreadedServer(url, ServerSettings(), PostgresStorage(url, timeout_s=1.0)).start()
    try:
        token = server.token("acme/widgets")
        repo = Repo(server, "acme/widgets", token)
        assert repo.put({"a.md": "1"}).status_code == 200
        proxy.stall()
        try:
            # More requests than the pool has connections: none waits for one for ever (the
            # client's 30 s timeout would fail it). Not timed: < 10 s failed a loaded machine.
            with ThreadPoolExecutor(14) as pool:
                replies = list(
                    pool.map(lambda _: Repo(server, "acme/widgets", token).hashes(), range(14))
                )
            assert [r.status_code for r in replies] == [503] * 14
            assert {r.json()["error"] for r in replies} == {"storage_unavailable"}
            # Liveness only (docs/team-server.md): the process answers without the database.
            assert repo.http.get("/healthz").status_code == 200
        finally:
            proxy.resume()
        assert repo.hashes().status_code == 200  # new connections replace the stuck ones
    finally:
        server.stop()
        proxy.stop()


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_a_server_cut_off_mid_write_does_not_lock_its_repository_for_the_others(
    database_url: str,
) -> None:
    """Server A loses the database (a partition: not even its close gets through) after it
    locked the repository's row. The database ended that session only when TCP keepalive
    noticed, about two hours later; meanwhile every other server's PUT there was a 503."""
    port = urlsplit(database_url).port
    proxy = StallingProxy(int(port or 0)).start()
    url_a = database_url.replace(f":{port}/", f":{proxy.port}/")
    a = ThreadedServer(url_a, ServerSettings(), PostgresStorage(url_a, timeout_s=1.0)).start()
    b = ThreadedServer(
        database_url, ServerSettings(), PostgresStorage(database_url, timeout_s=1.0)
    ).start()
    try:
        token = b.token("acme/widgets")
        via_a, via_b = Repo(a, "acme/widgets", token), Repo(b, "acme/widgets", token)
        etag = via_b.put({"a.md": "1"}).headers["etag"]
        # Cut A off as it sends the first write after `SELECT … FOR UPDATE`.
        proxy.stall_on(b"INSERT INTO team_entry_versions")
        assert via_a.put({"a.md": "from A"}, if_match=etag).status_code == 503
        started = time.monotonic()
        while (reply := via_b.put({"a.md": "from B"}, if_match=etag)).status_code == 503:
            assert time.monotonic() - started < 15, "the dead session still holds the lock"
            time.sleep(0.5)
        assert reply.status_code == 200
        assert via_b.get().json()["entries"] == {"a.md": "from B"}
    finally:
        a.stop()
        b.stop()
        proxy.stop()


def test_a_stale_put_is_412_while_a_long_write_holds_the_repository(database_url: str) -> None:
    """A PUT with an ETag that is no longer current queued for the repository's write lock
    only to be refused: behind a write that holds it for long (a stalled server, up to 15 s)
    it was a 503 once its wait ran out, and the client backed off instead of refreshing."""
    storage = (
        PostgresStorage(database_url, timeout_s=1.0)
        if database_url.startswith("postgresql")
        else SqliteStorage(Path(urlsplit(database_url).path), busy_timeout_s=1.0)
    )
    server = ThreadedServer(database_url, ServerSettings(), storage).start()
    try:
        repo = Repo(server, "acme/widgets", server.token("acme/widgets"))
        stale = repo.put({"a.md": "1"}).headers["etag"]
        current = repo.put({"a.md": "2"}, if_match=stale).headers["etag"]
        with _repository_locked(database_url, "acme/widgets"):
            reply = repo.put({"a.md": "3"}, if_match=stale)
        assert reply.status_code == 412, reply.text
        assert reply.headers["etag"] == current
        assert repo.get().json()["entries"] == {"a.md": "2"}
    finally:
        server.stop()


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_a_revoke_does_not_wait_for_a_put_queued_for_its_repository(database_url: str) -> None:
    """A PUT took its token's row FOR SHARE before it queued for its repository's row, so
    `token revoke` waited as long as the write before it held the repository (a stalled one:
    up to 15 s), past the command's own 5 s, and the token stayed active."""
    server = ThreadedServer(
        database_url, ServerSettings(), PostgresStorage(database_url, timeout_s=20.0)
    ).start()
    try:
        repo = Repo(server, "acme/widgets", server.token("acme/widgets"))
        (info,) = server.run(server.storage.list_tokens())
        etag = repo.put({"a.md": "1"}).headers["etag"]
        with ThreadPoolExecutor(1) as pool:
            with _repository_locked(database_url, "acme/widgets"):
                queued = pool.submit(repo.put, {"a.md": "2"}, etag)
                asyncio.run(_until_a_session_waits_for_a_lock(database_url))
                # Within 1 s, while the repository is still held.
                assert asyncio.run(_revoke(database_url, info.id, timeout_s=1.0))
            reply = queued.result()
        assert reply.status_code == 401, reply.text
        assert server.run(server.storage.get_etag("acme/widgets")) == etag  # nothing written
    finally:
        server.stop()


async def _until_a_session_waits_for_a_lock(database_url: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        query = (
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        for _ in range(3000):
            if await conn.fetchval(query):
                return
            await asyncio.sleep(0.01)
        raise AssertionError("no session waited for a lock")
    finally:
        await conn.close()


async def _revoke(database_url: str, token_id: str, *, timeout_s: float) -> bool:
    storage = PostgresStorage(database_url, timeout_s=timeout_s)
    await storage.open()
    try:
        return await storage.revoke_token(token_id, datetime.now(UTC))
    finally:
        await storage.close()


@contextlib.contextmanager
def _repository_locked(database_url: str, repo: str) -> Iterator[None]:
    """Another session holds the repository's write lock (its row, or SQLite's write lock)."""
    if not database_url.startswith("postgresql"):
        conn = sqlite3.connect(urlsplit(database_url).path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    held, release = threading.Event(), threading.Event()

    async def hold() -> None:
        conn = await asyncpg.connect(database_url)
        try:
            async with conn.transaction():
                await conn.execute("SELECT 1 FROM team_repos WHERE name = $1 FOR UPDATE", repo)
                held.set()
                await asyncio.get_running_loop().run_in_executor(None, release.wait)
        finally:
            await conn.close()

    holder = threading.Thread(target=asyncio.run, args=(hold(),))
    holder.start()
    try:
        assert held.wait(30)
        yield
    finally:
        release.set()
        holder.join(30)


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_a_write_whose_session_is_ended_logs_why(
    repo: Repo, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The rollback after the failure fails too on the closed connection, and its error
    ("cannot call Transaction.rollback(): the underlying connection is closed") was all the
    log said: not that an admin or the database ended the session."""
    etag = repo.put({"a.md": "1"}).headers["etag"]

    async def end_the_waiting_write() -> None:
        conn = await asyncpg.connect(database_url)
        try:
            while not await conn.fetchval(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ):
                await asyncio.sleep(0.05)
        finally:
            await conn.close()

    with (
        _repository_locked(database_url, "acme/widgets"),
        ThreadPoolExecutor(1) as pool,
        caplog.at_level(logging.ERROR, logger="memoryd_team.app"),
    ):
        killer = pool.submit(asyncio.run, end_the_waiting_write())
        reply = repo.put({"a.md": "2"}, if_match=etag)
        killer.result(30)
    assert reply.status_code == 503
    logged = [r.getMessage() for r in caplog.records if r.name == "memoryd_team.app"]
    assert any("terminating connection due to administrator command" in m for m in logged), logged


def test_puts_queued_for_a_held_repository_leave_the_others_served(database_url: str) -> None:
    """PUTs to a repository whose write lock another session holds (a server process cut off
    mid-write, a long write) each held one of the storage's connections while they waited
    (PostgreSQL: a pool connection, 10; SQLite: a thread, 4): a few dozen, and a PUT to
    another repository (PostgreSQL) or any read (SQLite, which has one write lock for all)
    waited for a connection as long as they did, or got a 503: every other team stalled."""
    postgres = database_url.startswith("postgresql")
    # The waits (20 s, 30 s) are well past the 10 s the other team's request is given.
    storage = _storage_waiting(database_url, postgres_s=20.0, sqlite_s=30.0)
    server = ThreadedServer(database_url, ServerSettings(), storage).start()
    token = server.token("acme/stuck", "acme/other")
    stuck, other = Repo(server, "acme/stuck", token), Repo(server, "acme/other", token)
    try:
        etag = stuck.put({"a.md": "0"}).headers["etag"]
        other_etag = other.put({"a.md": "0"}).headers["etag"]
        entered = _count_writes(storage)
        with ThreadPoolExecutor(30) as pool, _repository_locked(database_url, "acme/stuck"):
            queued = [pool.submit(stuck.put, {"a.md": f"{i}"}, etag) for i in range(30)]
            # As many as the storage lets through (before: its connections, all of them).
            asyncio.run(_until(lambda: len(entered) >= 4))
            if postgres:
                asyncio.run(_until_a_session_waits_for_a_lock(database_url))
            time.sleep(0.3)  # every queued write has reached its wait
            with server.client(token) as http:
                http.timeout = httpx.Timeout(10.0)
                if postgres:
                    reply = http.put(
                        TEAM_MEMORY_PATH,
                        params={"repo": "acme/other"},
                        json={"entries": {"a.md": "1"}},
                        headers={"If-Match": other_etag},
                    )
                else:
                    reply = http.get(TEAM_MEMORY_PATH, params={"repo": "acme/other"})
                assert reply.status_code == 200, reply.text
        # Once the repository is let go, its queue drains: one write wins, the rest are stale.
        assert sorted({f.result().status_code for f in queued}) == [200, 412]
    finally:
        server.stop()


def test_a_put_that_waited_its_whole_turn_says_so(database_url: str) -> None:
    """A PUT that waited out its turn behind this process's earlier writes was answered
    "the server's database is unavailable": its admin went looking at a database that
    answers. The 503 (retried as before) says what it waited for."""
    storage = _storage_waiting(database_url, postgres_s=0.5, sqlite_s=0.5)
    reply = _put_behind_a_turn_that_does_not_end(database_url, storage)
    assert reply.status_code == 503, reply.text
    assert reply.json()["error"] == "storage_unavailable"  # what clients retry, as before
    assert "waited 0.5 s behind earlier writes" in reply.json()["message"]


def test_a_write_waits_its_turn_well_inside_a_clients_deadline(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The queue wait was the database's own, SQLite's busy timeout 30 s (or a long
    --database-timeout): a client's whole read deadline, so a write given its turn near the
    end was stored for a client gone, and its 503 read by none."""
    monkeypatch.setattr(storage_base, "QUEUE_WAIT_MAX_S", 0.5)
    storage = _storage_waiting(database_url, postgres_s=30, sqlite_s=30)
    reply = _put_behind_a_turn_that_does_not_end(database_url, storage)
    assert reply.status_code == 503, reply.text
    assert "waited 0.5 s behind earlier writes" in reply.json()["message"]


def _put_behind_a_turn_that_does_not_end(
    database_url: str, storage: PostgresStorage | SqliteStorage
) -> httpx.Response:
    """The reply to a PUT queued behind an earlier write that holds its turn (SQLite: one
    queue for all repositories); the turn is then let go, and a PUT after it stored."""
    postgres = database_url.startswith("postgresql")
    server = ThreadedServer(database_url, ServerSettings(), storage).start()
    token = server.token("acme/widgets")
    repo = Repo(server, "acme/widgets", token)
    try:
        etag = repo.put({"a.md": "0"}).headers["etag"]
        queue = storage._writers
        held, release = threading.Event(), asyncio.Event()

        async def hold() -> None:
            async with queue.hold("acme/widgets" if postgres else "", 30.0):
                held.set()
                await release.wait()

        assert server._loop is not None
        holding = asyncio.run_coroutine_threadsafe(hold(), server._loop)
        assert held.wait(10)
        reply = repo.put({"a.md": "1"}, etag)
        server._loop.call_soon_threadsafe(release.set)
        holding.result(10)
        assert repo.put({"a.md": "1"}, etag).status_code == 200  # its turn is free again
        return reply
    finally:
        server.stop()


def test_writes_past_the_queue_cap_are_refused_at_once_with_retry_after(
    database_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The write queue had no length: thousands of PUTs to one repository (SQLite: to any)
    each held its request and body in memory while it waited. Past QUEUE_MAX_WRITES waiting
    (here 6, sent by real concurrent HTTP clients behind a turn that does not end) a PUT is a
    503 with Retry-After at once; the queued ones are served once the turn is let go."""
    cap = 6
    monkeypatch.setattr(storage_base, "QUEUE_MAX_WRITES", cap)
    # No queued write gives up while the test fills the queue, however loaded the machine.
    monkeypatch.setattr(storage_base, "QUEUE_WAIT_MAX_S", 600.0)
    postgres = database_url.startswith("postgresql")
    storage = _storage_waiting(database_url, postgres_s=600.0, sqlite_s=600.0)
    server = ThreadedServer(database_url, ServerSettings(), storage).start()
    token = server.token("acme/widgets")
    repo = Repo(server, "acme/widgets", token)
    queue_name = "acme/widgets" if postgres else ""  # SQLite: one queue for every repository
    other = Repo(server, "acme/other", server.token("acme/other"))
    # SQLite's refusal names its one queue, not the repository written to (a write to a quiet
    # repository was told "writes to this repository are already queued").
    queue = "this repository" if postgres else "the database (of every repository)"
    try:
        etag = repo.put({"a.md": "0"}).headers["etag"]
        held, release = threading.Event(), asyncio.Event()

        async def hold() -> None:
            async with storage._writers.hold(queue_name, 600.0):
                held.set()
                await release.wait()

        assert server._loop is not None
        holding = asyncio.run_coroutine_threadsafe(hold(), server._loop)
        assert held.wait(60)
        with ThreadPoolExecutor(cap) as pool:
            queued = [pool.submit(repo.put, {"a.md": f"{i}"}, etag) for i in range(cap)]
            asyncio.run(_until(lambda: storage._writers.queued(queue_name) == cap + 1, 120.0))
            refused = [repo.put({"b.md": f"{i}"}, etag) for i in range(3)]
            elsewhere = other.put({"c.md": "quiet"})
            server._loop.call_soon_threadsafe(release.set)
            holding.result(60)
            served = sorted({f.result(120).status_code for f in queued})
        for reply in refused:
            assert reply.status_code == 503, reply.text
            assert reply.json()["error"] == "storage_unavailable"  # what clients retry
            assert f"{cap} writes to {queue} are already queued" in reply.json()["message"]
            assert reply.headers["retry-after"] == str(storage_base.QUEUE_FULL_RETRY_AFTER_S)
        if postgres:  # a queue per repository: another one is served meanwhile
            assert elsewhere.status_code == 200, elsewhere.text
        else:
            assert elsewhere.status_code == 503, elsewhere.text
            assert f"{cap} writes to {queue} are already queued" in elsewhere.json()["message"]
        # One log line for the refusals (a line each flooded the log); the rest are counted
        # in a line at most every 10 s (tests/team_server/test_team_server_refusal_log.py).
        # Each names the repository written to (the reason says "this repository", or
        # SQLite's one queue): said once per repository.
        said = sorted(r.getMessage() for r in caplog.records if " refused" in r.getMessage())
        refused_to = ["acme/other", "acme/widgets"] if not postgres else ["acme/widgets"]
        assert said == [
            f"write to {name} refused: {cap} writes to {queue} are already queued"
            for name in refused_to
        ]
        # Once the turn is let go the queue drains: one write wins, the rest are stale.
        assert served == [200, 412]
        assert storage._writers.queued(queue_name) == 0
        stored = server.run(storage.get_page("acme/widgets", start=None, max_bytes=10**6))
        assert stored is not None
        assert "b.md" not in stored.entries  # nothing of a refused write
    finally:
        server.stop()


def _storage_waiting(
    database_url: str, *, postgres_s: float, sqlite_s: float
) -> PostgresStorage | SqliteStorage:
    """The database's storage, each of its waits (and so its write queue's) that long."""
    if database_url.startswith("postgresql"):
        return PostgresStorage(database_url, timeout_s=postgres_s)
    return SqliteStorage(Path(urlsplit(database_url).path), busy_timeout_s=sqlite_s)


def _count_writes(storage: Storage) -> list[object]:
    """Every write that reached the storage from now on (one item each)."""
    entered: list[object] = []
    real = storage.put_entries

    async def counted(*args: Any, **kwargs: Any) -> Any:
        entered.append(args)
        return await real(*args, **kwargs)

    storage.put_entries = counted  # type: ignore[method-assign]
    return entered


async def _until(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("not met in time")
        await asyncio.sleep(0.01)
