"""PostgreSQL storage (`asyncpg`): for many teams and several server processes on one database.

A write locks the repository's row (`SELECT … FOR UPDATE`, the row created on first use), then
reads the current checksums and checks If-Match inside the same transaction. Two server
processes PUTting to one repo are therefore serialised by the database: the second sees the
first's commit and gets 412 instead of overwriting it.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import asyncpg

from memoryd.team.protocol import listed_bytes
from memoryd_team.settings import DEFAULT_DATABASE_TIMEOUT_S
from memoryd_team.storage.base import (
    ChecksumListing,
    ChecksumPage,
    Page,
    PutResult,
    RepoLocks,
    RepoState,
    Storage,
    StorageRefused,
    StorageUnavailable,
    TokenInfo,
    TokenRevoked,
    TooLargeForOneReply,
    Upsert,
    VersionInfo,
    VersionNotFound,
)
from memoryd_team.storage.plan import EMPTY_ETAG, Current, check_stored_etag, plan_upsert

# Any constant works; it only has to be the same in every server process.
_SCHEMA_LOCK = 0x6D656D6F7279

_SCHEMA = """
CREATE TABLE IF NOT EXISTS team_tokens (
    id text PRIMARY KEY,
    token_hash text NOT NULL UNIQUE,
    repos text[] NOT NULL,
    name text NOT NULL,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz
);
CREATE TABLE IF NOT EXISTS team_repos (
    name text PRIMARY KEY,
    etag text NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS team_entries (
    repo text NOT NULL,
    key text NOT NULL,
    content text NOT NULL,
    checksum text NOT NULL,
    version integer NOT NULL,
    PRIMARY KEY (repo, key)
);
CREATE TABLE IF NOT EXISTS team_entry_versions (
    repo text NOT NULL,
    key text NOT NULL,
    version integer NOT NULL,
    content text NOT NULL,
    checksum text NOT NULL,
    written_at timestamptz NOT NULL,
    token_id text NOT NULL,
    author text NOT NULL,
    restored_from integer,
    PRIMARY KEY (repo, key, version)
);
CREATE OR REPLACE FUNCTION team_entry_versions_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'team_entry_versions is append-only';
END
$$;
CREATE OR REPLACE TRIGGER team_entry_versions_no_change
    BEFORE UPDATE OR DELETE ON team_entry_versions
    FOR EACH ROW EXECUTE FUNCTION team_entry_versions_append_only();
CREATE OR REPLACE TRIGGER team_entry_versions_no_truncate
    BEFORE TRUNCATE ON team_entry_versions
    FOR EACH STATEMENT EXECUTE FUNCTION team_entry_versions_append_only();
"""

# The schema's history, applied in order by `migrate` (on every open, and by `memoryd-team
# migrate`); each step is idempotent and runs in one transaction under the schema lock, so
# running it twice, or from several processes while servers run, is safe. Never edit a step
# that has shipped: add one.
_MIGRATIONS: tuple[tuple[int, str], ...] = (
    (1, _SCHEMA),
    # Pages are read in code point order (COLLATE "C") whatever the database's locale: an
    # index in that order makes each page a range scan. Writers wait while it is built.
    (
        2,
        'CREATE INDEX IF NOT EXISTS team_entries_repo_key_c ON team_entries (repo, key COLLATE "C")',
    ),
)
_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS team_schema_migrations (
    version integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""

_VERSION_COLUMNS = (
    "repo, key, version, checksum, octet_length(content) AS size, written_at, token_id, "
    "author, restored_from"
)

_PREFETCH = 16  # rows per round trip of a cursor: at most 16 × 250 KB in flight
_CHECKSUM_PREFETCH = 1000  # checksum rows are at most about 1 KB each

# Each wait on the database (see PostgresStorage); a stalled request costs a few of them.
DEFAULT_TIMEOUT_S = DEFAULT_DATABASE_TIMEOUT_S
_MIGRATION_TIMEOUT_S = 3600.0
# A session of ours idle inside a transaction this many timeouts is abandoned: between two
# statements the server only computes (milliseconds). Its process lost the database (a
# partition, a frozen host), so the database ends the session and frees the repository row it
# locked; else every other server's PUT to that repository waits on the dead session's lock
# and is a 503 until TCP keepalive notices, about two hours later.
_IDLE_IN_TRANSACTION_TIMEOUTS = 3

# InternalClientError: a pooled connection the server cut (a restart) can surface as a
# protocol-state error on its next use; it is unavailability too, not a bug (503, retried).
_DRIVER_ERRORS = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    OSError,
    TimeoutError,
)


class PostgresStorage(Storage):
    """`timeout_s` bounds every wait on the database: connecting, getting a pooled connection,
    one statement. A stalled database (a frozen host, a partition) is then a 503 within a few
    of them, well inside a client's 30 s, instead of requests that hang for as long as it
    does while holding the pool's connections."""

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.dsn = dsn
        self._min_size = min_size
        self._max_size = max_size
        self._timeout_s = timeout_s
        self._pool: asyncpg.Pool | None = None
        self._writers = RepoLocks()

    async def open(self) -> None:
        try:
            self._pool = await asyncpg.create_pool(
                self.dsn,
                min_size=self._min_size,
                max_size=self._max_size,
                timeout=self._timeout_s,
                command_timeout=self._timeout_s,
                server_settings={
                    "idle_in_transaction_session_timeout": str(
                        math.ceil(self._timeout_s * _IDLE_IN_TRANSACTION_TIMEOUTS * 1000)
                    )
                },
            )
        except (ValueError, OverflowError) as exc:
            # asyncpg reads the URL only as it connects: a port that is no number (ValueError)
            # or over 65535 (OverflowError), a broken [IPv6] host. The URL is not echoed: it
            # may hold a password.
            raise StorageRefused(f"postgresql: the database URL cannot be used: {exc}") from exc
        except _DRIVER_ERRORS as exc:
            raise StorageUnavailable(f"postgresql: {self._reason(exc)}") from exc
        try:
            await self._check_encoding()
            self.migrations_applied = await self.migrate()
        except BaseException:
            await self.close()  # the pool's connections are not left open behind the error
            raise

    async def _check_encoding(self) -> None:
        """Refuse a database that cannot hold every key and content a client may send: in
        LATIN1, an emoji fails every time (it used to be a 503, "retry later", for ever)."""
        async with self._connection() as conn:
            encoding = await conn.fetchval("SELECT current_setting('server_encoding')")
        if encoding != "UTF8":
            raise StorageRefused(
                f"postgresql: the database's encoding is {encoding}; memoryd-team needs a UTF8"
                " database (CREATE DATABASE … ENCODING 'UTF8' TEMPLATE template0)"
            )

    async def migrate(self) -> list[int]:
        # Up to date (every open but the first after an upgrade): reads only, no lock, no
        # DDL, so a role with only SELECT/INSERT/UPDATE on the tables runs every command once
        # the schema's owner has migrated.
        async with self._connection() as conn:
            done = await _applied_steps(conn)
        if done is not None and all(version in done for version, _ in _MIGRATIONS):
            return []
        async with self._connection() as conn, conn.transaction():
            # Several processes may start at once; CREATE … IF NOT EXISTS alone can still
            # race, and two migrators must not both run a step. The lock waits for another
            # migrator, and a step may build an index over every entry: longer than a request.
            await conn.execute(
                "SELECT pg_advisory_xact_lock($1)", _SCHEMA_LOCK, timeout=_MIGRATION_TIMEOUT_S
            )
            await conn.execute(_MIGRATIONS_TABLE)
            done = await _applied_steps(conn) or set()
            applied: list[int] = []
            for version, sql in _MIGRATIONS:
                if version not in done:
                    await conn.execute(sql, timeout=_MIGRATION_TIMEOUT_S)
                    await conn.execute(
                        "INSERT INTO team_schema_migrations (version) VALUES ($1)", version
                    )
                    applied.append(version)
        return applied

    async def schema_version(self) -> int:
        async with self._connection() as conn:
            version = await conn.fetchval("SELECT max(version) FROM team_schema_migrations")
        return int(version or 0)

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                # A graceful close waits for the database to answer: a stalled one never does.
                await asyncio.wait_for(pool.close(), self._timeout_s)
            except TimeoutError:
                pool.terminate()

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[asyncpg.pool.PoolConnectionProxy[Any]]:
        if self._pool is None:
            raise StorageUnavailable("storage is not open")
        try:
            # The acquire timeout is also the budget of the connection's reset on release.
            async with self._pool.acquire(timeout=self._timeout_s) as conn:
                yield conn
        except asyncpg.DataError as exc:
            # SQLSTATE class 22 (and asyncpg's own refusal of an argument): this data fails
            # the same way on every retry, so it is no outage (503) but a server error (500).
            raise StorageRefused(f"postgresql: {self._reason(exc)}") from exc
        except _DRIVER_ERRORS as exc:
            raise StorageUnavailable(f"postgresql: {self._reason(exc)}") from exc

    def _reason(self, exc: BaseException) -> str:
        """What went wrong, never blank: a timeout's text is empty, and "postgresql: " alone
        in the log or on a command's stderr told the admin nothing."""
        # A rollback, or a transaction's exit, on the connection the failure closed fails too:
        # its error ("cannot call Transaction.rollback(): the underlying connection is
        # closed") hid why (an admin or the database ended the session, a restart).
        while isinstance(exc, asyncpg.InterfaceError) and isinstance(
            exc.__context__, _DRIVER_ERRORS
        ):
            exc = exc.__context__
        if isinstance(exc, TimeoutError):
            return f"no answer within {self._timeout_s:g} s (database timeout)"
        return str(exc) or type(exc).__name__

    @contextlib.asynccontextmanager
    async def _snapshot(self) -> AsyncIterator[asyncpg.pool.PoolConnectionProxy[Any]]:
        """A read-only transaction on one snapshot: the ETag describes exactly the rows read."""
        async with (
            self._connection() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            yield conn

    # tokens -------------------------------------------------------------------------------

    async def create_token(
        self, token_id: str, token_hash: str, repos: tuple[str, ...], name: str, at: datetime
    ) -> TokenInfo:
        async with self._connection() as conn:
            await conn.execute(
                "INSERT INTO team_tokens (id, token_hash, repos, name, created_at)"
                " VALUES ($1, $2, $3, $4, $5)",
                token_id,
                token_hash,
                list(repos),
                name,
                at,
            )
        return TokenInfo(token_id, name, repos, at, None)

    async def find_token(self, token_hash: str) -> TokenInfo | None:
        async with self._connection() as conn:
            row = await conn.fetchrow(
                "SELECT id, name, repos, created_at, revoked_at FROM team_tokens"
                " WHERE token_hash = $1",
                token_hash,
            )
        return _token(row) if row is not None else None

    async def list_tokens(self) -> list[TokenInfo]:
        async with self._connection() as conn:
            rows = await conn.fetch(
                "SELECT id, name, repos, created_at, revoked_at FROM team_tokens"
                " ORDER BY created_at, id"
            )
        return [_token(row) for row in rows]

    async def revoke_token(self, token_id: str, at: datetime) -> bool:
        async with self._connection() as conn:
            status = await conn.execute(
                "UPDATE team_tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL",
                at,
                token_id,
            )
        return status == "UPDATE 1"

    # entries ------------------------------------------------------------------------------

    async def get_etag(self, repo: str) -> str | None:
        async with self._connection() as conn:
            return await _current_etag(conn, repo)

    async def get_state(
        self, repo: str, *, with_content: bool, max_content_bytes: int | None = None
    ) -> RepoState | None:
        async with self._snapshot() as conn:
            etag = await _current_etag(conn, repo)
            if etag is None:
                return None
            if with_content:
                entries: dict[str, str] = {}
                checksums: dict[str, str] = {}
                size = 0
                # A server-side cursor: rows arrive a few at a time, never all at once.
                async for row in conn.cursor(
                    "SELECT key, checksum, content, octet_length(content) AS size"
                    " FROM team_entries WHERE repo = $1",
                    repo,
                    prefetch=_PREFETCH,
                ):
                    size += row["size"]
                    if max_content_bytes is not None and size > max_content_bytes:
                        raise TooLargeForOneReply(max_content_bytes)
                    entries[row["key"]] = row["content"]
                    checksums[row["key"]] = row["checksum"]
                return RepoState(etag, checksums, entries)
            return RepoState(etag, await _checksums(conn, repo), None)

    async def get_page(
        self,
        repo: str,
        *,
        start: str | None,
        max_bytes: int,
        all_checksums: bool = False,
        checksum_bytes: int | None = None,
    ) -> Page | None:
        async with self._snapshot() as conn:
            etag = await _current_etag(conn, repo)
            if etag is None:
                return None
            entries: dict[str, str] = {}
            checksums: dict[str, str] = {}
            following: str | None = None
            size = 0
            # COLLATE "C": code point order whatever the database's locale (the migration
            # indexes exactly this, so a page is an index range scan).
            async for row in conn.cursor(
                "SELECT key, checksum, content, octet_length(content) AS size FROM team_entries"
                ' WHERE repo = $1 AND key COLLATE "C" >= $2 ORDER BY key COLLATE "C"',
                repo,
                start or "",
                prefetch=_PREFETCH,
            ):
                if entries and size >= max_bytes:
                    following = row["key"]
                    break
                entries[row["key"]] = row["content"]
                checksums[row["key"]] = row["checksum"]
                size += listed_bytes(row["key"], row["size"])
            if not all_checksums:
                return Page(etag, entries, checksums, following)
            listing = ChecksumListing(checksum_bytes, through=next(reversed(entries), None))
            await _list_checksums(conn, repo, None, listing)
            return Page(etag, entries, listing.checksums, following, listing.next)

    async def get_checksums(
        self, repo: str, *, start: str | None, max_bytes: int
    ) -> ChecksumPage | None:
        async with self._snapshot() as conn:
            etag = await _current_etag(conn, repo)
            if etag is None:
                return None
            listing = ChecksumListing(max_bytes)
            await _list_checksums(conn, repo, start, listing)
            return ChecksumPage(etag, listing.checksums, listing.next)

    async def _apply(self, upsert: Upsert) -> PutResult:
        # Unlocked first (the last committed state): a stale PUT is refused at once, not
        # after queueing for the row lock behind the writes that made it stale.
        async with self._connection() as conn:
            stored = await conn.fetchval("SELECT etag FROM team_repos WHERE name = $1", upsert.repo)
        check_stored_etag(stored, upsert)
        # This process's writes to one repository queue here, holding no pool connection:
        # queued for the row lock, each held one, and a dozen PUTs to a stuck repository
        # left none for any other repository's requests. Other processes' writes still
        # queue in the database, one connection each at most per process.
        async with self._writers.hold(upsert.repo, self._timeout_s), self._connection() as conn:
            return await self._write(conn, upsert, stored)

    async def _write(
        self, conn: asyncpg.pool.PoolConnectionProxy[Any], upsert: Upsert, stored: str | None
    ) -> PutResult:
        """The write transaction, on the repository's turn; `stored` is its ETag as last
        read without a lock."""
        transaction = conn.transaction()
        await transaction.start()
        try:
            if stored is None:  # a repo row is never deleted: only a new one is made
                await conn.execute(
                    "INSERT INTO team_repos (name, etag, updated_at) VALUES ($1, $2, $3)"
                    " ON CONFLICT (name) DO NOTHING",
                    upsert.repo,
                    EMPTY_ETAG,
                    upsert.at,
                )
            stored = await conn.fetchval(
                "SELECT etag FROM team_repos WHERE name = $1 FOR UPDATE", upsert.repo
            )
            if upsert.check_token:
                # FOR SHARE: a revoke's UPDATE of this row waits until this write commits,
                # and a write that starts after the revoke committed sees it. Taken once
                # the repository's row is ours: a PUT queued for that row holding it
                # made `token revoke` wait as long (a stalled write: past its timeout).
                active = await conn.fetchval(
                    "SELECT 1 FROM team_tokens WHERE id = $1 AND revoked_at IS NULL FOR SHARE",
                    upsert.author.token_id,
                )
                if active is None:
                    raise TokenRevoked(upsert.author.token_id)
            check_stored_etag(stored, upsert)  # under the lock: what this write replaces
            rows = await conn.fetch(
                "SELECT key, checksum, version FROM team_entries WHERE repo = $1", upsert.repo
            )
            current = {row["key"]: Current(row["checksum"], row["version"]) for row in rows}
            plan = plan_upsert(current, upsert)
            if not plan.writes:
                # Nothing changed: leave no trace (not even a new, empty repo row).
                await transaction.rollback()
                return PutResult(plan.etag, (), plan.unchanged)
            keys = [w.key for w in plan.writes]
            versions = [w.version for w in plan.writes]
            contents = [w.content for w in plan.writes]
            checksums = [w.checksum for w in plan.writes]
            await conn.execute(
                "INSERT INTO team_entry_versions (repo, key, version, content, checksum,"
                " written_at, token_id, author, restored_from)"
                " SELECT $1, k, v, c, s, $6, $7, $8, $9"
                " FROM unnest($2::text[], $3::int[], $4::text[], $5::text[]) AS t(k, v, c, s)",
                upsert.repo,
                keys,
                versions,
                contents,
                checksums,
                upsert.at,
                upsert.author.token_id,
                upsert.author.name,
                upsert.restored_from,
            )
            await conn.execute(
                "INSERT INTO team_entries (repo, key, content, checksum, version)"
                " SELECT $1, k, c, s, v"
                " FROM unnest($2::text[], $3::int[], $4::text[], $5::text[]) AS t(k, v, c, s)"
                " ON CONFLICT (repo, key) DO UPDATE SET content = EXCLUDED.content,"
                " checksum = EXCLUDED.checksum, version = EXCLUDED.version",
                upsert.repo,
                keys,
                versions,
                contents,
                checksums,
            )
            await conn.execute(
                "UPDATE team_repos SET etag = $2, updated_at = $3 WHERE name = $1",
                upsert.repo,
                plan.etag,
                upsert.at,
            )
        except BaseException:
            await transaction.rollback()
            raise
        await transaction.commit()

        return PutResult(plan.etag, tuple(keys), plan.unchanged)

    # history ------------------------------------------------------------------------------

    async def history(self, repo: str, key: str | None = None) -> list[VersionInfo]:
        async with self._connection() as conn:
            if key is None:
                rows = await conn.fetch(
                    f"SELECT {_VERSION_COLUMNS} FROM team_entry_versions WHERE repo = $1"  # noqa: S608 - constant column list
                    ' ORDER BY key COLLATE "C", version',
                    repo,
                )
            else:
                rows = await conn.fetch(
                    f"SELECT {_VERSION_COLUMNS} FROM team_entry_versions"  # noqa: S608 - constant column list
                    " WHERE repo = $1 AND key = $2 ORDER BY version",
                    repo,
                    key,
                )
        return [_version(row) for row in rows]

    async def _read_version(self, repo: str, key: str, version: int) -> tuple[VersionInfo, str]:
        async with self._connection() as conn:
            row = await conn.fetchrow(
                f"SELECT {_VERSION_COLUMNS}, content FROM team_entry_versions"  # noqa: S608 - constant column list
                " WHERE repo = $1 AND key = $2 AND version = $3",
                repo,
                key,
                version,
            )
        if row is None:
            raise VersionNotFound(f"{repo}: no version {version} of {key!r}")
        return _version(row), str(row["content"])


async def _applied_steps(conn: asyncpg.pool.PoolConnectionProxy[Any]) -> set[int] | None:
    """The schema steps recorded; None when there is no migrations table yet."""
    if await conn.fetchval("SELECT to_regclass('team_schema_migrations')") is None:
        return None
    return {
        row["version"] for row in await conn.fetch("SELECT version FROM team_schema_migrations")
    }


async def _current_etag(conn: asyncpg.pool.PoolConnectionProxy[Any], repo: str) -> str | None:
    etag = await conn.fetchval("SELECT etag FROM team_repos WHERE name = $1", repo)
    return None if etag is None or etag == EMPTY_ETAG else str(etag)


async def _checksums(conn: asyncpg.pool.PoolConnectionProxy[Any], repo: str) -> dict[str, str]:
    rows = await conn.fetch("SELECT key, checksum FROM team_entries WHERE repo = $1", repo)
    return {row["key"]: row["checksum"] for row in rows}


async def _list_checksums(
    conn: asyncpg.pool.PoolConnectionProxy[Any],
    repo: str,
    start: str | None,
    listing: ChecksumListing,
) -> None:
    """Fill `listing` with the checksums of the keys >= `start`, in key order (a cursor)."""
    async for row in conn.cursor(
        "SELECT key, checksum FROM team_entries"
        ' WHERE repo = $1 AND key COLLATE "C" >= $2 ORDER BY key COLLATE "C"',
        repo,
        start or "",
        prefetch=_CHECKSUM_PREFETCH,
    ):
        if not listing.add(row["key"], row["checksum"]):
            break


def _token(row: Any) -> TokenInfo:
    return TokenInfo(
        id=row["id"],
        name=row["name"],
        repos=tuple(row["repos"]),
        created_at=row["created_at"],
        revoked_at=row["revoked_at"],
    )


def _version(row: Any) -> VersionInfo:
    return VersionInfo(
        repo=row["repo"],
        key=row["key"],
        version=row["version"],
        checksum=row["checksum"],
        size=row["size"],
        written_at=row["written_at"],
        token_id=row["token_id"],
        author=row["author"],
        restored_from=row["restored_from"],
    )
