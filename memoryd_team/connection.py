"""uvicorn's HTTP/1.1 protocol with the two deadlines a server open to many clients needs.

uvicorn (0.55, h11) gives a connection no deadline before its first request and none while
headers arrive (its 5 s keep-alive timer starts only after a reply, and any byte stops it), and
none for a reply the client does not read: the reply waits in the transport's buffer, and even
`close()` waits for it to drain. So a client that connected and said nothing, or sent a header
line every few seconds, or asked for a page and never read it, held a connection (and its
file descriptor and the reply's memory) for as long as it liked; a few thousand of them, and
the server had no descriptor left for anyone. Here:

- the request line and headers must arrive within `header_timeout_s` of the connection opening,
  or of the previous reply being sent (a keep-alive connection waiting for its next request):
  the connection is closed then, with a 503 `header_timeout` when part of a request had come
  (a 503, not a 408: a client stops pushing on any 4xx but 409/429, SPEC.md Layer 4, and a
  laptop that slept mid-request must resume on its own);
- a reply sent before its request's body was read (401, 403, a 413 on Content-Length) leaves
  the client uploading the rest: that may go on while bytes come (`write_timeout_s` at most
  between two, `REPLY_TOTAL_WAITS` times that in all), as a body the app reads may; closed
  at the header deadline instead, a slow client's upload was reset and it never read its 401;
- once a reply stops fitting in the socket buffers, the client must take it: a write that
  stalls for `write_timeout_s`, or a reply that has not drained `REPLY_TOTAL_WAITS` times that
  after it first stalled — or, for a bigger one, at `min_reply_rate` bytes a second — aborts
  the connection. (A flat 120 s cut a client reading an 8 MiB listing steadily at 30 KB/s on
  every pull, for ever.)

The request body has its own deadlines in the app (`app._read_body`, 503 `body_timeout`).
The deadlines are `ServerSettings`' (`protocol_for(settings)`: what uvicorn's `http=` takes).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from typing import Any, cast

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from memoryd_team.settings import (
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_WRITE_TIMEOUT_S,
    REPLY_TOTAL_WAITS,
    ServerSettings,
)

log = logging.getLogger(__name__)


def _header_timeout_reply(seconds: float) -> bytes:
    body = json.dumps(
        {
            "error": "header_timeout",
            "message": f"the request's headers did not arrive within {seconds:g} s",
        }
    ).encode()
    return (
        b"HTTP/1.1 503 Service Unavailable\r\n"
        b"content-type: application/json\r\n"
        b"cache-control: no-store\r\n"
        b"connection: close\r\n"
        b"content-length: %d\r\n\r\n" % len(body)
    ) + body


class DeadlineH11Protocol(H11Protocol):
    """`H11Protocol` plus the header and reply deadlines (the module docstring says why)."""

    # The slowest average a stalled reply may drain at (past the flat deadline): 8 KiB/s.
    min_reply_rate: float = 8 * 1024

    _header_timer: asyncio.TimerHandle | None = None
    _write_timer: asyncio.TimerHandle | None = None
    # When the current reply first stopped fitting in the buffers (loop time), until the
    # next request: the whole reply's deadline counts from there.
    _stalled_since: float | None = None
    _reply_s: float = 0.0  # the whole reply's time from its first stall
    _write_whole: float = 0.0  # and the loop time it ends at
    _buffered: int = 0  # the reply's bytes still buffered here when the write timer was set
    _cycle_seen: object | None = None
    # When a reply was sent while its request's body was still coming (loop time), until
    # that body has all come; and when the last bytes arrived.
    _answered_since: float | None = None
    _last_data: float = 0.0

    def __init__(
        self,
        *args: Any,
        header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S,
        write_timeout_s: float = DEFAULT_WRITE_TIMEOUT_S,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout_s = header_timeout_s
        self.write_timeout_s = write_timeout_s

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._follow_request_state()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        self._cancel_write_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._last_data = self.loop.time()
        super().data_received(data)
        self._follow_request_state()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow_request_state()

    def pause_writing(self) -> None:
        super().pause_writing()
        now = self.loop.time()
        if self._stalled_since is None:
            self._stalled_since = now
            self._reply_s = REPLY_TOTAL_WAITS * self.write_timeout_s
        # What is buffered here now must drain at `min_reply_rate` at least.
        buffered = self.transport.get_write_buffer_size()
        self._reply_s = max(self._reply_s, buffered / self.min_reply_rate)
        self._write_whole = self._stalled_since + self._reply_s
        self._arm_write_timer(now, buffered)

    def resume_writing(self) -> None:
        self._cancel_write_timer()
        super().resume_writing()

    # -- the header deadline ---------------------------------------------------------------
    def _between_requests(self) -> bool:
        """No request is being served: the connection waits for the next one's headers (or,
        after a reply sent before the body was read, a 401 say, for the rest of that body)."""
        return self.cycle is None or self.cycle.response_complete

    def _follow_request_state(self) -> None:
        """Arm the deadline when the connection starts waiting for a request, drop it when
        one is being served. Bytes arriving do not re-arm it: a drip must not extend it."""
        if self.cycle is not self._cycle_seen:
            # A new request: its reply has not stalled yet.
            self._cycle_seen = self.cycle
            self._stalled_since = None
        if self.transport is None or self.transport.is_closing():
            return
        if not self._between_requests():
            self._cancel_header_timer()
            self._answered_since = None
        elif self.conn.their_state is h11.SEND_BODY:
            # Answered before its body was read: the rest of the body may still come.
            if self._answered_since is None:
                self._cancel_header_timer()
                self._answered_since = self._last_data = self.loop.time()
                self._header_timer = self.loop.call_later(
                    self.write_timeout_s, self._header_timed_out
                )
        elif self._answered_since is not None:
            # That body has all come: from now on, the next request's headers.
            self._answered_since = None
            self._cancel_header_timer()
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._header_timed_out)
        elif self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._header_timed_out)

    def _header_timed_out(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or not self._between_requests():
            return
        if self._answered_since is not None and self.conn.their_state is h11.SEND_BODY:
            now = self.loop.time()
            whole = self._answered_since + REPLY_TOTAL_WAITS * self.write_timeout_s
            if now < whole and now - self._last_data < self.write_timeout_s:
                self._header_timer = self.loop.call_at(
                    min(self._last_data + self.write_timeout_s, whole), self._header_timed_out
                )
                return
            log.info("closed a connection: the rest of an answered request's body stalled")
            self.transport.close()
            return
        started, _ = self.conn.trailing_data
        if started and self.conn.their_state is h11.IDLE:
            # Part of a request came: say why it ends (an idle keep-alive connection is just
            # closed, as uvicorn's own keep-alive timeout does).
            log.info(
                "closed a connection: request headers unfinished after %gs", self.header_timeout_s
            )
            self.transport.write(_header_timeout_reply(self.header_timeout_s))
        self.transport.close()

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    # -- the reply deadline ----------------------------------------------------------------
    def _arm_write_timer(self, now: float, buffered: int) -> None:
        self._cancel_write_timer()
        self._buffered = buffered
        self._write_timer = self.loop.call_at(
            min(now + self.write_timeout_s, self._write_whole), self._write_timed_out
        )

    def _write_timed_out(self) -> None:
        self._write_timer = None
        now = self.loop.time()
        buffered = self.transport.get_write_buffer_size()
        if buffered < self._buffered and now < self._write_whole:
            # Progress (the transport resumes the writer only once the buffer is nearly
            # empty: a stall is no byte taken, not a reply bigger than write_timeout_s's worth).
            self._arm_write_timer(now, buffered)
            return
        log.info(
            "aborted a connection: the client did not read its reply (stalled %gs)",
            self.write_timeout_s,
        )
        # close() would wait for the buffer to drain, which is what never happens.
        self.transport.abort()

    def _cancel_write_timer(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None


def protocol_for(
    settings: ServerSettings, protocol: type[DeadlineH11Protocol] = DeadlineH11Protocol
) -> type[asyncio.Protocol]:
    """uvicorn's `http=` for these settings' deadlines: a partial, which pickles (by the
    class's name) into `serve --workers N`'s processes, where a class made here would not.
    Typed as the class uvicorn's Config names: it only ever calls it."""
    made = functools.partial(
        protocol,
        header_timeout_s=settings.header_timeout_s,
        write_timeout_s=settings.write_timeout_s,
    )
    return cast("type[asyncio.Protocol]", made)
