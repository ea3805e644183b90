"""Pull and push for one team folder ↔ one repository on the team server.

The engine holds one lock: a pull and a push never interleave, and the watcher's pushes queue
behind an explicit `team.pull`. With it, the state file's (`StateStore.shared`): another daemon
of this HOME syncing the same folder waits too, and each sync starts from what the other saved.
Blocking filesystem work (scans, writes) runs in a thread.

Pull (server wins per key, but no edit is lost): a key the user edited locally while the
server's copy moved on too is first saved aside as `<name>.conflict-<UTC time>.md` and
reported (`team/conflict`). Every write goes through LocalFolder.replace, which never
overwrites: the local file is moved aside and kept as a conflict copy unless it turns out to
be the synced or the server's version, so an edit saved while the pull ran is kept too. Every
key the server sends is validated (protocol.validate_key and the real-path check of
LocalFolder.target) before anything is written; a refused key is recorded, never written.

Push: the delta by checksum (delta.push_delta), minus entries with a secret, too large, or
over the learned entry limit; cut into batches (protocol.plan_batches), each PUT with
If-Match. 412 → re-fetch the checksums and recompute (two retries); 413 → learn the entry
limit or a smaller body cap and go on; 422 → the entry the server's scan names is skipped.
Any other 4xx suppresses pushing (SyncState.suppressed) until `lift_suppression`.

A push never overwrites a teammate's edit either: when the server's checksums (refreshed by a
412, or from an earlier refresh) show that a key the user edited was also changed on the
server since the last sync (delta.conflicted_keys), the push first pulls — the same rule as
a pull, server wins: the local edit is saved aside as `<name>.conflict-<UTC time>.md` and
reported, the server's version is written — then pushes the rest. A key that still conflicts
after that (its copy or write failed) is withheld, never pushed over the server's version.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import hashlib
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Hashable,
    Iterable,
    Mapping,
)
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import structlog

from memoryd.automem.index import INDEX_NAME, merge_added_entries
from memoryd.core.host import Notify
from memoryd.team.protocol import (
    BATCH_MAX_BYTES,
    CHECKSUM_PREFIX,
    checksum,
    encode_put_body,
    key_problem,
    listed_bytes,
    plan_batches,
)
from memoryd.team.sync import delta
from memoryd.team.sync.client import (
    UNASKED_304,
    BodyTooLarge,
    EntryTooLarge,
    KeyCollision,
    NotModified,
    Page,
    PagingUnsupported,
    Permanent,
    PreconditionFailed,
    Retryable,
    SecretRejected,
    Stopping,
    TeamClient,
    TeamHTTPError,
    TooManyEntries,
)
from memoryd.team.sync.localfs import LocalFolder, LocalScan
from memoryd.team.sync.state import Conflict, Skipped, StateHeld, StateStore, SyncState

log = structlog.get_logger("memoryd.team")

_First = TypeVar("_First")
# A first reply's checksums, where the rest of them start (None: it listed all) and its ETag.
_Listing = tuple[dict[str, str], str | None, str | None]

SecretCheck = Callable[[str], "tuple[str, str] | None"]  # content -> (rule id, description)

PRECONDITION_RETRIES = 2  # SPEC.md: 412 → refresh and retry, twice
# The state file's lock waited for without a client (its request deadline, 2 x 30 s, otherwise).
LOCK_WAIT_S = 60.0
MAX_ROUNDS = 16  # every other recovery (413, 422) shrinks the push; this bounds them all
MIN_BODY = 4096
LEARNED_LIMITS_TTL = timedelta(hours=1)  # then a 413's limits are asked for again
PROCESS_SCAN_MIN_BYTES = 2_000_000  # below this a worker process costs more than it saves
SECRET_CACHE_MAX = 50_000  # scan results kept, by content checksum
# `team.status` scans the folder again at least this often even while its watcher saw no
# change: inotify misses what another machine writes on a network filesystem, and mmap writes.
STATUS_SCAN_MAX_AGE_S = 60.0
# `team/synced` names at most this many of the files a sync wrote (an editor reloads them),
# and counts the rest: a first pull of a large repository writes thousands.
MAX_SYNCED_PATHS = 20
# A checksum listing read in parts (each within the reply cap) stops past this many reply
# caps in all (256 MiB: 240,000 entries with 1 KB keys): a server whose listing never ends
# would otherwise grow the daemon until the OOM killer came.
CHECKSUM_LISTING_REPLIES = 4


SecretHits = dict[str, tuple[str, str]]  # key -> (rule id, description)


def scan_entries(
    find_secret: SecretCheck, items: dict[str, str], keys: Iterable[str] = ()
) -> tuple[SecretHits, SecretHits]:
    """The secret findings of `keys` themselves (scanned like content: a file name is pushed
    too) and of the contents of `items`, by key (module level: it runs in a worker process)."""
    from memoryd.team.secrets import key_text  # the scanner loads only when a push needs it

    in_keys: SecretHits = {}
    for key in keys:
        hit = find_secret(key_text(key))
        if hit is not None:
            in_keys[key] = (hit[0], f"{hit[1]} in the file name")
    in_contents: SecretHits = {}
    for key, content in items.items():
        hit = find_secret(content)
        if hit is not None:
            in_contents[key] = hit
    return in_keys, in_contents


# A refused key whose reason starts so failed for a passing cause (the disk full, a folder
# unreadable): it is not "in step", so the next pull asks for everything again (no
# If-None-Match) instead of being told 304 for ever. Others (a key no path may hold, an entry
# over the size this client syncs) stay refused until the server changes them.
RETRIED = "will retry: "
# A refused key whose reason starts so was a valid key that the local folder could not take (a
# symbolic link or a folder on its path): refused while that stands, but once the user clears
# the path the next pull asks for everything again. Kept as refused for good before, the key
# waited for the server's ETag to change, however long that took.
LOCAL_PATH = "the local path "
# The same refusals as a state saved before LOCAL_PATH words them.
_OLD_LOCAL_PATH = ("goes through a symbolic link in the team folder", "exists and is not a regular")


# Entries the server lists but did not deliver intact: dropped without a word, the pull said
# ok, nothing was refused or pending, and the file never came.
UNMATCHED = (
    f"{RETRIED}the server sent content that does not match its checksum (changed during the "
    "pull?); not written"
)
UNDELIVERED = (
    f"{RETRIED}the server listed it but no page held it (its page cursor skipped it); not written"
)


def _same_result(before: dict[str, Any] | None, after: dict[str, Any] | None) -> bool:
    """Whether two `last_result`s say the same but for when."""
    if before is None or after is None:
        return before is after
    return {k: v for k, v in before.items() if k != "at"} == {
        k: v for k, v in after.items() if k != "at"
    }


def _needed_keys(server: Mapping[str, str], local: Mapping[str, str]) -> list[str]:
    """The server's keys, sorted, whose checksum differs from the local file's, but for keys
    no path may hold."""
    return sorted(k for k, d in server.items() if local.get(k) != d and key_problem(k) is None)


def _refused_for_good(reason: str | None) -> bool:
    return reason is not None and not reason.startswith(RETRIED)


def _is_text(value: str) -> bool:
    """Whether `value` is valid UTF-8 text (JSON lets a lone surrogate through, `"\\ud800"`)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _printable(key: str) -> str:
    """`key` itself, or with its lone surrogates as `\\udXXX` escapes (for the state file)."""
    return key if _is_text(key) else key.encode("utf-8", "backslashreplace").decode("utf-8")


def _digest(content: str) -> str:
    """`checksum`, also of content that is not UTF-8 text (its surrogates' own bytes)."""
    if _is_text(content):
        return checksum(content)
    return CHECKSUM_PREFIX + hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()


def _texts(entries: Mapping[str, str], refused: dict[str, str]) -> dict[str, str]:
    """The entries whose content is text the folder can hold and its scan read back; the
    others go to `refused` (one with a NUL was written, then skipped by every scan: the
    folder looked behind for good and never got a 304)."""
    texts: dict[str, str] = {}
    for key, content in entries.items():
        if not _is_text(content):
            refused[key] = "the server's version is not UTF-8 text (a lone surrogate); not written"
        elif "\x00" in content:
            refused[key] = "the server's version holds a NUL character: not text to share"
        else:
            texts[key] = content
    return texts


class SyncSuppressed(Exception):
    """Pushing is suppressed after a permanent failure (the reason is in the message)."""


@dataclass
class PullReport:
    pulled: list[str] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    not_modified: bool = False
    empty: bool = False  # the server has nothing for this repo (404)
    limits_forgotten: bool = False  # learned limits dropped: what they withheld may go now
    # The server's state went back to an earlier one (a restore, a lagging replica): what it
    # no longer holds was kept aside as conflict copies, not overwritten.
    went_back: bool = False


@dataclass
class PushReport:
    pushed: list[str] = field(default_factory=list)
    skipped: dict[str, Skipped] = field(default_factory=dict)
    requests: int = 0
    pull_needed: bool = False
    # Written by the pull a conflict made the push do first (server wins, see the module doc).
    pulled: list[str] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)  # conflicted, could not be resolved


def _now_iso(now: datetime) -> str:
    return now.isoformat(timespec="seconds").replace("+00:00", "Z")


class SyncEngine:
    def __init__(
        self,
        *,
        state: SyncState,
        store: StateStore,
        folder: LocalFolder,
        client: TeamClient | None,
        notify: Notify,
        find_secret: SecretCheck,
        write_lock: asyncio.Lock | None = None,
        on_pulled: Callable[[list[str]], None] | None = None,
        scan_pool: Callable[[], Executor] | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.state = state
        self.store = store
        self.folder = folder
        self.client = client
        self._notify = notify
        self._find_secret = find_secret
        self._write_lock = write_lock or asyncio.Lock()
        self._on_pulled = on_pulled  # e.g. drop the auto memory caches of the folder
        self._clock = clock
        self._lock = asyncio.Lock()
        self._secret_cache: dict[str, tuple[str, str] | None] = {}
        self._scan_pool = scan_pool
        self.process_scan_min_bytes = PROCESS_SCAN_MIN_BYTES
        # Keys the daemon wrote itself (mark_pending), each with the count of marks when it
        # was marked: a scan started before a mark did not see that write.
        self._marks = 0
        self._marked: dict[str, int] = {}
        # Saved at least once in this run: what the service set on the state when it made the
        # folder (its project's roots) is on disk, so a 304 with nothing new may skip saving.
        self._saved = False
        # Why the repository this folder syncs with is not known yet (a subgroup's full path
        # the server has not answered for, TeamSync): every pull and push fails with it,
        # sending nothing, rather than going to a name the team may have moved from.
        self.unsettled: Retryable | None = None
        # Set by the runner that watches the folder (`SyncRunner.unchanged_token`): a token
        # that repeats only while nothing in the folder changed; None when it cannot say.
        self.unchanged_since: Callable[[], Hashable | None] = lambda: None
        # `team.status`'s last scan: (that token when it started, its checksums, the marks
        # made before it, when it started on the loop's clock).
        self._status_scan: tuple[Hashable, dict[str, str], int, float] | None = None
        self.status_scan_max_age_s = STATUS_SCAN_MAX_AGE_S
        self._refreshing: asyncio.Future[None] | None = None  # done when that refresh is
        self._syncing = 0  # pulls and pushes holding or waiting for the engine's lock

    @property
    def repo(self) -> str:
        return self.state.repo

    @property
    def busy(self) -> bool:
        """A pull or push is in flight, or waits for the engine's lock (a status refresh,
        local and short, is not one)."""
        return self._syncing > 0

    def _client(self) -> TeamClient:
        if self.client is None:
            raise SyncSuppressed(self.state.suppressed or "no_oauth")
        if self.unsettled is not None:
            raise Retryable(str(self.unsettled), self.unsettled.status)
        return self.client

    def lift_suppression(self) -> bool:
        """A deletion in team/ lifts a permanent-failure suppression — but never no_repo or
        no_oauth, which no file change can fix. True when something was lifted."""
        if self.state.suppressed is None or self.client is None:
            return False
        self.state.suppressed = None
        return True

    def mark_pending(self, key: str) -> None:
        """The daemon itself just wrote `key` in the folder: pending now. Left to the watcher,
        `team.status` (and a push in flight, whose scan came before the write) said nothing was
        pending until its debounce had passed, and a client could not tell "pushed" from "not
        seen yet". The next scan started after this mark decides for good."""
        self._marks += 1
        self._marked[key] = self._marks
        if key not in self.state.pending:
            self.state.pending.append(key)

    async def _scan(self) -> tuple[LocalScan, int]:
        """The folder scanned (in a thread), and the marks made before the scan started."""
        marks = self._marks
        return await asyncio.to_thread(self.folder.scan), marks

    def _pending_after(self, local: Mapping[str, str], marks: int) -> list[str]:
        """`_pending` of a scan that started after `marks` marks, plus the keys marked since:
        a write the scan may not have seen stays pending."""
        pending = self._pending(local)
        for key, mark in list(self._marked.items()):
            if mark <= marks:
                del self._marked[key]  # the scan saw that write
            elif key not in pending:
                pending.append(key)
        return pending

    def _result(self, op: str, ok: bool, **fields: Any) -> None:
        self.state.last_result = {"op": op, "ok": ok, "at": _now_iso(self._clock()), **fields}

    async def _save(self) -> None:
        # In a thread: a large folder's state takes the loop 50-150 ms to encode and write.
        await self.store.save_off_loop(self.state)
        self._saved = True

    # -- pull -----------------------------------------------------------------------------
    async def pull(self) -> PullReport:
        report = PullReport()
        try:
            async with self._holding("pull"):
                client = self._client()
                fingerprint, last = self._fingerprint(), self.state.last_result
                scan, marks = await self._scan()
                # A 304 is only asked for while the folder reflects every checksum we know
                # of: a file deleted locally must come back (SPEC.md), and after a
                # hashes-only refresh (412) the ETag is newer than the files — a 304 would
                # then hide those changes.
                behind = self._behind(scan.checksums)
                if_none_match = self.state.etag if self.state.etag and not behind else None
                try:
                    await self._pull_into(client, scan, report, if_none_match=if_none_match)
                except TeamHTTPError as exc:
                    await self._fail("pull", exc)
                    raise
                report.limits_forgotten = self._expire_limits(len(self.state.server_checksums))
                self.state.pending = self._pending_after(scan.checksums, marks)
                self._result(
                    "pull",
                    True,
                    pulled=len(report.pulled),
                    conflicts=len(report.conflicts),
                    **({"went_back": True} if report.went_back else {}),
                )
                # A 304 that changed nothing but the time of the last result (every
                # get_context's, once a minute) writes nothing: a 20,000-file folder's state
                # is 4 MB, written and fsynced each time.
                if not (
                    report.not_modified
                    and self._saved
                    and self._fingerprint() == fingerprint
                    and _same_result(last, self.state.last_result)
                ):
                    await self._save()
        finally:
            # The pages written before a failing one are on disk: said as a whole pull's are.
            await self._announce_conflicts(report.conflicts)
            if report.pulled:
                if self._on_pulled is not None:
                    self._on_pulled(report.pulled)
                await self._announce_synced(0, report.pulled)
        return report

    async def _announce_synced(self, pushed: int, pulled: list[str]) -> None:
        """`team/synced`: the counts, and the paths of the files the sync wrote (the first by
        key, the rest counted in `more`), so an editor can reload those it shows."""
        shown = sorted(pulled)[:MAX_SYNCED_PATHS]
        await self._notify(
            "team/synced",
            {
                "repo": self.repo,
                "pushed": pushed,
                "pulled": len(pulled),
                "paths": [str(self.folder.path_of(key)) for key in shown],
                "more": len(pulled) - len(shown),
            },
        )

    async def _announce_conflicts(self, conflicts: list[Conflict]) -> None:
        for conflict in conflicts:
            await self._notify(
                "team/conflict",
                {
                    "path": str(self.folder.path_of(conflict.key)),
                    "saved_as": conflict.saved_as,
                    "repo": self.repo,
                },
            )

    async def _pull_into(
        self,
        client: TeamClient,
        scan: LocalScan,
        report: PullReport,
        *,
        if_none_match: str | None = None,
    ) -> None:
        """Bring the folder to the server's state in bounded pieces (`view=page`): the first
        page carries every entry's checksum and the first entries (a 304 or 404 ends it
        there); then only pages that hold an entry whose checksum differs from the local
        file are asked for, each written before the next — so the client holds one page,
        whatever the repository's size. An entry that changed on the server after the first
        page is left for the next pull (its file then still differs from
        `server_checksums`). A server from before paging gets the one unpaged GET it knows."""
        try:
            first, server = await self._listed_whole(
                client,
                lambda: client.fetch_page(self.repo, if_none_match=if_none_match),
                lambda page: (
                    (page.checksums, page.checksums_next, page.etag)
                    if isinstance(page, Page)
                    else None
                ),
            )
        except PagingUnsupported:
            await self._pull_unpaged(client, scan, report, if_none_match)
            return
        if first is None or isinstance(first, NotModified):
            self._nothing_to_write(first, report, asked=if_none_match is not None)
            return
        report.went_back = self._went_back(first.etag)
        # A key no path may hold is refused by `_settle` without being fetched (asked for as
        # a page's start, a lone surrogate could not even be sent). In a thread: checking
        # 20,000 keys held the event loop ~80 ms at a folder's first pull.
        needed = await asyncio.to_thread(_needed_keys, server, dict(scan.checksums))
        refused: dict[str, str] = {}
        handled: set[str] = set()
        mismatched: set[str] = set()
        page: Page | NotModified | None = first
        asked = ""  # the key the last page started at: each next one must start past it
        while isinstance(page, Page):
            wanted: dict[str, str] = {}
            for key, content in _texts(page.entries, refused).items():
                if key not in server or scan.checksums.get(key) == server[key]:
                    continue
                if checksum(content) == server[key]:
                    wanted[key] = content
                else:
                    # Changed since the first page (or a server that lies): `_settle` lists it.
                    mismatched.add(key)
            if wanted:
                async with self._write_lock:
                    await asyncio.to_thread(self._apply_entries, wanted, scan, report, refused)
                handled.update(wanted)
            if page.next is None:
                break
            index = bisect.bisect_left(needed, page.next)
            if index == len(needed):
                break
            if needed[index] <= asked:
                # A server whose cursor does not move on would be asked forever.
                raise Retryable(
                    f"the server's page cursor did not move past {asked!r} (next: {page.next!r})"
                )
            asked = needed[index]
            page = await client.fetch_page(self.repo, start=asked)
        for key in mismatched - handled:
            refused.setdefault(key, UNMATCHED)
        await asyncio.to_thread(self._settle, server, first.etag, scan, report, refused, handled)

    async def _listed_whole(
        self,
        client: TeamClient,
        read_first: Callable[[], Awaitable[_First]],
        listing_of: Callable[[_First], _Listing | None],
    ) -> tuple[_First, dict[str, str]]:
        """`read_first`'s reply (a first page, or a first checksum listing) and every checksum
        of its state (`_checksums_from`; none when `listing_of` finds no listing in it: a 304
        or 404). A push landing while the parts are read (a 412 on one) starts again from
        the first reply, up to PRECONDITION_RETRIES times, then is a retryable failure: on a
        busy repository that race is routine, and failing at once showed it as an error and,
        with many parts, could fail pull after pull."""
        for attempt in range(1, PRECONDITION_RETRIES + 2):
            reply = await read_first()
            listing = listing_of(reply)
            if listing is None:
                return reply, {}
            try:
                return reply, await self._checksums_from(client, *listing)
            except PreconditionFailed:
                log.info("team checksums changed while read", repo=self.repo, attempt=attempt)
        raise Retryable(
            f"the team repository changed while its checksums were read "
            f"({PRECONDITION_RETRIES + 1} times); read again at the next try",
            412,
        )

    async def _checksums_from(
        self,
        client: TeamClient,
        listed: dict[str, str],
        following: str | None,
        etag: str | None,
    ) -> dict[str, str]:
        """Every checksum of the state `etag`: `listed`, and the rest from `following` on,
        a bounded listing at a time (a server from before paged checksums sent them all:
        `following` is None). Each is asked with `If-Match: etag`, so all of them are of one
        state; a push meanwhile raises PreconditionFailed (412: `_listed_whole` starts
        again). A server whose listing repeats or goes on past what the folder could sync
        is an error, never a loop."""
        if following is None:
            return listed
        checksums = dict(listed)
        limit = CHECKSUM_LISTING_REPLIES * client.max_reply_bytes
        size = sum(listed_bytes(key, len(digest)) for key, digest in listed.items())
        last = max(listed, default=None)  # keys come in code point order: each past the last
        while following is not None:
            if last is not None and following <= last:
                raise Retryable(
                    f"the team server's checksum listing went back to {following!r:.200}"
                )
            listing = await client.fetch_checksums(self.repo, start=following, if_match=etag)
            if listing is None:
                raise Retryable("the team repository was emptied while its checksums were read")
            if listing.etag != etag:
                raise Retryable("the team server sent checksums of another state than the first")
            keys = listing.checksums
            # Each listing starts at its cursor, and its `next` lies past all it listed.
            ends_at = max(keys) if keys else following
            if (keys and min(keys) < following) or (
                listing.next is not None and listing.next <= ends_at
            ):
                raise Retryable(
                    f"the team server's checksum listing from {following!r:.200} did not move on"
                )
            size += sum(listed_bytes(key, len(digest)) for key, digest in listing.checksums.items())
            if size > limit:
                raise Retryable(
                    f"the team server's checksum listing goes on past {limit:,} bytes; not read "
                    "further"
                )
            checksums.update(keys)
            last, following = ends_at, listing.next
        return checksums

    async def _pull_unpaged(
        self, client: TeamClient, scan: LocalScan, report: PullReport, if_none_match: str | None
    ) -> None:
        """The whole repository in one GET, for a server from before paging."""
        snapshot = await client.fetch(self.repo, if_none_match=if_none_match)
        if snapshot is None or isinstance(snapshot, NotModified):
            self._nothing_to_write(snapshot, report, asked=if_none_match is not None)
            return
        assert snapshot.entries is not None
        refused: dict[str, str] = {}
        texts = _texts(snapshot.entries, refused)
        report.went_back = self._went_back(snapshot.etag)
        async with self._write_lock:
            await asyncio.to_thread(self._apply_entries, texts, scan, report, refused)
        server = {key: _digest(content) for key, content in snapshot.entries.items()}
        await asyncio.to_thread(
            self._settle, server, snapshot.etag, scan, report, refused, set(server)
        )

    def _nothing_to_write(
        self, reply: NotModified | None, report: PullReport, *, asked: bool
    ) -> None:
        """A 304 (the folder is in step), or a 404 (the server has nothing for this repo).
        A 304 nobody asked for (no If-None-Match) says nothing of the folder: a confused
        proxy, retried like a 5xx."""
        if reply is not None:
            if not asked:
                raise Retryable(UNASKED_304)
            report.not_modified = True
            return
        report.empty = True
        self.state.server_at(None)
        self.state.server_checksums = {}

    def _went_back(self, etag: str | None) -> bool:
        """Whether the server's state went back to one it had before (`SyncState.server_at`)."""
        if not (self.state.went_back or self.state.returns_to(etag)):
            return False
        log.warning(
            "the team server's state went back to an earlier one (a restore from a backup, a "
            "lagging replica?): local versions it no longer holds are kept as conflict copies",
            repo=self.repo,
        )
        return True

    def _apply_entries(
        self,
        entries: Mapping[str, str],
        scan: LocalScan,
        report: PullReport,
        refused: dict[str, str],
    ) -> None:
        """Write what the server sent (in a thread, under the memory dir's writer lock);
        `scan` is updated with what was written, `refused` with the keys not written. After
        the server went back (`report.went_back`) a synced local version is kept aside too:
        the server lost it."""
        dirs_to_sync: set[Path] = set()
        try:
            self._write_entries(entries, scan, report, refused, dirs_to_sync)
        finally:
            # Before the state can record them as synced (the caller saves it after).
            self.folder.sync_dirs(dirs_to_sync)

    def _write_entries(
        self,
        entries: Mapping[str, str],
        scan: LocalScan,
        report: PullReport,
        refused: dict[str, str],
        dirs_to_sync: set[Path],
    ) -> None:
        state = self.state
        now = self._clock()
        for key in sorted(entries):
            content = entries[key]
            digest = checksum(content)  # ours, not the server's word for it
            if not self._writable(key, refused):
                continue
            size = len(content.encode("utf-8"))
            if size > self.folder.entry_max:
                # A server allowing more than this client keeps: written, the file could never
                # be read back as a version of it, and each update made a false conflict copy.
                refused[key] = (
                    f"the server's version is {size} bytes, over the {self.folder.entry_max} "
                    "this client syncs; not written"
                )
                continue
            if scan.checksums.get(key) == digest:
                state.synced[key] = digest  # in step (an edit since the scan stays pending)
                continue
            # Read the file now, not at the scan: the GET took a while and the user may have
            # edited it meanwhile; deciding on stale content could overwrite that edit.
            mine = self.folder.read(key)
            local = None if mine is None else checksum(mine)
            if mine is None and self.folder.exists(key):
                local = "unreadable"  # not text: never overwritten without a copy
            synced = state.synced.get(key)
            action = delta.pull_action(digest, local, synced)
            if action is delta.PullAction.KEEP_LOCAL:
                continue
            if action is not delta.PullAction.IN_STEP:
                # WRITE or CONFLICT: `replace` moves the local file aside and keeps it as a
                # conflict copy unless it is the synced (or the server's) version — decided on
                # the bytes that moved, so an edit saved since the read above is kept too.
                # After the server went back, the synced version is one it lost (a version
                # pushed after its backup): dropped, it was gone from the folder and the server.
                disposable = {digest} if synced is None or report.went_back else {digest, synced}
                written = content
                if action is delta.PullAction.CONFLICT and mine is not None and key == INDEX_NAME:
                    # The index is derived from the files: both sides' added lines are kept
                    # (the merge is pushed next); a copy aside only if a local line would go.
                    written, lossless = merge_added_entries(content, mine)
                    if lossless and local is not None:
                        disposable.add(local)
                try:
                    done = self.folder.replace(
                        key, written, disposable=disposable, now=now, dirs_to_sync=dirs_to_sync
                    )
                except ValueError as exc:
                    refused[key] = f"local file kept, server version not written: {exc}"
                    continue
                except OSError as exc:  # a full disk, say: the next pull tries again
                    refused[key] = f"{RETRIED}local file kept, server version not written: {exc}"
                    continue
                if done.saved_as is not None:
                    conflict = Conflict(key, str(done.saved_as), _now_iso(now))
                    state.add_conflict(conflict)
                    report.conflicts.append(conflict)
                if not done.written:
                    # Re-created while being replaced: the user's file stays; the next sync
                    # sees it as an edit against the server's version.
                    continue
                report.pulled.append(key)
                # The file now holds it: not pending (a merged index is: it holds more).
                scan.checksums[key] = checksum(written)
            state.synced[key] = digest

    def _writable(self, key: str, refused: dict[str, str]) -> bool:
        """Whether the server's `key` is a path this folder may hold; why not goes to `refused`."""
        problem = key_problem(key)
        if problem is not None:
            refused[key] = problem
            return False
        try:
            self.folder.target(key)
        except ValueError as exc:
            refused[key] = f"{LOCAL_PATH}{exc}"
            return False
        except OSError as exc:
            refused[key] = f"{RETRIED}cannot check the path: {exc.strerror}"
            return False
        return True

    def _path_cleared(self, key: str, reason: str | None) -> bool:
        """Whether a key refused for its local path could now be written there."""
        if reason is None or not reason.startswith((LOCAL_PATH, *_OLD_LOCAL_PATH)):
            return False
        try:
            self.folder.target(key)
        except (ValueError, OSError):
            return False
        return True

    def _settle(
        self,
        server: Mapping[str, str],
        etag: str | None,
        scan: LocalScan,
        report: PullReport,
        refused: dict[str, str],
        handled: set[str],
    ) -> None:
        """After the pages: the keys not fetched are checked as paths and marked synced when
        in step; one the folder needed that no page delivered is refused (`UNDELIVERED`), so
        status says so and the next pull asks for everything again; then the server state
        is recorded."""
        state = self.state
        for key, digest in server.items():
            if key in handled or key in refused:
                continue
            if scan.checksums.get(key) == digest:
                # In step: the scan found it a regular file under real folders (links are
                # never walked) and checked its name, so it is a path the folder may hold.
                # Checked again here, every key cost three stats at each pull that changed
                # anything (60,000 for a folder of 20,000 files).
                state.synced[key] = digest
            elif self._writable(key, refused):
                refused[key] = UNDELIVERED
        # A key that is not UTF-8 text (a lone surrogate) is listed under a printable form
        # and not kept among the server's checksums: saved as it is, it made the state file
        # unwritable, this pull's and every later one's.
        state.server_checksums = {k: d for k, d in server.items() if _is_text(k)}
        state.server_at(etag)
        state.went_back = False  # this pull kept aside what the server went back on
        state.refused_keys = {_printable(k): why for k, why in refused.items()}
        report.refused = state.refused_keys

    # -- push -----------------------------------------------------------------------------
    async def push(self) -> PushReport:
        report = PushReport()
        try:
            async with self._holding("push"):
                if self.state.suppressed is not None:
                    raise SyncSuppressed(self.state.suppressed)
                client = self._client()
                before = client.requests
                fingerprint = self._fingerprint()
                try:
                    await self._push(client, report)
                except TeamHTTPError as exc:
                    await self._fail("push", exc)
                    raise
                finally:
                    report.requests = client.requests - before
                    # A no-op push (the common case) writes nothing: no request, nothing new.
                    if report.requests or self._fingerprint() != fingerprint:
                        await self._save()
                fields: dict[str, Any] = {
                    "pushed": len(report.pushed),
                    "requests": report.requests,
                }
                if report.pulled or report.conflicts:
                    fields.update(pulled=len(report.pulled), conflicts=len(report.conflicts))
                last = self.state.last_result
                # Nothing sent says nothing of the server: a failed pull stays in sight.
                if report.requests or last is None or last.get("ok"):
                    self._result("push", True, **fields)
        finally:
            # What the push pulled first is on disk even when a later PUT failed (and what
            # earlier batches pushed is on the server): say so, so an editor showing a pulled
            # file reloads it.
            await self._announce_conflicts(report.conflicts)
            if report.pulled and self._on_pulled is not None:
                self._on_pulled(report.pulled)
            if report.pushed or report.pulled:
                await self._announce_synced(len(report.pushed), report.pulled)
        for key, skipped in report.skipped.items():
            if skipped.reason == "secret":
                await self._notify(
                    "team/secret_blocked",
                    {
                        "path": str(self.folder.path_of(key)),
                        "rule": skipped.rule,
                    },
                )
        return report

    async def _push(self, client: TeamClient, report: PushReport) -> None:
        state = self.state
        self._expire_limits()
        scan, marks = await self._scan()
        self._note_local_skips(scan, report)
        refreshes = 0
        attempted: set[str] = set()  # conflicted keys a pull was already run for
        for _ in range(MAX_ROUNDS):
            conflicted = set(
                delta.conflicted_keys(scan.checksums, state.server_checksums, state.synced)
            )
            if conflicted - attempted:
                # Both sides changed these keys since the last sync: pushing ours would
                # overwrite a teammate's edit. Pull first (server wins, ours saved aside).
                attempted |= conflicted
                scan = await self._pull_during_push(client, scan, report)
                conflicted = set(
                    delta.conflicted_keys(scan.checksums, state.server_checksums, state.synced)
                )
            report.withheld = sorted(conflicted)
            contents = await self._uploadable(scan, report, withhold=conflicted)
            # In a thread: sizing 20,000 entries' JSON held the event loop ~100 ms.
            batches = await asyncio.to_thread(
                plan_batches, contents, max_body=state.max_body or BATCH_MAX_BYTES
            )
            for key in batches.too_large:  # only if the scan's size check raced a write
                self._skip(report, key, Skipped("too_large", checksum(contents[key])))
            if not batches.batches:
                break
            current: list[str] = []
            stream = self._clean_batches(batches.batches, contents, scan.checksums, report)
            try:
                async with contextlib.aclosing(stream):
                    async for batch in stream:
                        current = batch
                        body = {key: contents[key] for key in batch}
                        etag = await client.put(self.repo, body, if_match=state.etag)
                        state.server_at(etag, pushed=True)
                        for key in batch:
                            digest = scan.checksums[key]  # the checksum of body[key]
                            state.server_checksums[key] = digest
                            state.synced[key] = digest
                            state.skipped.pop(key, None)
                            report.pushed.append(key)
                break
            except PreconditionFailed:
                if refreshes >= PRECONDITION_RETRIES:
                    raise Retryable(
                        f"the server's state kept changing (412 {refreshes + 1} times)", 412
                    ) from None
                refreshes += 1
                await self._refresh_hashes(client)
                self._note_in_step(scan)
            except TooManyEntries as exc:
                if state.max_entries is not None and state.max_entries <= exc.max_entries:
                    # Already under what we learned, yet refused: our view of the server's
                    # entries is stale; refresh it before trying again.
                    await self._refresh_hashes(client)
                    self._note_in_step(scan)
                state.max_entries = exc.max_entries
                state.limits_learned_at = self._clock()
            except EntryTooLarge as exc:
                key = exc.key if exc.key in contents else current[0]
                self._skip(
                    report, key, Skipped("too_large", checksum(contents[key]), detail=str(exc))
                )
            except BodyTooLarge as exc:
                if len(current) == 1:
                    key = current[0]
                    self._skip(
                        report, key, Skipped("too_large", checksum(contents[key]), detail=str(exc))
                    )
                else:
                    size = len(encode_put_body({k: contents[k] for k in current}))
                    # The server's stated cap when it gave one, else half (a gateway's page).
                    # The floor only bounds the halving: a cap the server states is its own,
                    # however small (a floor over it made every push a 413, for good).
                    if exc.max_body:
                        state.max_body = min(exc.max_body, size - 1)
                    else:
                        state.max_body = max(MIN_BODY, size // 2)
                    state.limits_learned_at = self._clock()
            except KeyCollision as exc:
                # Pushed again, it would clash again: skipped like a secret, under its reason.
                named = exc.key if exc.key in contents else None
                for blocked in [named] if named is not None else list(current):
                    clash = f" with {exc.other!r}" if exc.other else ""
                    self._skip(
                        report,
                        blocked,
                        Skipped(
                            "key_collision",
                            checksum(contents[blocked]),
                            detail=f"its name clashes{clash} on the server: another client's"
                            " folder could not hold both",
                        ),
                    )
            except SecretRejected as exc:
                named = exc.key if exc.key in contents else None
                for blocked in [named] if named is not None else list(current):
                    self._skip(
                        report,
                        blocked,
                        Skipped(
                            "secret",
                            checksum(contents[blocked]),
                            rule=exc.rule,
                            detail="refused by the server",
                        ),
                    )
        else:
            raise Retryable(f"the push did not settle within {MAX_ROUNDS} rounds")
        state.pending = self._pending_after(scan.checksums, marks)
        if report.withheld:
            log.warning("team push withheld conflicted keys", repo=self.repo, keys=report.withheld)
        report.pull_needed = bool(self._behind(scan.checksums))

    def _behind(self, local: Mapping[str, str]) -> list[str]:
        """Keys a pull would update, minus those refused for good (no pull can write them:
        counted, a folder holding one looked behind for ever) unless their local path has
        been cleared since."""
        state = self.state
        return [
            key
            for key in delta.stale_keys(local, state.server_checksums, state.synced)
            if not _refused_for_good(reason := state.refused_keys.get(key))
            or self._path_cleared(key, reason)
        ]

    async def _uploadable(
        self, scan: LocalScan, report: PushReport, *, withhold: set[str]
    ) -> dict[str, str]:
        """The delta's contents, minus what is known not to go up (a secret or too large for
        this content, over the learned entry limit, a conflict left unresolved). Secrets in
        new content are found batch by batch in `_clean_batches`."""
        state = self.state
        keys = [
            key
            for key in delta.push_delta(scan.checksums, state.server_checksums, state.synced)
            if key not in withhold and not self._known_blocked(key, scan.checksums[key])
        ]
        unread = [key for key in keys if key not in scan.contents]
        if unread:
            fresh = await asyncio.to_thread(lambda: {k: self.folder.read(k) for k in unread})
            for key, content in fresh.items():
                if content is not None:  # None: deleted since the scan
                    scan.contents[key] = content
                    scan.checksums[key] = checksum(content)  # it may have changed too
        if unread:
            # A file that changed since the scan may now conflict: never push it blindly
            # (the next push resolves it; it stays pending).
            late = delta.conflicted_keys(
                {key: scan.checksums[key] for key in unread if key in scan.checksums},
                state.server_checksums,
                state.synced,
            )
            keys = [key for key in keys if key not in late]
            report.withheld = sorted({*report.withheld, *late})
        contents = {key: scan.contents[key] for key in keys if key in scan.contents}
        if state.max_entries is not None:
            # Near the entry limit every slot counts: weed out secrets before admitting.
            hits = await self._scan_secrets(contents, scan.checksums)
            self._skip_secrets(hits, contents, report)
        admission = delta.admit(contents, state.server_checksums, state.max_entries)
        for key in admission.over_limit:
            self._skip(
                report,
                key,
                Skipped(
                    "max_entries",
                    checksum(contents.pop(key)),
                    detail=f"the server holds at most {state.max_entries} entries",
                ),
            )
        return contents

    def _known_blocked(self, key: str, digest: str) -> bool:
        skipped = self.state.skipped.get(key)
        return (
            skipped is not None
            and skipped.checksum == digest
            and skipped.reason in ("secret", "too_large", "key_collision")
        )

    async def _clean_batches(
        self,
        batches: tuple[tuple[str, ...], ...],
        contents: dict[str, str],
        digests: Mapping[str, str],
        report: PushReport,
    ) -> AsyncGenerator[list[str], None]:
        """Each batch without its entries that hold a secret. The scan of the next batch runs
        while the current one is being uploaded, so it costs no wall time: in a thread for a
        small push, in a worker process for a large one (the scan is pure-Python regex work
        that would otherwise hold the GIL against the event loop doing the upload)."""
        total = sum(len(contents[key]) for batch in batches for key in batch)
        executor = None
        if self._scan_pool is not None and total >= self.process_scan_min_bytes:
            executor = self._scan_pool()

        def scan(batch: tuple[str, ...]) -> asyncio.Task[dict[str, tuple[str, str]]]:
            items = {key: contents[key] for key in batch}
            return asyncio.create_task(self._scan_secrets(items, digests, executor))

        # With a worker process every batch is queued at once, so the worker never idles
        # while an upload is in flight; in threads one batch ahead is enough.
        ahead = len(batches) if executor is not None else 1
        scans = [scan(batch) for batch in batches[:ahead]]
        try:
            for index, batch in enumerate(batches):
                hits = await scans[index]
                if len(scans) < len(batches):
                    scans.append(scan(batches[len(scans)]))
                self._skip_secrets(hits, contents, report)
                clean = [key for key in batch if key not in hits]
                if clean:
                    yield clean
        finally:
            pending = [task for task in scans if not task.done()]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def _scan_secrets(
        self, items: dict[str, str], digests: Mapping[str, str], executor: Executor | None = None
    ) -> dict[str, tuple[str, str]]:
        """(rule, description) per key whose name or content has a secret; content results
        are cached by checksum (`digests` holds the checksum of each item's content), keys
        (short) are scanned every time."""
        # Read the cache before any await: scans run concurrently and one may clear it.
        results = {
            key: self._secret_cache[digests[key]]
            for key in items
            if digests[key] in self._secret_cache
        }
        unknown = {k: v for k, v in items.items() if k not in results}
        found: tuple[SecretHits, SecretHits] | None = None
        if executor is not None:
            loop = asyncio.get_running_loop()
            try:
                found = await loop.run_in_executor(
                    executor, scan_entries, self._find_secret, unknown, list(items)
                )
            except Exception as exc:  # a broken pool must not stop the push
                log.warning("secret scan worker failed; scanning in threads", error=str(exc))
                self._scan_pool = None  # and is not tried again by this engine
        if found is None:
            found = await asyncio.to_thread(scan_entries, self._find_secret, unknown, list(items))
        in_keys, in_contents = found
        if unknown:
            if len(self._secret_cache) + len(unknown) > SECRET_CACHE_MAX:
                # Every content ever pushed would stay in a long-running daemon: start over.
                self._secret_cache.clear()
            for key in unknown:
                results[key] = self._secret_cache[digests[key]] = in_contents.get(key)
        results.update(in_keys)  # a secret in the name wins: the entry never goes up
        return {key: hit for key, hit in results.items() if hit is not None}

    def _skip_secrets(
        self, hits: dict[str, tuple[str, str]], contents: dict[str, str], report: PushReport
    ) -> None:
        for key, (rule, description) in hits.items():
            digest = checksum(contents.pop(key))
            self._skip(report, key, Skipped("secret", digest, rule=rule, detail=description))

    def _skip(self, report: PushReport, key: str, skipped: Skipped) -> None:
        previous = self.state.skipped.get(key)
        self.state.skipped[key] = skipped
        # Notify once per (key, content): a blocked file is not re-announced every push.
        if previous is None or (previous.reason, previous.checksum) != (
            skipped.reason,
            skipped.checksum,
        ):
            report.skipped[key] = skipped

    def _note_local_skips(self, scan: LocalScan, report: PushReport) -> None:
        state = self.state
        for key, size in scan.too_large.items():
            self._skip(
                report,
                key,
                Skipped(
                    "too_large",
                    None,
                    detail=f"{size} bytes; at most {self.folder.entry_max} are uploaded",
                ),
            )
        for key, why in scan.invalid.items():
            self._skip(report, key, Skipped("invalid", None, detail=why))
        # Forget skips of files that are gone or fine again.
        for key in list(state.skipped):
            entry = state.skipped[key]
            if entry.reason in ("too_large", "invalid") and entry.checksum is None:
                if key not in scan.too_large and key not in scan.invalid:
                    del state.skipped[key]
            elif key not in scan.checksums:
                del state.skipped[key]

    async def _pull_during_push(
        self, client: TeamClient, scan: LocalScan, report: PushReport
    ) -> LocalScan:
        """The whole server state, applied as a pull would (`_apply`: server wins per key, a
        local edit about to be overwritten is saved aside first); then a fresh scan of the
        folder for the rest of the push."""
        pulled = PullReport()
        await self._pull_into(client, scan, pulled)
        report.pulled.extend(pulled.pulled)
        report.conflicts.extend(pulled.conflicts)
        fresh = await asyncio.to_thread(self.folder.scan)
        self._note_local_skips(fresh, report)
        return fresh

    async def _refresh_hashes(self, client: TeamClient) -> None:
        listing, checksums = await self._listed_whole(
            client,
            lambda: client.fetch_checksums(self.repo),
            lambda first: (first.checksums, first.next, first.etag) if first is not None else None,
        )
        if listing is None:
            self.state.server_at(None)
            self.state.server_checksums = {}
            return
        self.state.server_at(listing.etag)
        self.state.server_checksums = checksums

    def _note_in_step(self, scan: LocalScan) -> None:
        """A file the server already holds as it is here (a teammate made the same edit) is
        synced: left at its old checksum, the next server change took it for an edit of ours
        and saved it aside as a conflict copy."""
        for key, digest in self.state.server_checksums.items():
            if scan.checksums.get(key) == digest:
                self.state.synced[key] = digest

    def _expire_limits(self, server_entries: int | None = None) -> bool:
        """Forget the limits learned from 413s an hour after learning them, and the entry
        limit as soon as the server holds more entries than it (`server_entries`, after a
        pull): an admin may have raised them, and a kept limit withheld every new key for
        good. The next push that is still over a limit learns it again (one 413). True when
        something was forgotten; keys skipped as `max_entries` are pending again then."""
        state = self.state
        if state.max_entries is None and state.max_body is None:
            return False
        learned = state.limits_learned_at
        if learned is None or self._clock() - learned >= LEARNED_LIMITS_TTL:
            state.max_entries = state.max_body = None
        elif server_entries is not None and state.max_entries is not None:
            if server_entries <= state.max_entries:
                return False
            state.max_entries = None
        else:
            return False
        log.info("team sync forgets the server limits it learned", repo=self.repo)
        if state.max_entries is None:
            for key in [k for k, s in state.skipped.items() if s.reason == "max_entries"]:
                del state.skipped[key]
        return True

    def _fingerprint(self) -> tuple[object, ...]:
        """What a push may change without a request (the checksums change only with one)."""
        state = self.state
        return (
            state.etag,
            tuple(state.pending),
            tuple((k, s.reason, s.checksum) for k, s in state.skipped.items()),
            state.max_entries,
            state.max_body,
        )

    async def record_failure(self, op: str, exc: TeamHTTPError) -> None:
        """A failure on the way to `op` outside the engine (TeamSync's question before a
        pull): `last_result` says so, as for the request's own."""
        try:
            async with self._holding(op):
                await self._fail(op, exc)
        except Retryable:  # `_holding`'s (the state file held too long, or the shutdown)
            # Said in team.status all the same; not saved (the other daemon's file).
            self._note_failure(op, exc)

    async def _fail(self, op: str, exc: TeamHTTPError) -> None:
        self._note_failure(op, exc)
        await self._save()

    def _note_failure(self, op: str, exc: TeamHTTPError) -> None:
        permanent = isinstance(exc, Permanent)
        if permanent:
            self.state.suppressed = f"http_{exc.status}" if exc.status else "permanent"
        self._result(op, False, error=str(exc), status=exc.status, permanent=permanent)

    @contextlib.asynccontextmanager
    async def _holding(self, op: str) -> AsyncIterator[None]:
        """The engine's lock, then the state file's (`StateStore.shared`), waited for no
        longer than one request may take, nor past the daemon's shutdown deadline. Unbounded,
        another daemon of this HOME stopped while holding it (Ctrl-Z) held every pull and
        push here for ever, and a `team.push` at shutdown past the folder's 5 s budget. Not
        had in time: Retryable (the backoff retries; `last_result` says why, in memory),
        or Stopping at the shutdown deadline."""
        self._syncing += 1  # `busy` from now: a status does not wait behind it
        try:
            async with self._lock, contextlib.AsyncExitStack() as stack:
                client = self.client
                patience = LOCK_WAIT_S if client is None else client.deadline_s
                end = asyncio.get_running_loop().time() + patience

                def until() -> float:
                    stop = None if client is None else client.stop_at
                    return end if stop is None else min(end, stop)

                try:
                    await stack.enter_async_context(self.store.shared(self.state, until=until))
                except StateHeld as exc:
                    failure = self._held_failure(exc, patience, client)
                    self._note_failure(op, failure)
                    raise failure from exc
                yield
        finally:
            self._syncing -= 1

    @staticmethod
    def _held_failure(exc: StateHeld, patience: float, client: TeamClient | None) -> Retryable:
        stop = None if client is None else client.stop_at
        if stop is not None and asyncio.get_running_loop().time() >= stop:
            return Stopping(
                "the daemon is stopping: the sync state of this folder is held by another "
                "memoryd of this HOME"
            )
        return Retryable(exc.said(patience))

    # -- status ---------------------------------------------------------------------------
    async def refresh_pending(self) -> list[str]:
        """Recompute the pending keys from the folder: from the last status scan while the
        watcher vouches that nothing in the folder changed since it started, else from a new
        scan (a stat per file: 110-340 ms at 10,000 files, which editors polling status paid
        on every call). The state's side (what the server and the last sync hold) is always
        taken as it is now. Never waits on the network: while a pull or push holds the
        engine's lock or waits for it (`busy`), the last pending keys are the answer."""
        # Another status's refresh first (a second editor polling): a scan away at most, and
        # answered from before it, a save it is about to find was not pending yet.
        while self._refreshing is not None and not self.busy:
            await asyncio.shield(self._refreshing)
        if self.busy:
            return list(self.state.pending)
        # No await from this look to the lock's: only another refresh (local) can be ahead.
        async with self._lock:
            # Set once the lock is held: a refresh waiting for a pull or push is no reason for
            # another status to wait.
            done = asyncio.get_running_loop().create_future()
            self._refreshing = done
            try:
                return await self._refresh_pending()
            finally:
                self._refreshing = None
                done.set_result(None)

    async def _refresh_pending(self) -> list[str]:
        """`refresh_pending` with the engine's lock held."""
        # Not waiting on the other daemon's requests (status never waits on the network):
        # while it syncs, the pending keys are computed from the state as last taken up.
        async with self.store.shared(self.state, wait=False):
            token = self.unchanged_since()
            now = asyncio.get_running_loop().time()
            last = self._status_scan
            if (
                token is not None
                and last is not None
                and last[0] == token
                and now - last[3] < self.status_scan_max_age_s
            ):
                checksums, marks = last[1], last[2]
            else:
                scan, marks = await self._scan()
                checksums = scan.checksums
                # Without a token the last one stays: it still holds while the changes the
                # watch had not handed over turn out to be none a scan sees (a swap file).
                if token is not None:
                    self._status_scan = (token, checksums, marks, now)
            self.state.pending = self._pending_after(checksums, marks)
            return list(self.state.pending)

    def _pending(self, local: Mapping[str, str]) -> list[str]:
        """What a push would upload: the delta, minus entries skipped for this very content
        (a secret, too large, over the entry limit) — those are listed under `skipped`."""
        skipped = self.state.skipped
        return [
            key
            for key in delta.push_delta(local, self.state.server_checksums, self.state.synced)
            if key not in skipped or skipped[key].checksum != local[key]
        ]
