"""The team memory HTTP API (starlette): `make_app(storage, settings)`, separate from the CLI.

    GET /api/claude_code/team_memory?repo=owner/repo[&view=hashes]   200 / 304 / 404 / 413
    GET …?repo=owner/repo&view=page[&from=KEY][&max_bytes=N][&checksums_max_bytes=N]
                                                                     200 / 304 / 404 / 412
    GET …?repo=owner/repo&view=hashes[&from=KEY][&max_bytes=N]        200 / 304 / 404 / 412
    PUT /api/claude_code/team_memory?repo=owner/repo                 200 / 400 / 412 / 413 / 422
    GET /healthz                                                     200 (no auth)

Every refusal is a JSON object `{"error": <code>, "message": …, …}` built in one place
(`make_app`'s problem handler); 401/403 come before anything about the request body is looked at.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from memoryd.team.protocol import TEAM_MEMORY_PATH
from memoryd_team import auth
from memoryd_team.etag import if_none_match_hits, parse_if_match
from memoryd_team.scan import SecretHit, find_secret
from memoryd_team.settings import ServerSettings
from memoryd_team.storage.base import (
    Author,
    IfMatch,
    KeyCollision,
    PreconditionFailed,
    Storage,
    StorageError,
    StorageUnavailable,
    TokenInfo,
    TokenRevoked,
    TooLargeForOneReply,
    TooManyEntries,
    WriteQueueFull,
    WriteQueueTimeout,
)
from memoryd_team.storage.plan import precondition_holds
from memoryd_team.validation import canonical_repo, key_problem, text_problem

log = logging.getLogger(__name__)

_NO_STORE = {"Cache-Control": "no-store"}

# `memoryd-team serve --workers N` hands each worker process its database and settings here.
SERVE_ENV = "MEMORYD_TEAM_SERVE"


# A GET's view, `from`, `max_bytes` and `checksums_max_bytes`: with the repository and its
# ETag, what decides its body.
_Shape = tuple[str, str | None, int | None, int | None]

# What a page GET without If-Match is held to: any state.
_ANY = IfMatch(any=True)

# The whole body's time, in body timeouts: 120 s at the default 30 s, a 2 MiB body at 17 KB/s.
BODY_TOTAL_WAITS = 4


@dataclass(eq=False)
class Problem(Exception):
    """An HTTP refusal; turned into a JSON response by `make_app`'s problem handler only."""

    status: int
    error: str
    message: str
    extra: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


# Writes refused for a full or slow write queue: the first of a reason is logged at once, the
# rest counted in a line at most this often.
REFUSALS_LOG_EVERY_S = 10.0


@dataclass
class _Window:
    opened: float  # monotonic seconds
    more: int = 0  # refusals since, not yet logged


class RefusalLog:
    """The log of writes the write queue refused (`WriteQueueFull`, `WriteQueueTimeout`):
    a line per refusal let a client hammering a full queue flood the log. The first of a
    reason is logged at once; then, per reason and repository, at most one line per
    `every_s` saying how many more were refused, until a window passes with none (the next
    is a first again). Each line names the repository written to: the reason says "this
    repository" (the client's message) or SQLite's one queue, and left an admin to guess.
    `clock` (monotonic seconds) and `later` (`loop.call_later`'s shape: the timer that ends
    a window) are injectable so a test needs no sleeping."""

    def __init__(
        self,
        *,
        every_s: float = REFUSALS_LOG_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        later: Callable[[float, Callable[[], None]], object] | None = None,
    ) -> None:
        self._every_s = every_s
        self._clock = clock
        self._later = later
        self._windows: dict[tuple[str, str], _Window] = {}  # by (reason, repository)

    def refused(self, reason: str, repo: str) -> None:
        self.close_due()  # a timer held up (a busy loop) must not fold two windows in one
        window = self._windows.get((reason, repo))
        if window is not None:
            window.more += 1
            return
        log.warning("write to %s refused: %s", repo, reason)
        self._open((reason, repo))

    def close_due(self) -> None:
        """Ends every window `every_s` old: one line for those with refusals since (and a
        new window for them), none for quiet ones, which end."""
        now = self._clock()
        for (reason, repo), window in list(self._windows.items()):
            if now - window.opened < self._every_s:
                continue
            if not window.more:
                del self._windows[reason, repo]
                continue
            log.warning(
                "write to %s refused %d more %s in the last %.0f s: %s",
                repo,
                window.more,
                "time" if window.more == 1 else "times",
                now - window.opened,
                reason,
            )
            self._open((reason, repo))

    def _open(self, window: tuple[str, str]) -> None:
        self._windows[window] = _Window(self._clock())
        later = self._later or asyncio.get_running_loop().call_later
        later(self._every_s, self.close_due)


def make_app(
    storage: Storage,
    settings: ServerSettings | None = None,
    *,
    refusals: RefusalLog | None = None,
) -> Starlette:
    """The ASGI app; the storage is opened on startup and closed on shutdown (lifespan).
    `refusals`: where refused writes are logged (a test's own clock)."""
    api = _TeamMemoryAPI(storage, settings or ServerSettings())
    said = refusals or RefusalLog()

    async def problem_response(_: Request, exc: Exception) -> Response:
        problem = exc if isinstance(exc, Problem) else _storage_problem(exc, said)
        body = {"error": problem.error, "message": problem.message, **problem.extra}
        headers = {**_NO_STORE, **problem.headers}
        return JSONResponse(body, status_code=problem.status, headers=headers)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        await storage.open()
        try:
            yield
        finally:
            await storage.close()

    return Starlette(
        routes=[
            Route("/healthz", api.health, methods=["GET"]),
            Route(TEAM_MEMORY_PATH, api.team_memory, methods=["GET", "PUT"]),
        ],
        lifespan=lifespan,
        exception_handlers={
            # A wrong path or method: JSON too, so a client can tell it from "no entries yet".
            404: _no_such_route,
            405: _no_such_route,
            Problem: problem_response,
            StorageError: problem_response,
            # A bug still answers in JSON; starlette re-raises it afterwards, so it is logged.
            Exception: _internal_error,
        },
    )


def app_from_environment() -> Starlette:
    """The app of one `serve --workers N` worker process (uvicorn's factory)."""
    from memoryd_team.storage import open_storage

    config = json.loads(os.environ[SERVE_ENV])
    storage = open_storage(config["database"], timeout_s=config.get("database_timeout_s"))
    return make_app(storage, ServerSettings(**config["settings"]))


async def _no_such_route(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 404
    served = f"GET/PUT {TEAM_MEMORY_PATH} and GET /healthz"
    if status == 405:
        body = {
            "error": "method_not_allowed",
            "message": f"{request.method} is not served here; this server serves {served}",
        }
    else:
        body = {"error": "no_such_path", "message": f"this server serves {served} only"}
    headers = dict(exc.headers or {}) if isinstance(exc, HTTPException) else {}
    return JSONResponse(body, status_code=status, headers={**_NO_STORE, **headers})


async def _internal_error(_: Request, exc: Exception) -> Response:
    return JSONResponse(
        {"error": "internal", "message": "internal server error"},
        status_code=500,
        headers=_NO_STORE,
    )


def _unauthorized() -> Problem:
    return Problem(
        401,
        "unauthorized",
        "a valid bearer token is required (memoryd-team token create)",
        headers={"WWW-Authenticate": 'Bearer realm="memoryd-team"'},
    )


def _storage_problem(exc: Exception, refusals: RefusalLog) -> Problem:
    if isinstance(exc, TokenRevoked):
        # Revoked while its body arrived: refused as if it had been revoked before (nothing
        # written), so a revoke is never followed by a write of that token.
        return _unauthorized()
    if isinstance(exc, PreconditionFailed):
        return Problem(
            412,
            "precondition_failed",
            "the repository changed since your ETag; fetch the checksums and retry",
            headers={"ETag": exc.current_etag},
        )
    if isinstance(exc, TooLargeForOneReply):
        return Problem(
            413,
            "paging_required",
            f"the repository's entries exceed {exc.max_bytes} bytes: read them with view=page",
            {"max_bytes": exc.max_bytes},
        )
    if isinstance(exc, KeyCollision):
        # 422 with the key, like a secret: clients skip and list that entry and push the rest
        # (`rule` is what they show; a 400 would stop their pushes for good, a 409 be
        # retried for ever).
        return Problem(
            422,
            "key_collision",
            f"{exc.key}: {exc.reason}",
            {"key": exc.key, "with": exc.other, "rule": "key_collision"},
        )
    if isinstance(exc, TooManyEntries):
        return Problem(
            413,
            "too_many_entries",
            f"the repository may hold at most {exc.max_entries} entries",
            {"max_entries": exc.max_entries},
        )
    if isinstance(exc, WriteQueueFull):
        refusals.refused(str(exc), exc.repo)
        # Retried like any 503, after the wait asked for: the queue drains meanwhile.
        return Problem(
            503,
            "storage_unavailable",
            f"{exc}; retry in {exc.retry_after_s} s",
            headers={"Retry-After": str(exc.retry_after_s)},
        )
    if isinstance(exc, WriteQueueTimeout):
        refusals.refused(str(exc), exc.repo)
        # The same code clients retry; a message of its own (nothing of the database in it).
        return Problem(503, "storage_unavailable", f"{exc}; retry later")
    if isinstance(exc, StorageUnavailable):
        log.error("storage unavailable: %s", exc)
        # 503: the client treats it as retryable and backs off.
        return Problem(503, "storage_unavailable", "the server's database is unavailable")
    # StorageRefused among others: the same request would fail again, so no 503.
    log.error("storage error: %s", exc)
    return Problem(500, "storage_error", "the server could not complete the request")


class _TeamMemoryAPI:
    def __init__(self, storage: Storage, settings: ServerSettings) -> None:
        self.storage = storage
        self.settings = settings
        self._replies = ReplyCache(settings.reply_cache_bytes)
        self._reading: dict[tuple[str, str, _Shape], asyncio.Future[tuple[str, bytes]]] = {}

    async def health(self, _: Request) -> Response:
        return JSONResponse({"ok": True})

    async def team_memory(self, request: Request) -> Response:
        token = await self._authenticate(request)
        repo = self._authorized_repo(request, token)
        if request.method == "PUT":
            return await self._put(request, repo, token)
        return await self._get(request, repo)

    async def _authenticate(self, request: Request) -> TokenInfo:
        token = await auth.authenticate(self.storage, request.headers.get("authorization"))
        if token is None:
            raise _unauthorized()
        return token

    def _authorized_repo(self, request: Request, token: TokenInfo) -> str:
        raw = request.query_params.get("repo")
        if raw is None:
            raise Problem(400, "invalid_repo", "the repo query parameter is required")
        repo = canonical_repo(raw)
        if repo is None:
            raise Problem(
                400,
                "invalid_repo",
                "repo must be owner/repo or group/…/repo (2 to 20 [A-Za-z0-9_.-] parts)",
            )
        if repo not in token.repos:
            raise Problem(403, "forbidden", "this token is not bound to that repository")
        return repo

    async def _get(self, request: Request, repo: str) -> Response:
        view = request.query_params.get("view")
        if view not in (None, "hashes", "page"):
            raise Problem(400, "invalid_view", "view must be 'hashes', 'page' or absent")
        page = _PageRequest.of(request, view, self.settings.page_bytes)
        # One row decides a 304, and names the state a reply already built may be served for.
        etag = await self.storage.get_etag(repo)
        if etag is None:
            raise Problem(404, "not_found", "the repository has no team memory yet")
        if_none_match = _list_header(request, "if-none-match")
        if if_none_match is not None and if_none_match_hits(if_none_match, etag):
            return Response(status_code=304, headers={"ETag": etag, **_NO_STORE})
        shape: _Shape = (view or "", None, None, None)
        if page is not None:
            shape = (view or "", page.start, page.max_bytes, page.checksum_bytes)
        etag, body = await self._reply(repo, etag, shape, view, page)
        # Checked against the reply's own state: no extra read, and no race between two.
        if page is not None and not precondition_holds(etag, True, page.if_match or _ANY):
            raise PreconditionFailed(etag)
        return Response(body, media_type="application/json", headers={"ETag": etag, **_NO_STORE})

    async def _reply(
        self, repo: str, etag: str, shape: _Shape, view: str | None, page: _PageRequest | None
    ) -> tuple[str, bytes]:
        """The reply kept for this state and shape, else read (once for all the requests that
        ask for it meanwhile: the teammates pulling a push at once) and kept. A read has a
        snapshot of its own, maybe newer than `etag`: the reply is that state's."""
        kept = self._replies.get(repo, etag, shape)
        if kept is not None:
            return etag, kept
        key = (repo, etag, shape)
        reading = self._reading.get(key)
        if reading is None:
            reading = asyncio.ensure_future(self._read(repo, view, page))
            self._reading[key] = reading
            reading.add_done_callback(lambda done: self._read_done(key, done))
        # Shielded: a requester that goes away does not cancel the read the others wait for.
        etag, body = await asyncio.shield(reading)
        self._replies.put(repo, etag, shape, body)
        return etag, body

    def _read_done(self, key: tuple[str, str, _Shape], done: asyncio.Future[Any]) -> None:
        self._reading.pop(key, None)
        if not done.cancelled():
            done.exception()  # retrieved: every requester may have gone before it failed

    async def _read(
        self, repo: str, view: str | None, page: _PageRequest | None
    ) -> tuple[str, bytes]:
        """The ETag and JSON body of a GET 200, read from one snapshot."""
        body: dict[str, Any]
        if page is not None and view == "hashes":
            # Checksums in key order from `from`, up to `max_bytes` of keys and checksums;
            # `next` names the first key left out (a client that asked for a bounded
            # listing: the whole of it passed a client's reply cap at 60,000 long keys).
            listed = await self.storage.get_checksums(
                repo, start=page.start, max_bytes=page.max_bytes
            )
            if listed is None:
                raise Problem(404, "not_found", "the repository has no team memory yet")
            etag = listed.etag
            body = {"entryChecksums": listed.checksums, "next": listed.next}
        elif page is not None:
            # Entries in key order from `from` (inclusive) until `max_bytes` of keys and
            # contents (the server's page size at most); `next` names the first key of the
            # following page; `entryChecksums` covers the page's entries, or every entry on
            # the first page: a client learns the whole state and the first entries in one
            # request. Asked with `checksums_max_bytes`, the first page's checksums stop
            # there too (and after its own entries), `checksumsNext` naming where the rest
            # (`view=hashes&from=`) starts; without it, as clients before it expect.
            first = page.start is None
            read = await self.storage.get_page(
                repo,
                start=page.start,
                max_bytes=page.max_bytes,
                all_checksums=first,
                checksum_bytes=page.checksum_bytes,
            )
            if read is None:
                raise Problem(404, "not_found", "the repository has no team memory yet")
            etag = read.etag
            body = {"entries": read.entries, "entryChecksums": read.checksums, "next": read.next}
            if first and page.checksum_bytes is not None:
                body["checksumsNext"] = read.checksums_next
        else:
            state = await self.storage.get_state(
                repo, with_content=view is None, max_content_bytes=self.settings.full_bytes
            )
            if state is None:
                raise Problem(404, "not_found", "the repository has no team memory yet")
            etag = state.etag
            body = {"entryChecksums": state.checksums}
            if state.entries is not None:
                body = {"entries": state.entries, **body}
        # As JSONResponse renders it.
        text = json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return etag, text.encode("utf-8")

    async def _put(self, request: Request, repo: str, token: TokenInfo) -> Response:
        body = await self._read_body(request)
        entries = self._parse_entries(body)
        if self.settings.secret_scan and entries:
            hit = await run_in_threadpool(find_secret, entries)
            if hit is not None:
                raise _secret_problem(repo, hit)
        result = await self.storage.put_entries(
            repo,
            entries,
            parse_if_match(_list_header(request, "if-match")),
            max_entries=self.settings.max_entries,
            author=Author(token.id, token.name),
            at=datetime.now(UTC),
            check_token=True,
        )
        if result.written:
            log.info("%s: %d written by %s", repo, len(result.written), token.id)
        return JSONResponse(
            {
                "etag": result.etag,
                "written": list(result.written),
                "unchanged": len(result.unchanged),
            },
            headers={"ETag": result.etag, **_NO_STORE},
        )

    async def _read_body(self, request: Request) -> bytes:
        cap = self.settings.max_body_bytes
        too_large = Problem(
            413, "body_too_large", f"the body exceeds {cap} bytes", {"max_body_bytes": cap}
        )
        declared = request.headers.get("content-length")
        if (
            declared is not None
            and declared.isascii()
            and declared.isdigit()
            and int(declared) > cap
        ):
            raise too_large
        chunks: list[bytes] = []
        size = 0
        # Read at most cap + 1 bytes, whatever Content-Length said (or did not say). Each wait
        # for more is bounded, or a client that stalled mid-body held its connection for ever;
        # so is the whole body, or one that sent a byte every 29 s did.
        wait = self.settings.body_timeout_s
        whole = BODY_TOTAL_WAITS * wait
        deadline = asyncio.get_running_loop().time() + whole
        while True:
            left = deadline - asyncio.get_running_loop().time()
            try:
                message = await asyncio.wait_for(request.receive(), max(min(wait, left), 0))
            except TimeoutError:
                why = (
                    f"no part of the body arrived for {wait:g} s"
                    if left > wait
                    else f"the body did not arrive within {whole:g} s"
                )
                # 503, not 408: a client stops pushing on any 4xx but 409/429 (SPEC.md Layer 4),
                # and one that slept mid-upload must resume on its own, with its back-off.
                raise Problem(503, "body_timeout", why, headers={"Connection": "close"}) from None
            if message["type"] == "http.disconnect":
                # The client gave up (its timeout) mid-body: nothing is stored, nobody to answer.
                raise Problem(400, "client_disconnected", "the request body was cut off")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > cap:
                raise too_large
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _parse_entries(self, body: bytes) -> dict[str, str]:
        try:
            document = json.loads(body, object_pairs_hook=_unique_names)
        except _DuplicateName as exc:
            raise Problem(
                400, "duplicate_key", f"the body names {exc.name!r:.200} twice in one object"
            ) from exc
        except (ValueError, RecursionError) as exc:
            raise Problem(400, "invalid_json", "the body is not valid JSON") from exc
        if not isinstance(document, dict) or not isinstance(document.get("entries"), dict):
            raise Problem(400, "invalid_body", 'the body must be {"entries": {key: content}}')
        limit = self.settings.max_entries
        if limit is not None and len(document["entries"]) > limit:
            # More keys than the repository may hold can never be stored: refused before each
            # is validated (on the event loop) and scanned for secrets (a 2 MiB body of
            # 150,000 empty entries held the loop 0.4 s and a core 5 s, only to get this 413).
            raise TooManyEntries(limit, len(document["entries"]))
        return _validated_entries(document["entries"], self.settings.max_entry_bytes)


class _DuplicateName(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _unique_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose names are unique. A name given twice (`{"a.md": "x", "a.md": "y"}`)
    was read as its last value, answered 200 `written: ["a.md"]` whichever the sender meant;
    parsers differ on which one wins (RFC 8259 §4), so the body is refused instead."""
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise _DuplicateName(name)
            seen.add(name)
    return document


@dataclass(frozen=True, slots=True)
class _PageRequest:
    """A paged GET's parameters (`view=page`, or `view=hashes` with `from` or `max_bytes`),
    checked before the database is asked anything."""

    start: str | None
    max_bytes: int
    checksum_bytes: int | None  # the first page's checksum listing's bound, if asked
    if_match: IfMatch | None

    @classmethod
    def of(cls, request: Request, view: str | None, page_bytes: int) -> _PageRequest | None:
        """None for an unpaged GET: no view, or `view=hashes` as clients before paged
        checksums send it (every checksum in one reply)."""
        params = request.query_params
        if view is None or (view == "hashes" and not {"from", "max_bytes"} & params.keys()):
            return None
        start = params.get("from")
        if start is not None and text_problem(start) is not None:
            raise Problem(400, "invalid_cursor", "from must be a key (valid UTF-8, no NUL)")
        checksum_bytes = params.get("checksums_max_bytes")
        return cls(
            start,
            _page_size(params.get("max_bytes"), page_bytes),
            None
            if checksum_bytes is None
            else _page_size(checksum_bytes, page_bytes, "checksums_max_bytes"),
            parse_if_match(_list_header(request, "if-match")),
        )


class ReplyCache:
    """GET bodies already encoded, by repository, ETag and request shape (view, from,
    max_bytes), least recently used dropped past `max_bytes` in all.

    An ETag names one state (the hash of every key and checksum), so a body built for it is
    the right reply whenever that ETag is current: nothing to invalidate. After a push every
    teammate pulls the same first page (every checksum and up to 2 MiB of entries): each one
    read and encoded it again, 60-90 ms of a server process's CPU at 10,000 entries; a
    teammate after the first gets the bytes (bench/bench_team_pull.py).

    An entry counts its key too: a page past the last key is a 48-byte body, and its `from`
    may be 16 KB (h11's request head), so bodies alone let 32 MiB hold gigabytes."""

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._bodies: OrderedDict[tuple[str, str, _Shape], bytes] = OrderedDict()
        self._size = 0

    def get(self, repo: str, etag: str, shape: _Shape) -> bytes | None:
        body = self._bodies.get((repo, etag, shape))
        if body is not None:
            self._bodies.move_to_end((repo, etag, shape))
        return body

    def put(self, repo: str, etag: str, shape: _Shape, body: bytes) -> None:
        key = (repo, etag, shape)
        size = _held_bytes(key, body)
        # A body of more than a quarter of the cache would push out most of the others.
        if size > self._max_bytes // 4 or key in self._bodies:
            return
        self._bodies[key] = body
        self._size += size
        while self._size > self._max_bytes:
            self._size -= _held_bytes(*self._bodies.popitem(last=False))


# A kept reply's memory besides its strings' and body's: its slot and node in the OrderedDict,
# the key's two tuples and max_bytes (about 270 bytes on CPython 3.12, rounded up).
_ENTRY_BYTES = 320


def _held_bytes(key: tuple[str, str, _Shape], body: bytes) -> int:
    repo, etag, (view, start, _, _) = key
    strings = (repo, etag, view, start or "")
    return _ENTRY_BYTES + sys.getsizeof(body) + sum(sys.getsizeof(s) for s in strings)


def _list_header(request: Request, name: str) -> str | None:
    """A list header sent as several lines, read as their comma-joined value (RFC 9110 §5.3):
    `If-Match: "a"` + `If-Match: "b"` is `If-Match: "a", "b"`, not its first line alone."""
    lines = [line for line in request.headers.getlist(name) if line.strip()]
    return ", ".join(lines) if lines else None


def _page_size(raw: str | None, page_bytes: int, name: str = "max_bytes") -> int:
    """`max_bytes` (or `name`) capped by the server's page size; any positive integer is one."""
    if raw is None:
        return page_bytes
    # isascii: "²" is a digit to str.isdigit but no number to int()
    if not (raw.isascii() and raw.isdigit()):
        raise Problem(400, "invalid_page_size", f"{name} must be a positive integer")
    digits = raw.lstrip("0")
    if not digits:
        raise Problem(400, "invalid_page_size", f"{name} must be a positive integer")
    # More digits than the page size has is more than the page size; int() is never asked to
    # read thousands of digits (it refuses past 4,300).
    if len(digits) > len(str(page_bytes)):
        return page_bytes
    return min(page_bytes, int(digits))


def _secret_problem(repo: str, hit: SecretHit) -> Problem:
    """422 naming the rule and the entry, never the secret. The key goes back in the body
    only (the client sent it and skips that entry by it), never into the log or the message
    when the key itself is the secret."""
    if hit.in_key:
        log.warning("refused a secret in an entry key of %s (rule %s)", repo, hit.rule)
        message = f"an entry key holds a secret: {hit.description} (rule {hit.rule})"
    else:
        log.warning("refused a secret in %s %s (rule %s)", repo, hit.key, hit.rule)
        message = f"{hit.key} line {hit.line}: {hit.description} (rule {hit.rule})"
    return Problem(
        422,
        "secret_detected",
        message,
        {
            "key": hit.key,
            "rule": hit.rule,
            "line": hit.line,
            "in": "key" if hit.in_key else "content",
        },
    )


def _validated_entries(raw: Mapping[Any, Any], max_entry_bytes: int) -> dict[str, str]:
    entries: dict[str, str] = {}
    for key, content in raw.items():
        problem = key_problem(key)
        if problem is not None:
            # The key is echoed as a (truncated) repr: it may be huge or not even valid UTF-8.
            raise Problem(400, "invalid_key", f"refused key {key!r:.200}: {problem}")
        if not isinstance(content, str):
            raise Problem(400, "invalid_content", f"{key}: content must be a string", {"key": key})
        problem = text_problem(content)
        if problem is not None:
            raise Problem(400, "invalid_content", f"{key}: {problem} in content", {"key": key})
        size = len(content.encode("utf-8"))
        if size > max_entry_bytes:
            raise Problem(
                413,
                "entry_too_large",
                f"{key} is {size} bytes; one entry may be at most {max_entry_bytes}",
                {"key": key, "max_entry_bytes": max_entry_bytes},
            )
        entries[key] = content
    return entries
