"""The HTTP side of team sync: one httpx.AsyncClient per server, outcomes mapped to exceptions.

    TeamHTTPError                     any failure talking to the server
    ├── Retryable                     network error, timeout, 5xx, 409, 429, a malformed reply
    │   │                             (`retry_after`: the seconds a Retry-After asked for)
    │   └── Stopping                  cut short at the daemon's shutdown (`TeamClient.stop_by`)
    └── Permanent                     any other 4xx (401, 403, 400 …): stop until told otherwise
        ├── PreconditionFailed        412: the If-Match ETag is stale
        ├── TooManyEntries            413 {"error": "too_many_entries", "max_entries": N}
        ├── BodyTooLarge              413 otherwise — also the HTML page of a gateway
        ├── EntryTooLarge             413 {"error": "entry_too_large", "key": …}
        ├── SecretRejected            422: the server's scan found a secret (key and rule named)
        ├── KeyCollision              422 key_collision: a new key clashes with one the server
        │                             holds (`Notes.md` beside `notes.md`, `a` beside `a/b.md`)
        └── PagingUnsupported         400 invalid_view to view=page: a server from before paging

412, 413 and 422 are Permanent for the request but handled by the engine (refresh, shrink,
skip); only the others suppress pushing. Foreign errors are mapped here with `raise … from`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from memoryd import __version__, jsonread
from memoryd.core.model_config import REDACTED, shown_url
from memoryd.team.protocol import TEAM_MEMORY_PATH, encode_put_body, usable_etag

if TYPE_CHECKING:
    import httpx


class TeamHTTPError(Exception):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Retryable(TeamHTTPError):
    def __init__(
        self, message: str, status: int | None = None, *, retry_after: float | None = None
    ) -> None:
        super().__init__(message, status)
        # Seconds the server asked us to wait (Retry-After on a 429/503), None when it did not.
        self.retry_after = retry_after


class Stopping(Retryable):
    """The daemon is stopping and the request did not finish by its shutdown deadline: what
    it did not send stays pending, pushed by the next start."""


class Permanent(TeamHTTPError):
    pass


class PreconditionFailed(Permanent):
    pass


class TooManyEntries(Permanent):
    def __init__(self, max_entries: int) -> None:
        super().__init__(f"the server holds at most {max_entries} entries", 413)
        self.max_entries = max_entries


class BodyTooLarge(Permanent):
    def __init__(self, message: str, max_body: int | None) -> None:
        super().__init__(message, 413)
        self.max_body = max_body


class EntryTooLarge(Permanent):
    def __init__(self, key: str, message: str) -> None:
        super().__init__(message, 413)
        self.key = key


class SecretRejected(Permanent):
    def __init__(self, key: str | None, rule: str, message: str) -> None:
        super().__init__(message, 422)
        self.key = key
        self.rule = rule


class KeyCollision(Permanent):
    def __init__(self, key: str | None, other: str | None, message: str) -> None:
        super().__init__(message, 422)
        self.key = key
        self.other = other


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A 200 from GET: the ETag, per-key checksums, and the entries unless only hashes were asked."""

    etag: str | None
    checksums: dict[str, str]
    entries: dict[str, str] | None


class PagingUnsupported(Permanent):
    pass


@dataclass(frozen=True, slots=True)
class Page:
    """A 200 from GET view=page: entries in key order from the asked key, and where the next
    page starts (None after the last)."""

    etag: str | None
    entries: dict[str, str]
    checksums: dict[str, str]
    next: str | None
    # On a first page: where its checksum listing stopped (the rest are read with
    # `fetch_checksums` from there); None when it lists every entry.
    checksums_next: str | None = None


@dataclass(frozen=True, slots=True)
class Checksums:
    """A 200 from GET view=hashes with a bound: checksums in key order from the asked key,
    and the first key left out (None after the last)."""

    etag: str | None
    checksums: dict[str, str]
    next: str | None


@dataclass(frozen=True, slots=True)
class NotModified:
    """A 304: the repo still has the ETag the client named."""

    etag: str | None


# A reply's body is read up to this much (after any content decoding): a server that sends
# without end would otherwise grow the daemon until the OOM killer came. The server's
# unpaged reads stop at 8 MiB (`--full-bytes`), its pages at 2 MiB.
MAX_REPLY_BYTES = 64 * 1024 * 1024
# A 304 to a GET without If-None-Match (a confused proxy): retried like a 5xx.
UNASKED_304 = "the team server answered 304 to an unconditional GET"
# The page size the client asks for (`max_bytes`) is this fraction of the reply cap: 2 MiB of
# contents, which JSON may write six times as long (`\u00XX` escapes), with one entry past it
# and the first page's checksums of every entry, stays well inside the cap. Without it a page
# was as large as the server's `--page-bytes`: an admin who raised it past the cap made every
# pull fail, for good, and the daemon held each such page whole.
PAGE_PER_REPLY = 32


@dataclass(frozen=True, slots=True)
class Reply:
    """A whole HTTP reply, its body read within the size cap and the request's deadline."""

    status_code: int
    headers: httpx.Headers
    content: bytes


class TeamClient:
    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout_s: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        import httpx  # loaded when a project syncs with a team server, not at daemon start

        self.base_url = base_url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers={
                "Authorization": f"Bearer {token}",
                "User-Agent": f"memoryd/{__version__}",
                "Accept": "application/json",
            },
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
            transport=transport,
            follow_redirects=False,
        )
        # httpx's timeouts are per read: a server sending a byte every few seconds would
        # hold a request (and the folder's sync lock) for ever. This bounds the whole of it.
        self.deadline_s = 2 * timeout_s
        self.max_reply_bytes = MAX_REPLY_BYTES
        self.requests = 0  # every request sent, for status and the fault tests
        # At shutdown (`stop_by`): the loop time by which every request ends, and each
        # request in flight's own deadline (its timer is moved to the earlier of the two).
        self._stop_at: float | None = None
        self._in_flight: dict[asyncio.Timeout, float] = {}
        self.cut_short = False  # a request was ended by the shutdown deadline

    def stop_by(self, when: float) -> None:
        """The daemon is stopping: every request, in flight or to come, ends by `when` (the
        running loop's time) with `Stopping`. Called again, it sets a new deadline."""
        self._stop_at = when
        for timer, own in self._in_flight.items():
            timer.reschedule(min(own, when))

    @property
    def stop_at(self) -> float | None:
        """The loop time set by `stop_by`: what waits on this folder's behalf (the state
        file's lock) ends by it too. None until the daemon stops."""
        return self._stop_at

    async def close(self) -> None:
        await self._http.aclose()

    async def fetch(
        self, repo: str, *, if_none_match: str | None = None
    ) -> Snapshot | NotModified | None:
        """GET: a Snapshot, NotModified on 304, None when the repo has no entries (404)."""
        response = await self._get({"repo": repo}, if_none_match)
        if response is None or isinstance(response, NotModified):
            return response
        if response.status_code != 200:
            raise _failure(response)
        body = _json_object(response)
        checksums = _str_map(body.get("entryChecksums", {}), "entryChecksums")
        entries = _str_map(body.get("entries", {}), "entries")
        return Snapshot(_etag(response), checksums, entries)

    async def fetch_checksums(
        self, repo: str, *, start: str | None = None, if_match: str | None = None
    ) -> Checksums | None:
        """GET view=hashes with a bound (`max_bytes`, as for a page): checksums with key >=
        `start`, `next` where the server stopped; a server from before paged checksums
        sends them all (no `next`). With `if_match`, PreconditionFailed (412) once the
        repository is no longer at that state. None when the repo has no entries (404)."""
        params = {"repo": repo, "view": "hashes", "max_bytes": str(self._page_bytes())}
        if start is not None:
            params["from"] = start
        response = await self._get(params, None, if_match=if_match)
        if isinstance(response, NotModified):
            # Nothing asked for one (a confused proxy): retried like a 5xx.
            raise Retryable(UNASKED_304, 304)
        if response is None:
            return None
        if response.status_code != 200:
            raise _failure(response)
        body = _json_object(response)
        return Checksums(
            _etag(response),
            _str_map(body.get("entryChecksums", {}), "entryChecksums"),
            _cursor(body, "next"),
        )

    def _page_bytes(self) -> int:
        return max(1, self.max_reply_bytes // PAGE_PER_REPLY)

    async def fetch_page(
        self,
        repo: str,
        *,
        start: str | None = None,
        if_none_match: str | None = None,
        max_bytes: int | None = None,
    ) -> Page | NotModified | None:
        """GET view=page: entries with key >= `start` up to the server's page size or
        `max_bytes` (by default a 32nd of the reply cap: 2 MiB), whichever is smaller; the
        first page (no `start`) carries the checksums of the entries from the first, up to
        as many bytes (`checksums_next` says where they stopped; a server from before that
        bound sends them all). NotModified on 304, None when the repo has no entries (404);
        PagingUnsupported from a server that predates paging."""
        params = {"repo": repo, "view": "page"}
        if max_bytes is None:
            max_bytes = self._page_bytes()
        params["max_bytes"] = str(max_bytes)
        if start is not None:
            params["from"] = start
        else:
            # Unbounded, the first page's checksums passed the reply cap at 60,000 long keys
            # (`--max-entries` raised), and every pull of that repository failed.
            params["checksums_max_bytes"] = str(max_bytes)
        response = await self._get(params, if_none_match)
        if response is None or isinstance(response, NotModified):
            return response
        if response.status_code == 400 and _problem(response).get("error") == "invalid_view":
            raise PagingUnsupported("the team server does not page its reads", 400)
        if response.status_code != 200:
            raise _failure(response)
        body = _json_object(response)
        return Page(
            _etag(response),
            _str_map(body.get("entries", {}), "entries"),
            _str_map(body.get("entryChecksums", {}), "entryChecksums"),
            _cursor(body, "next"),
            _cursor(body, "checksumsNext") if start is None else None,
        )

    async def takes_repo(self, repo: str, *, timeout_s: float | None = None) -> bool:
        """Whether the server serves `repo` to this token: a GitLab subgroup's full path
        (`group/sub/repo`), which a server from before session 20 refuses (400
        `invalid_repo`), as does one whose tokens are bound to `sub/repo` only (403). One
        cheap GET: `If-None-Match: *` is a 304 on one row read (404 while empty), and the
        token and the name are checked before that.

        Only the API's own answers decide: yes is a 304, its checksum listing or its 404
        `not_found`; no is its 403 `forbidden` or 400 `invalid_repo`. Anything else raises,
        never a no (a no is kept for the daemon's run, and the folder then synced with the
        two-part name): Permanent for a refusal of the credentials (401, a proxy's 407) or
        another of the API's refusals; Retryable for 408, 429, 5xx, the network, and any
        reply that is not the API's (a proxy's 403 page, a captive portal's 200).

        `timeout_s` bounds the whole question (a one-row read on the server): a server that
        stalls on it held a `team.push` for the request's deadline, twice."""
        params, headers = {"repo": repo, "view": "hashes"}, {"If-None-Match": "*"}
        response = await self._send("GET", params, headers, None, deadline_s=timeout_s)
        status = response.status_code
        if status == 304:
            return True
        if status == 404:
            # The API's own "no team memory yet" only: any server's 404 (a wrong URL, a proxy
            # between deploys) was a yes, and the folder kept a name an old server refuses.
            if _problem(response).get("error") == "not_found":
                return True
            _raise_if_no_such_path(response)
            raise Retryable("HTTP 404 that is not the team server's answer", 404)
        if status == 200:
            # The API's own listing only: a captive portal's page is no yes (the folder would
            # take a name the server may refuse, and keep it once its state is saved).
            _str_map(_json_object(response).get("entryChecksums"), "entryChecksums")
            return True
        error = _problem(response).get("error")
        if (status, error) in ((403, "forbidden"), (400, "invalid_repo")):
            return False
        if status in (401, 407):
            raise _failure(response)  # the credentials, not the name: asked again once fixed
        if 300 <= status < 400:
            raise _failure(response)  # a Retryable that says where it points
        if status == 408 or error is None:
            # A proxy's timeout, or a reply that is not the API's (a proxy's 403 page): no
            # answer yet, asked again at the next retry.
            raise Retryable(
                f"HTTP {status} that is not the team server's answer to whether it serves {repo}",
                status,
                retry_after=_retry_after(response.headers.get("retry-after")),
            )
        raise _failure(response)

    async def _get(
        self, params: dict[str, str], if_none_match: str | None, *, if_match: str | None = None
    ) -> Reply | NotModified | None:
        """A GET's reply, or NotModified on 304, None on 404 (the repo has no entries)."""
        headers = {"If-None-Match": if_none_match} if if_none_match else {}
        if if_match:
            headers["If-Match"] = if_match
        response = await self._send("GET", params, headers, None)
        if response.status_code == 304:
            return NotModified(_etag(response))
        if response.status_code == 404:
            _raise_if_no_such_path(response)
            return None
        return response

    async def put(self, repo: str, entries: dict[str, str], *, if_match: str | None) -> str | None:
        """PUT an upsert; the new ETag (None when the server sent none). Retryable unless the
        reply is the server's own account of this PUT: `{"etag", "written": [keys],
        "unchanged": n}` covering every entry sent."""
        headers = {"Content-Type": "application/json"}
        if if_match:
            headers["If-Match"] = if_match
        response = await self._send("PUT", {"repo": repo}, headers, encode_put_body(entries))
        if response.status_code != 200:
            raise _failure(response)
        # A 200 from anything else (a captive portal's page, a misrouted proxy) stored
        # nothing: counted as pushed, the keys were marked synced and the next pull
        # reverted the edit, with no conflict copy.
        try:
            body = _json_object(response)
        except Retryable as exc:
            raise Retryable(f"{exc}, in reply to a PUT: nothing counted as pushed", 200) from exc
        if not _accounts_for(body, entries):
            raise Retryable(
                "the team server's reply to a PUT does not account for the entries sent "
                "(written, unchanged): nothing counted as pushed",
                200,
            )
        return _etag(response) or usable_etag(body.get("etag"))

    async def _send(
        self,
        method: str,
        params: dict[str, str],
        headers: dict[str, str],
        body: bytes | None,
        *,
        deadline_s: float | None = None,
    ) -> Reply:
        """One request, whole within `deadline_s` (default `self.deadline_s`)."""
        import httpx

        loop = asyncio.get_running_loop()
        if self._stop_at is not None and loop.time() >= self._stop_at:
            raise Stopping("the daemon is stopping: no request to the team server now")
        self.requests += 1
        try:
            request = self._http.build_request(
                method,
                TEAM_MEMORY_PATH,
                params=params,
                headers=headers,
                content=body,
                # A shorter deadline bounds each of httpx's waits too (its default otherwise).
                timeout=(
                    httpx.Timeout(deadline_s)
                    if deadline_s is not None
                    else httpx.USE_CLIENT_DEFAULT
                ),
            )
        except UnicodeError as exc:
            # A header that cannot be sent (usable_etag keeps tags ASCII; this is the net).
            raise Retryable(f"cannot build the request to the team server: {exc}") from exc
        deadline_s = self.deadline_s if deadline_s is None else deadline_s
        own = loop.time() + deadline_s
        try:
            async with asyncio.timeout_at(own) as timer:
                self._in_flight[timer] = own
                if self._stop_at is not None:
                    timer.reschedule(min(own, self._stop_at))
                try:
                    response = await self._http.send(request, stream=True)
                    try:
                        content = await self._read_capped(response)
                    finally:
                        await response.aclose()
                finally:
                    del self._in_flight[timer]
        except TimeoutError as exc:
            if self._stop_at is not None and self._stop_at < own and loop.time() >= self._stop_at:
                self.cut_short = True
                raise Stopping(
                    "the daemon is stopping: the team server did not answer by its shutdown "
                    "deadline"
                ) from exc
            raise Retryable(f"the team server did not answer within {deadline_s:g} s") from exc
        except httpx.TimeoutException as exc:
            raise Retryable(f"timed out talking to the team server: {exc!r}") from exc
        except httpx.TransportError as exc:
            raise Retryable(f"cannot reach the team server: {exc!r}") from exc
        except httpx.HTTPError as exc:
            raise Retryable(f"team server request failed: {exc!r}") from exc
        return Reply(response.status_code, response.headers, content)

    async def _read_capped(self, response: httpx.Response) -> bytes:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self.max_reply_bytes:
                raise Retryable(
                    f"the team server's reply is over {self.max_reply_bytes:,} bytes; "
                    "not read further",
                    response.status_code,
                )
            chunks.append(chunk)
        return b"".join(chunks)


def _etag(response: Reply) -> str | None:
    """The reply's ETag when it is one the client can send back (`usable_etag`), else None."""
    return usable_etag(response.headers.get("etag"))


def _json_object(response: Reply) -> dict[str, Any]:
    try:
        # Through jsonread: a body nested past json's depth raised RecursionError, no
        # TeamHTTPError, so the pull failed with no retry and nothing in `last_result`. The
        # server's JSON: a whole number is kept as long as Python reads it.
        body = jsonread.loads(response.content, long_ints="keep")
    except ValueError as exc:  # UnicodeDecodeError and jsonread's limits are ValueErrors
        raise Retryable(
            f"the team server sent a reply that is not JSON (HTTP {response.status_code})",
            response.status_code,
        ) from exc
    if not isinstance(body, dict):
        raise Retryable("the team server sent JSON that is not an object", response.status_code)
    return body


def _accounts_for(body: dict[str, Any], entries: dict[str, str]) -> bool:
    """Whether a PUT reply names each entry sent as written or counts it unchanged."""
    written = body.get("written")
    unchanged = body.get("unchanged")
    if not isinstance(written, list) or not all(isinstance(key, str) for key in written):
        return False
    if not isinstance(unchanged, int) or isinstance(unchanged, bool):
        return False
    keys = set(written)
    return (
        len(keys) == len(written)
        and keys <= entries.keys()
        and len(keys) + unchanged == len(entries)
    )


def _cursor(body: dict[str, Any], name: str) -> str | None:
    """A reply's `next`-like field: a key, or null (or absent) after the last."""
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise Retryable(f"the team server sent a malformed {name!r}")
    return value


def _str_map(value: Any, name: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise Retryable(f"the team server sent a malformed {name!r}")
    return dict(value)


def _problem(response: Reply) -> dict[str, Any]:
    """The JSON error body, or {} for anything else (a gateway's HTML page, say)."""
    if "json" not in response.headers.get("content-type", ""):
        return {}
    try:
        return _json_object(response)
    except Retryable:
        return {}


def _raise_if_no_such_path(response: Reply) -> None:
    """A 404 means "no entries yet" only from the team memory API itself. Taken from any
    server, a wrong URL (a path prefix too many, another web server) pulled as an empty
    repository, and nothing said why no teammate's memory ever came."""
    if _problem(response).get("error") == "no_such_path":  # memoryd-team: not this path
        raise Permanent(
            "HTTP 404: the team server serves no team memory at this URL; check the team "
            "server URL (MEMORYD_TEAM_URL)",
            404,
        )
    if "html" in response.headers.get("content-type", ""):
        # A web page, not an API's answer: a wrong URL, or a proxy between deploys.
        raise Retryable(
            "HTTP 404 with a web page, not the team server's answer: is the team server URL "
            "(MEMORYD_TEAM_URL) right?",
            404,
        )


def _failure(response: Reply) -> TeamHTTPError:
    status = response.status_code
    problem = _problem(response)
    message = problem.get("message") if isinstance(problem.get("message"), str) else None
    text = f"HTTP {status}" + (f": {message}" if message else "")
    if 300 <= status < 400:
        text = _redirect_text(status, response.headers.get("location"))
    if status == 412:
        return PreconditionFailed(text, status)
    if status == 413:
        error = problem.get("error")
        max_entries = problem.get("max_entries")
        if (
            error == "too_many_entries"
            and isinstance(max_entries, int)
            and not isinstance(max_entries, bool)
            and max_entries >= 0
        ):
            return TooManyEntries(max_entries)
        key = problem.get("key")
        if error == "entry_too_large" and isinstance(key, str):
            return EntryTooLarge(key, text)
        cap = problem.get("max_body_bytes")
        return BodyTooLarge(text, cap if isinstance(cap, int) and cap > 0 else None)
    if status == 422:
        key = problem.get("key")
        rule = problem.get("rule")
        if problem.get("error") == "key_collision":
            other = problem.get("with")
            return KeyCollision(
                key if isinstance(key, str) else None,
                other if isinstance(other, str) else None,
                text,
            )
        return SecretRejected(
            key if isinstance(key, str) else None,
            rule if isinstance(rule, str) else "unknown",
            text,
        )
    if status in (409, 429) or status >= 500 or status < 400:
        return Retryable(
            text, status, retry_after=_retry_after(response.headers.get("retry-after"))
        )
    return Permanent(text, status)


def _redirect_text(status: int, location: str | None) -> str:
    """A redirect, never followed (the token would go with it to wherever it points): where
    it points, so a server that moved (or an http URL an https one took over) can be fixed.
    "HTTP 301" alone, retried for ever, said neither."""
    where = shown_url(location[:300]) if location else None  # no password or query shown
    return (
        f"HTTP {status}: the team server redirects"
        + (f" to {where}" if where not in (None, REDACTED) else "")
        + " (not followed: the token would go with it); if it moved, set MEMORYD_TEAM_URL "
        "to its new address and restart memoryd"
    )


def _retry_after(value: str | None) -> float | None:
    """Retry-After as seconds from now: delta-seconds or an HTTP-date (RFC 9110 §10.2.3);
    None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value[:12])  # a longer number is as good as for ever; the runner caps it
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
