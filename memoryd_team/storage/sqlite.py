"""SQLite storage: the zero-config default (WAL, one file, stdlib `sqlite3`).

Blocking calls run on a small thread pool, one connection per thread. Writes take
`BEGIN IMMEDIATE`, so the ETag check and the upsert happen under SQLite's write lock even when
several server processes share the file; inside one process a lock queues writers first, so
they wait in an in-process queue (`RepoLocks`) before they take a thread, rather than in
SQLite's sleeping busy handler holding one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from memoryd.fsutil import ensure_private_dir, make_private_dirs
from memoryd.team.protocol import listed_bytes
from memoryd_team.storage.base import (
    ChecksumListing,
    ChecksumPage,
    Page,
    PutResult,
    RepoLocks,
    RepoState,
    Storage,
    StorageError,
    StorageUnavailable,
    TokenInfo,
    TokenRevoked,
    TooLargeForOneReply,
    Upsert,
    VersionInfo,
    VersionNotFound,
)
from memoryd_team.storage.plan import EMPTY_ETAG, Current, check_stored_etag, plan_upsert

T = TypeVar("T")

# The one write queue `RepoLocks` keeps here: SQLite has one write lock for every repository.
_ALL_REPOS = ""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS team_tokens (
    id TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    repos TEXT NOT NULL,
    name TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
CREATE TABLE IF NOT EXISTS team_repos (
    name TEXT PRIMARY KEY,
    etag TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS team_entries (
    repo TEXT NOT NULL,
    key TEXT NOT NULL,
    content TEXT NOT NULL,
    checksum TEXT NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (repo, key)
);
CREATE TABLE IF NOT EXISTS team_entry_versions (
    repo TEXT NOT NULL,
    key TEXT NOT NULL,
    version INTEGER NOT NULL,
    content TEXT NOT NULL,
    checksum TEXT NOT NULL,
    written_at TEXT NOT NULL,
    token_id TEXT NOT NULL,
    author TEXT NOT NULL,
    restored_from INTEGER,
    PRIMARY KEY (repo, key, version)
);
CREATE TRIGGER IF NOT EXISTS team_entry_versions_no_update
BEFORE UPDATE ON team_entry_versions
BEGIN SELECT RAISE(ABORT, 'team_entry_versions is append-only'); END;
CREATE TRIGGER IF NOT EXISTS team_entry_versions_no_delete
BEFORE DELETE ON team_entry_versions
BEGIN SELECT RAISE(ABORT, 'team_entry_versions is append-only'); END;
"""

# The schema's history (see the PostgreSQL storage): each step idempotent, applied in order
# inside one `BEGIN IMMEDIATE`, recorded in team_schema_migrations. Never edit a shipped step.
_MIGRATIONS: tuple[tuple[int, str], ...] = ((1, _SCHEMA),)
_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS team_schema_migrations (
    version INTEGER PRIMARY KEY,
    applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
"""

_VERSION_COLUMNS = (
    "repo, key, version, checksum, length(CAST(content AS BLOB)), written_at, token_id, "
    "author, restored_from"
)


class SqliteStorage(Storage):
    """`own_folder`: the file's folder is memoryd's own data folder, kept 0700 even if it was
    made looser; any other folder is the admin's, and only the folders missing on the way to
    the file are created (0700)."""

    def __init__(
        self,
        path: Path,
        *,
        threads: int = 4,
        busy_timeout_s: float = 30.0,
        own_folder: bool = False,
    ) -> None:
        self.path = path
        self._own_folder = own_folder
        self._threads = threads
        self._busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._writers = RepoLocks(writes_to="the database (of every repository)")
        self._executor: ThreadPoolExecutor | None = None

    # lifecycle ----------------------------------------------------------------------------

    async def open(self) -> None:
        # An explicit path may sit in a shared folder (/srv/team, a sticky /tmp): not ours to
        # tighten.
        try:
            if self._own_folder:
                ensure_private_dir(self.path.parent)
            else:
                make_private_dirs(self.path.parent)
            # The file holds token hashes and every entry ever written: owner-only from birth.
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            os.close(fd)
        except OSError as exc:
            # A folder where the file goes, a file where a folder goes, no permission.
            raise StorageUnavailable(
                f"sqlite: {exc.filename or self.path}: {exc.strerror}"
            ) from exc
        self._executor = ThreadPoolExecutor(self._threads, thread_name_prefix="team-sqlite")
        try:
            self.migrations_applied = await self.migrate()
        except BaseException:
            await self.close()  # e.g. not a database: no thread or connection left behind
            raise

    async def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        with self._connections_lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()

    async def migrate(self) -> list[int]:
        def run(conn: sqlite3.Connection) -> list[int]:
            # Up to date (every open but the first after an upgrade): a read only, so a
            # command does not queue behind the server's writers for SQLite's write lock.
            done = _applied_steps(conn)
            if done is not None and all(v in done for v, _ in _MIGRATIONS):
                return []
            with self._write_lock:
                conn.executescript(_MIGRATIONS_TABLE)
                # executescript commits before it runs: the steps go in one script of their
                # own, inside BEGIN IMMEDIATE … COMMIT (the write lock across processes).
                conn.execute("BEGIN IMMEDIATE")
                try:
                    done = _applied_steps(conn) or set()
                finally:
                    conn.execute("COMMIT")
                pending = [(v, sql) for v, sql in _MIGRATIONS if v not in done]
                if pending:
                    script = "".join(
                        f"{sql}\nINSERT OR IGNORE INTO team_schema_migrations (version) VALUES ({v});\n"
                        for v, sql in pending
                    )
                    conn.executescript(f"BEGIN IMMEDIATE;\n{script}COMMIT;")
                return [v for v, _ in pending]

        return await self._run(run)

    async def schema_version(self) -> int:
        def select(conn: sqlite3.Connection) -> int:
            (version,) = conn.execute("SELECT max(version) FROM team_schema_migrations").fetchone()
            return int(version or 0)

        return await self._run(select)

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout_s,
                isolation_level=None,  # autocommit; transactions are explicit
                check_same_thread=False,  # closed from close(), after the pool has stopped
            )
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                # An acknowledged push must survive a power cut: fsync the WAL on every commit.
                conn.execute("PRAGMA synchronous=FULL")
            except BaseException:
                conn.close()
                raise
            self._local.conn = conn
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._executor is None:
            raise StorageUnavailable("storage is not open")

        def call() -> T:
            try:
                return fn(self._connection())
            except StorageError:
                raise
            except sqlite3.Error as exc:
                raise StorageUnavailable(f"sqlite: {exc}") from exc

        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    @contextlib.contextmanager
    def _transaction(self, conn: sqlite3.Connection, mode: str) -> Iterator[None]:
        conn.execute(f"BEGIN {mode}")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # tokens -------------------------------------------------------------------------------

    async def create_token(
        self, token_id: str, token_hash: str, repos: tuple[str, ...], name: str, at: datetime
    ) -> TokenInfo:
        def insert(conn: sqlite3.Connection) -> None:
            with self._write_lock:
                conn.execute(
                    "INSERT INTO team_tokens (id, token_hash, repos, name, created_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (token_id, token_hash, json.dumps(list(repos)), name, at.isoformat()),
                )

        await self._run(insert)
        return TokenInfo(token_id, name, repos, at, None)

    async def find_token(self, token_hash: str) -> TokenInfo | None:
        def select(conn: sqlite3.Connection) -> TokenInfo | None:
            row = conn.execute(
                "SELECT id, name, repos, created_at, revoked_at FROM team_tokens "
                "WHERE token_hash = ?",
                (token_hash,),
            ).fetchone()
            return _token(row) if row else None

        return await self._run(select)

    async def list_tokens(self) -> list[TokenInfo]:
        def select(conn: sqlite3.Connection) -> list[TokenInfo]:
            rows = conn.execute(
                "SELECT id, name, repos, created_at, revoked_at FROM team_tokens "
                "ORDER BY created_at, id"
            ).fetchall()
            return [_token(row) for row in rows]

        return await self._run(select)

    async def revoke_token(self, token_id: str, at: datetime) -> bool:
        def update(conn: sqlite3.Connection) -> bool:
            with self._write_lock:
                cursor = conn.execute(
                    "UPDATE team_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                    (at.isoformat(), token_id),
                )
                return cursor.rowcount == 1

        return await self._run(update)

    # entries ------------------------------------------------------------------------------

    async def get_etag(self, repo: str) -> str | None:
        def select(conn: sqlite3.Connection) -> str | None:
            return _current_etag(conn, repo)

        return await self._run(select)

    async def get_state(
        self, repo: str, *, with_content: bool, max_content_bytes: int | None = None
    ) -> RepoState | None:
        def select(conn: sqlite3.Connection) -> RepoState | None:
            # One read transaction: the WAL snapshot makes the ETag and the rows agree.
            with self._transaction(conn, "DEFERRED"):
                etag = _current_etag(conn, repo)
                if etag is None:
                    return None
                if with_content:
                    entries: dict[str, str] = {}
                    checksums: dict[str, str] = {}
                    size = 0
                    rows = conn.execute(
                        "SELECT key, checksum, content, length(CAST(content AS BLOB))"
                        " FROM team_entries WHERE repo = ?",
                        (repo,),
                    )
                    with contextlib.closing(rows):
                        for key, digest, content, length in rows:
                            size += length
                            if max_content_bytes is not None and size > max_content_bytes:
                                raise TooLargeForOneReply(max_content_bytes)
                            entries[key] = content
                            checksums[key] = digest
                    return RepoState(etag, checksums, entries)
                return RepoState(etag, _checksums(conn, repo), None)

        return await self._run(select)

    async def get_page(
        self,
        repo: str,
        *,
        start: str | None,
        max_bytes: int,
        all_checksums: bool = False,
        checksum_bytes: int | None = None,
    ) -> Page | None:
        def select(conn: sqlite3.Connection) -> Page | None:
            with self._transaction(conn, "DEFERRED"):
                etag = _current_etag(conn, repo)
                if etag is None:
                    return None
                # BINARY collation: UTF-8 byte order, which is code point order.
                rows = conn.execute(
                    "SELECT key, checksum, content, length(CAST(content AS BLOB))"
                    " FROM team_entries WHERE repo = ? AND key >= ? ORDER BY key",
                    (repo, start or ""),
                )
                entries: dict[str, str] = {}
                checksums: dict[str, str] = {}
                size = 0
                following: str | None = None
                with contextlib.closing(rows):  # stepped row by row, closed before COMMIT
                    for key, digest, content, length in rows:
                        if entries and size >= max_bytes:
                            following = str(key)
                            break
                        entries[key] = content
                        checksums[key] = digest
                        size += listed_bytes(key, length)
                if not all_checksums:
                    return Page(etag, entries, checksums, following)
                listing = ChecksumListing(checksum_bytes, through=next(reversed(entries), None))
                _list_checksums(conn, repo, None, listing)
                return Page(etag, entries, listing.checksums, following, listing.next)

        return await self._run(select)

    async def get_checksums(
        self, repo: str, *, start: str | None, max_bytes: int
    ) -> ChecksumPage | None:
        def select(conn: sqlite3.Connection) -> ChecksumPage | None:
            with self._transaction(conn, "DEFERRED"):
                etag = _current_etag(conn, repo)
                if etag is None:
                    return None
                listing = ChecksumListing(max_bytes)
                _list_checksums(conn, repo, start, listing)
                return ChecksumPage(etag, listing.checksums, listing.next)

        return await self._run(select)

    async def _apply(self, upsert: Upsert) -> PutResult:
        # Outside the write lock first (the last committed state): a stale PUT is refused at
        # once, not after queueing behind the writes that made it stale.
        check_stored_etag(await self._run(lambda conn: _stored_etag(conn, upsert.repo)), upsert)

        def write(conn: sqlite3.Connection) -> PutResult:
            with self._write_lock, self._transaction(conn, "IMMEDIATE"):
                # Under the write lock a revoke (an UPDATE: it needs that lock) is either
                # committed and seen here, or waits until this write has committed.
                if upsert.check_token and not _token_active(conn, upsert.author.token_id):
                    raise TokenRevoked(upsert.author.token_id)
                check_stored_etag(_stored_etag(conn, upsert.repo), upsert)
                rows = conn.execute(
                    "SELECT key, checksum, version FROM team_entries WHERE repo = ?", (upsert.repo,)
                ).fetchall()
                current = {key: Current(digest, version) for key, digest, version in rows}
                plan = plan_upsert(current, upsert)
                if plan.writes:
                    stamp = upsert.at.isoformat()
                    conn.executemany(
                        "INSERT INTO team_entry_versions (repo, key, version, content, checksum,"
                        " written_at, token_id, author, restored_from)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [
                            (
                                *(upsert.repo, w.key, w.version, w.content, w.checksum, stamp),
                                *(upsert.author.token_id, upsert.author.name, upsert.restored_from),
                            )
                            for w in plan.writes
                        ],
                    )
                    conn.executemany(
                        "INSERT INTO team_entries (repo, key, content, checksum, version)"
                        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (repo, key) DO UPDATE SET"
                        " content = excluded.content, checksum = excluded.checksum,"
                        " version = excluded.version",
                        [
                            (upsert.repo, w.key, w.content, w.checksum, w.version)
                            for w in plan.writes
                        ],
                    )
                    conn.execute(
                        "INSERT INTO team_repos (name, etag, updated_at) VALUES (?, ?, ?)"
                        " ON CONFLICT (name) DO UPDATE SET etag = excluded.etag,"
                        " updated_at = excluded.updated_at",
                        (upsert.repo, plan.etag, stamp),
                    )
                written = tuple(w.key for w in plan.writes)
                return PutResult(plan.etag, written, plan.unchanged)

        # Queued here, not in a thread: SQLite has one write lock for every repository, and
        # writes waiting for it (another process's write holding it) each held one of the
        # pool's threads, which every read needs too. One waits in a thread at most.
        async with self._writers.hold(_ALL_REPOS, self._busy_timeout_s, writing=upsert.repo):
            return await self._run(write)

    # history ------------------------------------------------------------------------------

    async def history(self, repo: str, key: str | None = None) -> list[VersionInfo]:
        def select(conn: sqlite3.Connection) -> list[VersionInfo]:
            if key is None:
                rows = conn.execute(
                    f"SELECT {_VERSION_COLUMNS} FROM team_entry_versions WHERE repo = ?"  # noqa: S608 - constant column list
                    " ORDER BY key, version",
                    (repo,),
                ).fetchall()
            else:
                rows = conn.execute(
                    f"SELECT {_VERSION_COLUMNS} FROM team_entry_versions"  # noqa: S608 - constant column list
                    " WHERE repo = ? AND key = ? ORDER BY version",
                    (repo, key),
                ).fetchall()
            return [_version(row) for row in rows]

        return await self._run(select)

    async def _read_version(self, repo: str, key: str, version: int) -> tuple[VersionInfo, str]:
        def select(conn: sqlite3.Connection) -> tuple[VersionInfo, str]:
            row = conn.execute(
                f"SELECT {_VERSION_COLUMNS}, content FROM team_entry_versions"  # noqa: S608 - constant column list
                " WHERE repo = ? AND key = ? AND version = ?",
                (repo, key, version),
            ).fetchone()
            if row is None:
                raise VersionNotFound(f"{repo}: no version {version} of {key!r}")
            return _version(row[:-1]), str(row[-1])

        return await self._run(select)


def _applied_steps(conn: sqlite3.Connection) -> set[int] | None:
    """The schema steps recorded; None when there is no migrations table yet."""
    table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'team_schema_migrations'"
    ).fetchone()
    if table is None:
        return None
    return {int(v) for (v,) in conn.execute("SELECT version FROM team_schema_migrations")}


def _token_active(conn: sqlite3.Connection, token_id: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM team_tokens WHERE id = ? AND revoked_at IS NULL", (token_id,)
    ).fetchone()
    return row is not None


def _stored_etag(conn: sqlite3.Connection, repo: str) -> str | None:
    row = conn.execute("SELECT etag FROM team_repos WHERE name = ?", (repo,)).fetchone()
    return None if row is None else str(row[0])


def _current_etag(conn: sqlite3.Connection, repo: str) -> str | None:
    etag = _stored_etag(conn, repo)
    return None if etag == EMPTY_ETAG else etag


def _checksums(conn: sqlite3.Connection, repo: str) -> dict[str, str]:
    rows = conn.execute("SELECT key, checksum FROM team_entries WHERE repo = ?", (repo,))
    return dict(rows.fetchall())


def _list_checksums(
    conn: sqlite3.Connection, repo: str, start: str | None, listing: ChecksumListing
) -> None:
    """Fill `listing` with the checksums of the keys >= `start`, in key order, row by row."""
    rows = conn.execute(
        "SELECT key, checksum FROM team_entries WHERE repo = ? AND key >= ? ORDER BY key",
        (repo, start or ""),
    )
    with contextlib.closing(rows):
        for key, digest in rows:
            if not listing.add(key, digest):
                break


def _token(row: Any) -> TokenInfo:
    token_id, name, repos, created_at, revoked_at = row
    return TokenInfo(
        id=str(token_id),
        name=str(name),
        repos=tuple(json.loads(str(repos))),
        created_at=datetime.fromisoformat(str(created_at)),
        revoked_at=datetime.fromisoformat(str(revoked_at)) if revoked_at else None,
    )


def _version(row: Any) -> VersionInfo:
    repo, key, version, digest, size, written_at, token_id, author, restored_from = row
    return VersionInfo(
        repo=str(repo),
        key=str(key),
        version=int(version),
        checksum=str(digest),
        size=int(size),
        written_at=datetime.fromisoformat(str(written_at)),
        token_id=str(token_id),
        author=str(author),
        restored_from=int(restored_from) if restored_from is not None else None,
    )
