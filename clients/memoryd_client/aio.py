"""The asyncio JSON-RPC client: concurrent requests on one connection, notifications queued."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
from pathlib import Path
from typing import Any, cast

from memoryd_client.client import (
    _NOT_SUBSCRIBED,
    CONNECT_RETRY_S,
    STOPPING,
    Connector,
    DaemonUnavailable,
    ProtocolError,
    RpcError,
    _rpc_error,
    _unwrap,
    bad_reply,
    default_socket_path,
    encode_line,
    parse_reply,
    refusal_in,
)
from memoryd_client.methods import AsyncMethods


async def _end(writer: asyncio.StreamWriter | None, task: asyncio.Task[None] | None) -> None:
    """Close a connection and wait for its read loop to end."""
    if writer is not None:
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()
    if task is not None:
        task.cancel()
        # The read loop ends with the connection; its own failures were delivered to callers.
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


def _stopping(reply: Any) -> bool:
    """Whether `reply` is the daemon's STOPPING error: the request was not started."""
    error = reply.get("error") if isinstance(reply, dict) else None
    return isinstance(error, dict) and error.get("code") == STOPPING


class AsyncClient(AsyncMethods):
    """Concurrent requests on one connection, replies matched by id; notifications queued."""

    def __init__(
        self,
        socket_path: Path | str | None = None,
        timeout: float | None = 60.0,
        connect_retry_s: float = CONNECT_RETRY_S,
    ) -> None:
        self.socket_path = Path(socket_path) if socket_path else default_socket_path()
        self.timeout = timeout
        self.connect_retry_s = connect_retry_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._reader_task: asyncio.Task[None] | None = None
        # A second descriptor of the connection's socket until the daemon's first reply: when
        # a send breaks, asyncio closes its own at once, with the line the daemon sent before
        # closing (past its connection cap: -32004, why) still unread in the socket.
        self._spare: socket.socket | None = None
        # The daemon's last error with `"id": null` (a line it could not read, or one over its
        # cap, after which it closes the connection), until a call made after it is answered;
        # and the last id used when it came.
        self._unmatched_error: dict[str, Any] | None = None
        self._unmatched_after = 0
        self._last_id = 0
        self.notifications: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        # Calls that find no connection open one: the lock keeps concurrent ones to one.
        self._connecting = asyncio.Lock()
        # Set when the current connection's read loop ends.
        self._over: asyncio.Event | None = None
        # next_notification's waiters, woken (not handed anything) when a notification is
        # queued or the connection ends: a waiter cancelled then has taken nothing off the queue.
        self._wakeups: set[asyncio.Future[None]] = set()
        # The params of the current connection's last accepted `subscribe`, renewed on the
        # connection a STOPPING retry opens; and the stopping daemon's connection for which
        # no new one could be had (its other calls then raise at once, not a second later each).
        self._subscribed: object = _NOT_SUBSCRIBED
        self._reopen_failed: asyncio.StreamWriter | None = None
        # Stopping daemons' connections still delivering the replies of calls they started,
        # with their read loops, until the daemon closes them (or `close`).
        self._retired: dict[asyncio.StreamWriter, asyncio.Task[None] | None] = {}

    async def connect(self, budget_s: float | None = None) -> AsyncClient:
        """Connect, retrying a busy or restarting daemon for `budget_s` seconds (by default
        `connect_retry_s`, never longer than `timeout`)."""
        if budget_s is None:
            budget_s = min(self.connect_retry_s, self.timeout or 1e9)
        # Our own attempts, not open_unix_connection(path): asyncio takes a full backlog's
        # EAGAIN for "in progress" and hands back a socket that never connected.
        connector = Connector(self.socket_path, budget_s)
        while True:
            step = connector.attempt()
            if not isinstance(step, float):
                break
            await asyncio.sleep(step)  # the daemon is busy or restarting
        self._close_spare()
        try:
            self._spare = step.dup()
        except OSError:  # out of descriptors: only a refusal's reason would be lost
            self._spare = None
        reader, writer = await asyncio.open_unix_connection(sock=step, limit=256 * 1024 * 1024)
        self._reader, self._writer = reader, writer
        self._unmatched_error = None
        self._subscribed = _NOT_SUBSCRIBED
        # Each connection's calls of its own: a stopping daemon's connection, left to deliver
        # the replies of calls it started, must not fail the new connection's when it ends.
        self._pending = {}
        self._over = asyncio.Event()
        self._reader_task = asyncio.create_task(
            self._read_loop(reader, writer, self._over, self._pending)
        )
        return self

    async def __aenter__(self) -> AsyncClient:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _close_spare(self, spare: socket.socket | None = None) -> None:
        """Close `spare` (the current connection's when not given); idempotent."""
        spare = spare if spare is not None else self._spare
        if spare is not None:
            spare.close()
            if self._spare is spare:
                self._spare = None

    async def close(self) -> None:
        """Close the connection, and a stopping daemon's it replaced; the next call connects
        again."""
        self._close_spare()
        writer, task = self._writer, self._reader_task
        self._writer = self._reader = self._reader_task = None
        retired, self._retired = self._retired, {}
        for old_writer, old_task in [(writer, task), *retired.items()]:
            await _end(old_writer, old_task)

    async def _read_loop(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        over: asyncio.Event,
        pending: dict[int, asyncio.Future[Any]],
    ) -> None:
        error: BaseException = DaemonUnavailable("memoryd closed the connection")
        spare = self._spare  # this connection's, whatever a later connect sets
        try:
            while True:
                try:
                    line = await reader.readline()
                except ValueError:  # over the reader's limit
                    raise bad_reply(self.socket_path, "is a line over 256 MiB", b"") from None
                if not line:
                    break
                message = parse_reply(self.socket_path, line)
                for item in message if isinstance(message, list) else [message]:
                    if not isinstance(item, dict):
                        raise bad_reply(self.socket_path, "is not a JSON-RPC object", item)
                    self._deliver(item, pending)
                    if item.get("id") is not None:
                        self._close_spare(spare)  # answered: the daemon took this connection
        except ProtocolError as exc:
            # Every call in flight gets it at once (the one it answered is unknown), rather
            # than a misleading "memoryd closed the connection" or each waiting out its timeout.
            error = exc
        except (ConnectionError, OSError) as exc:
            error = DaemonUnavailable(f"connection to memoryd lost: {exc}")
            if spare is not None and spare.fileno() >= 0 and self._unmatched_error is None:
                error = refusal_in(spare, b"", self.socket_path) or error
        finally:
            self._close_spare(spare)
            over.set()
            self._wake_waiters()
            writer.close()
            self._retired.pop(writer, None)
            if self._writer is writer:
                # The connection is over: the next call connects again (a restarted daemon is
                # reached) instead of writing into a dead socket and failing for ever.
                self._reader = self._writer = None
            current = pending is self._pending
            for future in pending.values():
                if not future.done():
                    # The daemon closes a connection whose line it refused: the calls still
                    # waiting get its reason, not "memoryd closed the connection".
                    refused = self._unmatched_error if current else None
                    future.set_exception(
                        error if refused is None else _rpc_error(refused, self.socket_path)
                    )
            pending.clear()

    def _deliver(self, message: Any, pending: dict[int, asyncio.Future[Any]]) -> None:
        if not isinstance(message, dict):
            return
        if "id" not in message and "method" in message:
            self.notifications.put_nowait(message)
            self._wake_waiters()
            return
        if message.get("error") is not None:
            failure = _rpc_error(message["error"], self.socket_path)
            if isinstance(failure, ProtocolError):
                # An error without an integer code is not memoryd's: like any other garbage it
                # ends the connection (the read loop's end drops it and gives every call in
                # flight this error), as the sync Client drops it.
                raise failure
        if message.get("id") is None and isinstance(message.get("error"), dict):
            # An error the daemon could not tie to a request (-32700 for a line it could not
            # read, -32600 for one over its cap): any call in flight may be the one that sent
            # it, and each would otherwise wait out its timeout. Every one gets the error, as
            # the sync Client raises it.
            if pending is self._pending:
                self._unmatched_error = message["error"]
                self._unmatched_after = self._last_id
            for future in pending.values():
                if not future.done():
                    future.set_exception(_rpc_error(message["error"], self.socket_path))
            return
        answered = message.get("id")
        if (
            pending is self._pending
            and isinstance(answered, int)
            and answered > self._unmatched_after
        ):
            self._unmatched_error = None  # the connection went on: that error was not a refusal
        future = pending.pop(answered, None)  # type: ignore[arg-type]
        if future is not None and not future.done():
            future.set_result(message)

    async def send_raw(self, data: bytes, writer: asyncio.StreamWriter | None = None) -> None:
        """`data` on `writer` (the current connection's when not given)."""
        writer = writer or self._writer
        assert writer is not None, "not connected"
        writer.write(data)
        await writer.drain()

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """One request and its reply. A request the daemon answers STOPPING (read, not
        started, before it began to stop) is sent once more, on a connection opened within
        `connect_retry_s` (a daemon restarting, or a service manager holding the socket);
        when none opens, or the second answer is STOPPING too, it is raised. Other calls
        the stopping daemon started still get their replies on the old connection."""
        if self._writer is None:
            async with self._connecting:
                if self._writer is None:
                    await self.connect()
        reply, writer = await self._call_once(method, params)
        if _stopping(reply) and await self._reopen_after_stop(writer):
            reply, writer = await self._call_once(method, params)
        result = _unwrap(reply, self.socket_path)
        if method == "subscribe" and writer is self._writer:
            self._subscribed = params
        return result

    async def _reopen_after_stop(self, writer: asyncio.StreamWriter) -> bool:
        """A new connection in place of `writer`'s, a stopping daemon's, which serves nothing
        sent on it now (answered STOPPING, or dropped once its close began), with its
        subscription renewed; False when none can be had (the caller then raises the STOPPING
        error, as before)."""
        async with self._connecting:
            if self._writer is not None and self._writer is not writer:
                return True  # another call of the same connection opened one meanwhile
            if self._reopen_failed is writer:
                return False
            subscription = self._subscribed
            if self._writer is writer:
                # Retired, not closed: its read loop still delivers the calls it started.
                self._retired[writer] = self._reader_task
                self._reader = self._writer = self._reader_task = None
            try:
                await self.connect()
                if subscription is not _NOT_SUBSCRIBED:
                    params = cast("dict[str, Any] | None", subscription)
                    reply, _ = await self._call_once("subscribe", params)
                    _unwrap(reply, self.socket_path)
                    self._subscribed = subscription
            except (DaemonUnavailable, RpcError, TimeoutError):
                self._reopen_failed = writer
                new_writer, new_task = self._writer, self._reader_task
                self._writer = self._reader = self._reader_task = None
                await _end(new_writer, new_task)
                return False
            return True

    async def _call_once(
        self, method: str, params: dict[str, Any] | None
    ) -> tuple[Any, asyncio.StreamWriter]:
        """A request's reply message (an error too) and the connection that answered it."""
        writer, pending = self._writer, self._pending
        if writer is None:
            raise DaemonUnavailable("not connected to memoryd (the connection was lost or closed)")
        request_id = self._last_id = next(self._ids)
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            request["params"] = params
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        pending[request_id] = future
        try:
            try:
                await self.send_raw(encode_line(request), writer)
            except (ConnectionError, OSError) as exc:
                # The daemon may have refused the line and closed: its reason, which the
                # read loop delivers as the connection ends, says more than a broken pipe.
                try:
                    reply = await asyncio.wait_for(future, 1.0)
                except TimeoutError:
                    raise DaemonUnavailable(f"connection to memoryd lost: {exc}") from exc
            else:
                try:
                    reply = await asyncio.wait_for(future, self.timeout)
                except TimeoutError:
                    # asyncio's own has no message at all.
                    raise TimeoutError(
                        f"memoryd did not answer {method} within {self.timeout:.3g} s"
                    ) from None
        finally:
            # A timed-out or failed call must not leave its future behind for good.
            pending.pop(request_id, None)
        return reply, writer

    async def next_notification(self, wait_s: float | None = 10.0) -> dict[str, Any]:
        """The next notification, waiting at most `wait_s` seconds (None: no limit);
        DaemonUnavailable once the connection is over and every notification it brought has
        been taken (a waiter with no limit waited for ever when the daemon stopped). A wait
        that is cancelled or times out takes nothing off the queue."""
        return await asyncio.wait_for(self._notification_or_end(), wait_s)

    def _wake_waiters(self) -> None:
        for wakeup in self._wakeups:
            if not wakeup.done():
                wakeup.set_result(None)
        self._wakeups.clear()

    async def _notification_or_end(self) -> dict[str, Any]:
        woken_by_end = False
        while True:
            # Items are taken here only, with no await between the check and the return: a
            # cancel (the caller's, or wait_s running out) lands in the wait below, which holds
            # nothing (before, a task of its own took the item off the queue and a cancel in
            # that tick lost it).
            if not self.notifications.empty():
                return self.notifications.get_nowait()
            over = self._over
            if over is None or over.is_set():
                if woken_by_end:
                    raise DaemonUnavailable("memoryd closed the connection")
                raise DaemonUnavailable(
                    "not connected to memoryd (the connection was lost or closed)"
                )
            wakeup: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._wakeups.add(wakeup)
            try:
                await wakeup
            finally:
                self._wakeups.discard(wakeup)
            woken_by_end = over.is_set()
