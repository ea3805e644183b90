"""One client connection: reads lines (each charged to a budget shared by every connection until
it is parsed), runs each as a task, writes replies as they complete, and notifications that
never wait on the client.

Backpressure: at most MAX_INFLIGHT_PER_CONNECTION requests run at once (each member of a batch
counted; a larger batch runs alone), and nothing more is read
while over WRITE_DRAIN_THRESHOLD bytes of replies wait for the client to read them; a reply
is written only once the queue is back under that threshold (one writer at a time), so a
connection holds at most the threshold plus one reply."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import enum
import math
import time
from typing import TYPE_CHECKING, Any

import structlog

from memoryd.daemon.limits import (
    CLOSE_GRACE_S,
    LINGER_S,
    MAX_INFLIGHT_PER_CONNECTION,
    NOTIFY_BUFFER_CAP,
    READ_CHUNK,
    STALLED_UNDER_PRESSURE_S,
    WRITE_DRAIN_THRESHOLD,
)
from memoryd.daemon.protocol.dispatch import dispatch_message
from memoryd.daemon.protocol.envelope import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    STOPPING,
    check_request,
    error_object,
    request_id,
)
from memoryd.daemon.protocol.framing import ParseFailure, encode, encode_reply, read_message

if TYPE_CHECKING:
    from memoryd.daemon.app import Daemon

log = structlog.get_logger("memoryd.protocol")

# The connection a request arrived on, for methods that act on it (`subscribe`).
current_connection: contextvars.ContextVar[Connection | None] = contextvars.ContextVar(
    "current_connection", default=None
)


def _line_over(limit: int) -> dict[str, Any]:
    return error_object(INVALID_REQUEST, f"request line over the {limit}-byte cap")


_STOPPING_TEXT = (
    "memoryd is stopping: this request was not started; "
    "send it again once memoryd is running (memctl start)"
)


def _stopping_reply(message: Any) -> Any:
    """What a message read whole but not started before the daemon stopped is answered: each
    request gets STOPPING (a batch, one per member), a notification nothing, a line that is
    not JSON its parse error. Silence left the client waiting for a reply until the close."""
    if isinstance(message, ParseFailure):
        return message.reply
    members = message if isinstance(message, list) and message else [message]
    replies = [
        error_object(STOPPING, _STOPPING_TEXT, id_=request_id(member))
        for member in members
        if not (isinstance(member, dict) and "id" not in member and check_request(member) is None)
    ]
    if members is message:
        return replies or None
    return replies[0] if replies else None


def _stalled(seconds: float) -> dict[str, Any]:
    return error_object(
        INVALID_REQUEST,
        f"input refused: an unfinished request line got no byte for {seconds:g} s; "
        "send each line whole (this connection is closed)",
    )


class InputMode(enum.Enum):
    """What a connection does with the lines it reads."""

    START = enum.auto()  # each request is started
    # The daemon is stopping: each request is answered STOPPING, not started (the clients
    # send it again on a new connection), until the connection's close begins (or, for one
    # handed over once the stop began, its late window ends).
    DECLINE = enum.auto()
    DROP = enum.auto()  # read and dropped: the connection is closing, or its input was refused


class InputBudget:
    """Bytes of request lines held for all connections together (unfinished, or whole and not
    yet parsed), capped, and the connections holding an unfinished one."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.used = 0
        self.holders: set[Connection] = set()

    def reclaim(self, size: int, stalled_before: float, *, keep: Connection) -> None:
        """Make room for `size` bytes by closing connections (never `keep`) whose unfinished
        line has had no byte since `stalled_before` (a monotonic time), the longest stalled
        first, giving their bytes back."""
        stalled = [h for h in self.holders if h is not keep and h.last_progress <= stalled_before]
        for holder in sorted(stalled, key=lambda h: h.last_progress):
            if self.used + size <= self.cap:
                return
            holder.drop_stalled_line(time.monotonic() - holder.last_progress)

    def take(self, size: int) -> bool:
        if self.used + size > self.cap:
            return False
        self.used += size
        return True

    def give_back(self, size: int) -> None:
        self.used = max(0, self.used - size)


class Connection:
    """One client connection: reads lines, runs each as a task, writes replies in order of completion."""

    def __init__(
        self,
        daemon: Daemon,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        input_budget: InputBudget | None = None,
        *,
        until: float | None = None,
    ) -> None:
        """`until`: the connection was accepted once the daemon had begun to stop; each
        request it sends is answered STOPPING until then (a loop time: the late window's or
        the drain cap's end), so a client retries it elsewhere instead of seeing the
        connection closed unserved."""
        self.daemon = daemon
        self.input_budget = input_budget or InputBudget(daemon.config.input_buffer_cap)
        self._held = 0  # bytes of an unfinished line charged to `input_budget`
        self.last_progress = time.monotonic()  # when the last bytes were read
        self.reader = reader
        self.writer = writer
        self.subscriptions: frozenset[str] | None = None  # None: not subscribed
        self.tasks: set[asyncio.Task[None]] = set()
        self._weights: dict[asyncio.Task[None], int] = {}  # requests each task runs
        self.requests = 0  # requests running: a batch counts its members
        self.closed = False
        self._mode = InputMode.START if until is None else InputMode.DECLINE
        self._late_until = math.inf if until is None else until  # a late one's window end
        # Clear while a line read whole is neither started nor answered: `close` waits for it,
        # so a line held behind the connection's share when the daemon stops gets its answer.
        self._settled = asyncio.Event()
        self._settled.set()
        self._write_lock = asyncio.Lock()

    def _hold(self, size: int) -> None:
        self._held += size
        self.input_budget.holders.add(self)

    def _release(self) -> None:
        self.input_budget.give_back(self._held)
        self._held = 0
        self.input_budget.holders.discard(self)

    def drop_stalled_line(self, idle: float) -> None:
        """Close a connection whose unfinished line makes no progress: its bytes go back to
        the budget now, the client gets a best-effort error."""
        log.warning("closing a connection whose unfinished line stalled", idle_s=round(idle, 1))
        self.daemon.counters["stalled_line_closed"] += 1
        self._release()
        self._mode = InputMode.DROP
        with contextlib.suppress(ConnectionError, RuntimeError, OSError):
            self.writer.write(encode(_stalled(round(idle, 1))))
        self.closed = True
        self.daemon.connections.discard(self)
        self.writer.transport.abort()

    def _dropping(self) -> bool:
        # A method, not a comparison in place: the mode changes across the reader's awaits
        # (the stop, a refusal), which a type checker's narrowing does not see.
        return self._mode is InputMode.DROP

    def wants(self, event: str) -> bool:
        subs = self.subscriptions
        return subs is not None and event in subs

    async def serve(self) -> None:
        token = current_connection.set(self)
        loop = asyncio.get_running_loop()
        # A late connection's requests are read until its window ends; then what the client
        # sends goes unanswered.
        late = self._mode is InputMode.DECLINE
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(self._late_until if late else None):
                    await self._read_lines()
        finally:
            self._release()
            current_connection.reset(token)
            self.daemon.last_activity = time.monotonic()
            # A client may send its requests and half-close: answer them before closing.
            if self.tasks:
                await asyncio.gather(*list(self.tasks), return_exceptions=True)
            flush = max(self._late_until - loop.time(), CLOSE_GRACE_S) if late else None
            await self.close(flush)
            self.daemon.last_activity = time.monotonic()  # idle from when it closed

    async def _read_lines(self) -> None:
        """Split the input into lines and start each; an unfinished line is held (charged to
        the shared budget) until its newline comes. Returns on EOF or a refusal."""
        limit = self.daemon.config.line_limit
        partial = bytearray()
        stall = self.daemon.config.stalled_line_s
        while not self.closed:
            try:
                # Only an unfinished line has a deadline: an idle connection may stay open.
                async with asyncio.timeout(stall if self._held else None):
                    chunk = await self.reader.read(READ_CHUNK)
            except TimeoutError:
                self.drop_stalled_line(stall)
                return
            except (ConnectionError, OSError):
                return
            self.last_progress = time.monotonic()
            if not chunk:
                return  # EOF, possibly mid-line: nothing complete to answer
            view = memoryview(chunk)  # slices of it are not copies
            if self._dropping():
                partial.clear()
                continue
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                line: bytes | bytearray
                charged = 0
                if partial:
                    # The line's bytes are handed on as they are, not copied: joined as
                    # `bytes(partial) + tail`, a 50 MiB line was copied twice on the loop.
                    partial += view[start : end + 1]
                    line, partial = partial, bytearray()
                    # Charged until started, though whole (no stalled reader's to drop): it
                    # may wait long for room (a client not reading its replies) or a parse
                    # thread, and uncharged, each of many connections held one at the cap.
                    charged, self._held = self._held, 0
                    self.input_budget.holders.discard(self)
                else:
                    line = chunk[start : end + 1]
                start = end + 1
                self._settled.clear()
                try:
                    if len(line) - 1 > limit:
                        # Dropped now: the refusal lingers up to 32 s (its replies, then the
                        # rest of the input), the line held all the while, uncharged.
                        line = b""
                        self.input_budget.give_back(charged)
                        charged = 0
                        self._settled.set()  # answered now: the linger must not hold a stop
                        await self._refuse(_line_over(limit))
                        return
                    if not line.isspace():  # not `strip()`: a copy of the whole line
                        if self._mode is InputMode.START:
                            try:
                                await self._wait_for_room()
                            except (ConnectionError, OSError):
                                return
                        message = await read_message(line)
                        # The daemon may have begun to stop while the line waited for room or
                        # a parse thread: it was received whole, so it is answered, not dropped.
                        if self._mode is InputMode.START:
                            await self._start(message)
                        else:
                            await self._answer(_stopping_reply(message), message)
                finally:
                    self.input_budget.give_back(charged)
                    self._settled.set()
            rest = len(chunk) - start
            if not rest or self._dropping():
                partial.clear()
                continue
            if len(partial) + rest > limit:
                partial.clear()  # not held while the refusal lingers (as above)
                await self._refuse(_line_over(limit))
                return
            taken = self.input_budget.take(rest)
            if not taken:
                # Lines that stopped coming in must not lock out clients that are sending.
                stalled_before = self.last_progress - STALLED_UNDER_PRESSURE_S
                self.input_budget.reclaim(rest, stalled_before, keep=self)
                taken = self.input_budget.take(rest)
            if not taken:
                cap = self.input_budget.cap
                log.warning("closing a connection over the input buffer cap", cap=cap)
                self.daemon.counters["input_cap_closed"] += 1
                partial.clear()
                await self._refuse(
                    error_object(
                        INVALID_REQUEST,
                        f"input refused: unfinished request lines buffered across connections "
                        f"would go over the {cap}-byte cap; finish each line with a newline "
                        "(this connection is closed)",
                    )
                )
                return
            self._hold(rest)
            partial += view[start:]

    async def _wait_for_room(self) -> None:
        """Read no more while the connection's requests fill its share: too many running, or
        replies queued that the client has not read."""
        await self._wait_for_requests(1)
        if self.writer.transport.get_write_buffer_size() > WRITE_DRAIN_THRESHOLD:
            await self.writer.drain()

    async def _refuse(self, error: dict[str, Any]) -> None:
        """Answer, let the replies to the lines before this one go out (for at most the
        drain cap), then half-close and read and drop what the client is still sending (for
        at most LINGER_S) before the connection closes: closing with unread input resets the
        connection, and the client would never see the answers."""
        self._mode = InputMode.DROP
        self._release()  # the refused line is dropped, not held
        await self.send(error)
        dropping = asyncio.create_task(self._drop_input())
        try:
            if self.tasks:
                await asyncio.wait(set(self.tasks), timeout=self.daemon.config.drain_timeout_s)
            with contextlib.suppress(ConnectionError, OSError, RuntimeError, TimeoutError):
                if self.writer.can_write_eof():
                    self.writer.write_eof()
                await asyncio.wait_for(asyncio.shield(dropping), LINGER_S)
        finally:
            dropping.cancel()
            await asyncio.gather(dropping, return_exceptions=True)

    async def _drop_input(self) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while await self.reader.read(READ_CHUNK):
                pass

    async def _start(self, message: Any) -> None:
        self.daemon.last_activity = time.monotonic()
        name = message.get("method") if isinstance(message, dict) else None
        # Only a known method's name is looked up: any other JSON value there is for
        # dispatch to refuse (a list or object would not even hash).
        spec = self.daemon.methods.get(name) if isinstance(name, str) else None
        if spec is not None and spec.inline:
            await self._handle(message)
            return
        weight = len(message) if isinstance(message, list) and message else 1
        await self._wait_for_requests(weight)
        if self._mode is not InputMode.START:
            # The daemon began to stop while this batch waited for room: its drain does not
            # wait for work started now, which would run against services being closed.
            await self._answer(_stopping_reply(message), message)
            return
        task = asyncio.create_task(self._handle(message))
        self.tasks.add(task)
        self._weights[task] = weight
        self.requests += weight
        self.daemon.inflight.add(task)
        task.add_done_callback(self._forget)

    async def _wait_for_requests(self, weight: int) -> None:
        """Until `weight` more requests fit the connection's share (or nothing else runs)."""
        while self.tasks and self.requests + weight > MAX_INFLIGHT_PER_CONNECTION:
            await asyncio.wait(set(self.tasks), return_when=asyncio.FIRST_COMPLETED)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self.daemon.last_activity = time.monotonic()
        self.tasks.discard(task)
        self.requests -= self._weights.pop(task, 0)
        self.daemon.inflight.discard(task)

    async def _handle(self, message: Any) -> None:
        await self._answer(await dispatch_message(message, self.daemon), message)

    async def _answer(self, reply: Any, message: Any) -> None:
        """Write `message`'s reply (None: nothing), kept under the reply cap."""
        if reply is None:
            return
        try:
            data, over = encode_reply(reply, message, self.daemon.config.reply_limit)
        except Exception:  # a reply that cannot be sent still gets an answer
            method = message.get("method") if isinstance(message, dict) else None
            log.exception("reply could not be encoded", method=method)
            text = f"internal error in {method}: its reply could not be encoded (details are in the daemon's log)"
            data, over = encode(error_object(INTERNAL_ERROR, text, id_=request_id(message))), 0
        if over:
            log.warning("reply over the cap", replies=over, cap=self.daemon.config.reply_limit)
            self.daemon.counters["reply_over_cap"] += over
        await self._write(data)

    async def send(self, payload: Any) -> None:
        await self._write(encode(payload))

    async def _write(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            # Wait for the client to read before queueing more, not after: every task that
            # finishes writes, and checking afterwards let each add its reply first.
            async with self._write_lock:
                if self.writer.transport.get_write_buffer_size() > WRITE_DRAIN_THRESHOLD:
                    await self.writer.drain()
                if not self.closed:
                    self.writer.write(data)
        except (ConnectionError, RuntimeError, OSError):
            self.closed = True

    def stop_reading(self) -> None:
        """Start no more requests; replies in flight still go out. Each request the client
        sends from now on is answered STOPPING until the close begins (then read and
        dropped): dropped at once, a client's next request on its open connection got only
        the close, which the clients take for a lost daemon and do not send again. The input
        is read either way: not reading it would block the client's writes, and feeding the
        reader EOF broke the connection at its next byte (asyncio asserts no data comes after
        EOF), losing those replies."""
        if self._mode is InputMode.START:
            self._mode = InputMode.DECLINE

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """Never waits on the client: one subscriber that stops reading must not hold up
        notifications to the others (or the worker that sent them). Past the cap its
        connection is closed."""
        if self.closed:
            return
        try:
            self.writer.write(encode({"jsonrpc": "2.0", "method": method, "params": params}))
        except (ConnectionError, RuntimeError, OSError):
            self.closed = True
            return
        # Replies hold up to the drain threshold plus one reply (each waits for the buffer to
        # be under the threshold): only what is queued beyond is notifications not read.
        # Counting the replies aborted a client that was reading a large one (all lost).
        cap = NOTIFY_BUFFER_CAP + WRITE_DRAIN_THRESHOLD + self.daemon.config.reply_limit
        if self.writer.transport.get_write_buffer_size() > cap:
            log.warning("closing a subscriber that stopped reading", buffered=cap)
            self.daemon.counters["slow_subscriber_closed"] += 1
            # Abort, not close: a graceful close would wait for the client to read it all.
            self.closed = True
            self.daemon.connections.discard(self)
            self.writer.transport.abort()

    async def close(self, flush_within: float | None = None) -> None:
        """Close once a line read whole is answered and what is queued has been sent; past
        `flush_within` seconds (a client that does not read) drop it and abort."""
        if self.closed and self.writer.is_closing():
            return
        deadline = (
            None if flush_within is None else asyncio.get_running_loop().time() + flush_within
        )
        # No chunk read from now on is answered (the lines of the one being answered are: read
        # before), or a client sending requests as fast as it gets their STOPPING answers
        # kept `_settled` cleared until the deadline.
        self._mode = InputMode.DROP
        self._release()
        # A line read before the daemon stopped is answered first (see `_settled`). Until it
        # stays set: the reader sets it after one line of its chunk and clears it for the next
        # before this wakes, and a close gone on then dropped the next line's answer.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout_at(deadline):
                while not self._settled.is_set():
                    await self._settled.wait()
        self.closed = True
        self.daemon.connections.discard(self)
        self.writer.close()
        try:
            async with asyncio.timeout_at(deadline):
                await self.writer.wait_closed()
        except TimeoutError:
            log.warning(
                "aborting a connection that does not read its replies",
                unsent=self.writer.transport.get_write_buffer_size(),
            )
            self.writer.transport.abort()
        except (ConnectionError, OSError):
            pass
