"""The one interface the team server stores through, and the values it speaks in.

    StorageError
    ├── StorageUnavailable   the database failed or is unreachable (the server answers 503)
    │   ├── WriteQueueTimeout  a write waited its whole turn in the write queue (503)
    │   └── WriteQueueFull     the write queue already holds its most writers (503 + Retry-After)
    ├── StorageRefused       retrying cannot help: a database URL or database the server cannot
    │                        use, or data the database refuses (500)
    ├── PreconditionFailed   If-Match does not name the current state (412)
    ├── TokenRevoked         the writing token was revoked while its PUT ran (401)
    ├── KeyCollision         a new key cannot be a file beside the repo's others (422)
    ├── TooManyEntries       the upsert would exceed the entry limit (413)
    ├── TooLargeForOneReply  the unpaged listing would exceed its cap: page it (413)
    └── VersionNotFound      restore of a version that was never written

Every implementation keeps an append-only history: a changed entry gets a new version row,
nothing is updated in place or deleted there. Repository names reach the storage already
validated and canonical (lower case); keys and contents already validated.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import datetime

from memoryd.team.protocol import listed_bytes

# Versions are PostgreSQL `integer`s (SQLite's are wider): none is ever above this.
MAX_VERSION = 2**31 - 1


class StorageError(Exception):
    pass


class StorageUnavailable(StorageError):
    pass


class WriteQueueTimeout(StorageUnavailable):
    """A write that waited its whole turn in `RepoLocks`: the database may answer well, but
    the writes before this one did not finish in time. Said as it is: "the database is
    unavailable" sent an admin looking at a database that answers. `repo`: the repository
    written to, for the server's log (the client's message says "this repository")."""

    def __init__(self, message: str, repo: str) -> None:
        super().__init__(message)
        self.repo = repo


class WriteQueueFull(StorageUnavailable):
    """A write refused at once: `RepoLocks` already holds QUEUE_MAX_WRITES waiting for that
    queue's turn (each holding its request and its body, up to 2 MiB, in memory)."""

    def __init__(self, waiting: int, retry_after_s: int, writes_to: str, repo: str) -> None:
        super().__init__(f"{waiting} writes to {writes_to} are already queued")
        self.retry_after_s = retry_after_s
        self.repo = repo


# The most writes one queue holds waiting for their turn; one more is a 503 with Retry-After.
# Unbounded, thousands of PUTs to one repository (SQLite: to any) each held its request and
# body (up to 2 MiB, twice that parsed) for up to QUEUE_WAIT_MAX_S: gigabytes. 64 waiting
# hold at most about 400 MiB and drain in about 2 s at one repository's measured write rate
# (docs/team-server.md, Benchmark), well inside the wait below.
QUEUE_MAX_WRITES = 64
# What a write refused so is told to wait (Retry-After): about what the queue takes to drain.
QUEUE_FULL_RETRY_AFTER_S = 5

# The longest a write waits in the queue, whatever the database's own wait: SQLite's busy
# timeout (30 s), or a long --database-timeout, is a client's whole read deadline, so a write
# given its turn near the end was stored for a client that had given up, and the 503 of one
# that waited it out was read by no one.
QUEUE_WAIT_MAX_S = 10.0


class RepoLocks:
    """One process's write queue per repository, waited on before a database connection is
    taken: writers queued inside the database (a PostgreSQL row lock, SQLite's write lock)
    each held a connection (a thread) while they waited, and a few dozen PUTs to one stuck
    repository left none for any other request. A lock is dropped once nobody holds or waits
    for it: a server sees any number of repositories. At most QUEUE_MAX_WRITES wait."""

    def __init__(self, writes_to: str = "this repository") -> None:
        # What one queue's writes go to, as a refusal names it: a SQLite server's one queue
        # holds every repository's, and a write to a quiet one was told its own was busy.
        self.writes_to = writes_to
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}

    def queued(self, repo: str) -> int:
        """The writes holding or waiting for `repo`'s turn."""
        return self._users.get(repo, 0)

    @contextlib.asynccontextmanager
    async def hold(
        self, repo: str, timeout_s: float, *, writing: str | None = None
    ) -> AsyncIterator[None]:
        """`repo`'s turn; WriteQueueTimeout (a 503, retried) after `timeout_s` in the queue,
        as a wait for the database itself would be (at most QUEUE_WAIT_MAX_S);
        WriteQueueFull at once when QUEUE_MAX_WRITES already wait. `writing`: the repository
        written to when `repo` names a queue of several (SQLite's one), for the refusal to
        name it in the server's log."""
        timeout_s = min(timeout_s, QUEUE_WAIT_MAX_S)
        written = repo if writing is None else writing
        # The one holding the turn, and those waiting for it.
        if self.queued(repo) > QUEUE_MAX_WRITES:
            raise WriteQueueFull(
                QUEUE_MAX_WRITES, QUEUE_FULL_RETRY_AFTER_S, self.writes_to, written
            )
        lock = self._locks.setdefault(repo, asyncio.Lock())
        self._users[repo] = self._users.get(repo, 0) + 1
        try:
            try:
                async with asyncio.timeout(timeout_s):
                    await lock.acquire()
            except TimeoutError:
                raise WriteQueueTimeout(
                    f"this write waited {timeout_s:g} s behind earlier writes to the database",
                    written,
                ) from None
            try:
                yield
            finally:
                lock.release()
        finally:
            self._users[repo] -= 1
            if not self._users[repo]:
                del self._users[repo], self._locks[repo]


class StorageRefused(StorageError):
    """A failure that stays: not "retry later" (503) but a setup or data problem (500)."""


class PreconditionFailed(StorageError):
    def __init__(self, current_etag: str) -> None:
        super().__init__(f"If-Match does not match the current state {current_etag}")
        self.current_etag = current_etag


class TokenRevoked(StorageError):
    """The PUT's token was revoked after it was authenticated, before its write: the write
    transaction found it revoked (a body takes up to minutes to arrive)."""


class KeyCollision(StorageError):
    """`key` and `other` (a stored key or folder, or another key of the same PUT) cannot both
    be written in one team folder (`memoryd_team.storage.folders`)."""

    def __init__(self, key: str, other: str, reason: str) -> None:
        super().__init__(reason)
        self.key = key
        self.other = other
        self.reason = reason


class TooManyEntries(StorageError):
    def __init__(self, max_entries: int, would_have: int) -> None:
        super().__init__(f"{would_have} entries would exceed the limit of {max_entries}")
        self.max_entries = max_entries
        self.would_have = would_have


class VersionNotFound(StorageError):
    pass


class TooLargeForOneReply(StorageError):
    """The repository's contents exceed what one unpaged GET may hold (`max_bytes`)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(f"the entries exceed {max_bytes} bytes: read them page by page")
        self.max_bytes = max_bytes


@dataclass(frozen=True, slots=True)
class IfMatch:
    """A parsed If-Match header: `any` for `*`, else the strong entity tags it lists."""

    etags: frozenset[str] = frozenset()
    any: bool = False


@dataclass(frozen=True, slots=True)
class Author:
    """Who wrote a version: the token's id and name, or an admin command."""

    token_id: str
    name: str


@dataclass(frozen=True, slots=True)
class TokenInfo:
    id: str
    name: str
    repos: tuple[str, ...]
    created_at: datetime
    revoked_at: datetime | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


@dataclass(frozen=True, slots=True)
class RepoState:
    etag: str
    checksums: dict[str, str]
    # None when only the hashes were asked for.
    entries: dict[str, str] | None


@dataclass(frozen=True, slots=True)
class Page:
    """Entries in key order from a starting key, as of one snapshot (`etag`)."""

    etag: str
    entries: dict[str, str]
    # Of `entries`, or of every entry from the first when asked (`all_checksums`): all of
    # them, or (`checksum_bytes`) those before `checksums_next`.
    checksums: dict[str, str]
    next: str | None  # the first key of the next page; None after the last entry
    checksums_next: str | None = None  # the first key whose checksum the listing left out


@dataclass(frozen=True, slots=True)
class ChecksumPage:
    """Checksums in key order from a starting key, as of one snapshot (`etag`)."""

    etag: str
    checksums: dict[str, str]
    next: str | None  # the first key left out; None after the last entry


class ChecksumListing:
    """Checksums taken in key order until they reach `max_bytes` (None: no bound), but at
    least through key `through` (a first page's last entry: every entry a page carries has
    its checksum in the same reply). One listing per read; `next` is the first key refused."""

    __slots__ = ("checksums", "max_bytes", "next", "size", "through")

    def __init__(self, max_bytes: int | None, through: str | None = None) -> None:
        self.max_bytes = max_bytes
        self.through = through
        self.checksums: dict[str, str] = {}
        self.next: str | None = None
        self.size = 0

    def add(self, key: str, digest: str) -> bool:
        """Lists `key`; False (and `next` set to it) once the listing is full."""
        if (
            self.max_bytes is not None
            and self.checksums
            and self.size >= self.max_bytes
            and (self.through is None or key > self.through)
        ):
            self.next = key
            return False
        self.checksums[key] = digest
        self.size += listed_bytes(key, len(digest))
        return True


@dataclass(frozen=True, slots=True)
class PutResult:
    etag: str
    written: tuple[str, ...]
    unchanged: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class VersionInfo:
    repo: str
    key: str
    version: int
    checksum: str
    size: int
    written_at: datetime
    token_id: str
    author: str
    restored_from: int | None


@dataclass(frozen=True, slots=True)
class Upsert:
    """One write transaction, as `put_entries` and `restore` hand it to a storage's `_apply`."""

    repo: str
    entries: Mapping[str, str]
    if_match: IfMatch | None
    max_entries: int | None
    check_precondition: bool  # False for a restore: it names a version, not a state
    # True for a PUT: its token (author.token_id) must still be active inside the write
    # transaction, so a revoke is never followed by a write of that token. False for a
    # restore, whose author is the admin command, no token.
    check_token: bool
    author: Author
    at: datetime
    restored_from: int | None  # the version a restore brings back


class Storage(abc.ABC):
    """Async storage of tokens, current entries and their history."""

    # The schema steps the last `open` applied (`memoryd-team migrate` reports them).
    migrations_applied: list[int] = []  # noqa: RUF012 - replaced per instance, never mutated

    @abc.abstractmethod
    async def open(self) -> None:
        """Connect and bring the schema up to date (`migrate`)."""

    @abc.abstractmethod
    async def migrate(self) -> list[int]:
        """Apply the schema steps not applied yet, in order; the versions applied. Idempotent,
        and safe from several processes at once and while servers run (one lock)."""

    @abc.abstractmethod
    async def schema_version(self) -> int:
        """The newest schema step applied."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    # tokens -------------------------------------------------------------------------------

    @abc.abstractmethod
    async def create_token(
        self, token_id: str, token_hash: str, repos: tuple[str, ...], name: str, at: datetime
    ) -> TokenInfo: ...

    @abc.abstractmethod
    async def find_token(self, token_hash: str) -> TokenInfo | None:
        """The token with this hash, revoked or not (the caller decides)."""

    @abc.abstractmethod
    async def list_tokens(self) -> list[TokenInfo]: ...

    @abc.abstractmethod
    async def revoke_token(self, token_id: str, at: datetime) -> bool:
        """True when an active token was revoked by this call."""

    # entries ------------------------------------------------------------------------------

    @abc.abstractmethod
    async def get_etag(self, repo: str) -> str | None:
        """The current ETag, None when the repo has no entries."""

    @abc.abstractmethod
    async def get_state(
        self, repo: str, *, with_content: bool, max_content_bytes: int | None = None
    ) -> RepoState | None:
        """A consistent snapshot (ETag matches the checksums), None when the repo has none.
        With content, TooLargeForOneReply once the contents read pass `max_content_bytes`
        (rows are read one by one, so memory stays near the cap whatever the repo's size)."""

    @abc.abstractmethod
    async def get_page(
        self,
        repo: str,
        *,
        start: str | None,
        max_bytes: int,
        all_checksums: bool = False,
        checksum_bytes: int | None = None,
    ) -> Page | None:
        """Entries with key >= `start` (code point order) until their keys and contents
        reach `max_bytes` (at least one entry), from one snapshot; None when the repo has
        none. With `all_checksums`, the checksums of every entry from the first (same
        snapshot): all of them, or up to `checksum_bytes` (`ChecksumListing`)."""

    @abc.abstractmethod
    async def get_checksums(
        self, repo: str, *, start: str | None, max_bytes: int
    ) -> ChecksumPage | None:
        """Checksums of the entries with key >= `start` (code point order) until their keys
        and checksums reach `max_bytes` (at least one), from one snapshot; None when the
        repo has none."""

    async def put_entries(
        self,
        repo: str,
        entries: Mapping[str, str],
        if_match: IfMatch | None,
        *,
        max_entries: int | None,
        author: Author,
        at: datetime,
        check_token: bool = True,
    ) -> PutResult:
        """Upsert under the repo's write lock; the precondition is checked inside it, and
        that the author's token is still active (else TokenRevoked). `check_token=False` only
        for seeding or an admin's tool, whose author is any name: on by default, a caller
        that forgets it fails loudly instead of letting a revoked token write."""
        return await self._apply(
            Upsert(
                repo,
                entries,
                if_match,
                max_entries=max_entries,
                check_precondition=True,
                check_token=check_token,
                author=author,
                at=at,
                restored_from=None,
            )
        )

    @abc.abstractmethod
    async def _apply(self, upsert: Upsert) -> PutResult:
        """One write transaction: with `check_token`, TokenRevoked unless the author's token is
        active, holding it so (a revoke waits for the write); lock the repo, `plan_upsert`,
        append versions, update current."""

    # history ------------------------------------------------------------------------------

    @abc.abstractmethod
    async def history(self, repo: str, key: str | None = None) -> list[VersionInfo]:
        """Every version, oldest first (by key, then version)."""

    async def get_version(self, repo: str, key: str, version: int) -> tuple[VersionInfo, str]:
        """A version's metadata and content; VersionNotFound when it does not exist."""
        if not 1 <= version <= MAX_VERSION:
            # Never written, and no database parameter holds it (SQLite: OverflowError;
            # PostgreSQL: an int32 error that would read as an unusable database).
            raise VersionNotFound(f"{repo}: no version {version} of {key!r}")
        return await self._read_version(repo, key, version)

    @abc.abstractmethod
    async def _read_version(self, repo: str, key: str, version: int) -> tuple[VersionInfo, str]:
        """`get_version` for a version number the database can hold."""

    async def restore(
        self, repo: str, key: str, version: int, *, author: Author, at: datetime
    ) -> PutResult:
        """Make an old version current again, as a new version (history only grows)."""
        _, content = await self.get_version(repo, key, version)
        return await self._apply(
            Upsert(
                repo,
                {key: content},
                None,
                max_entries=None,
                check_precondition=False,
                check_token=False,
                author=author,
                at=at,
                restored_from=version,
            )
        )
