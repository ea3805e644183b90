"""A request a stopping daemon answers -32006 (read, not started) is sent again once, on a new
connection, by both clients; a subscription is renewed on it, and calls the stopping daemon
started still get their replies on the old connection (docs/clients.md)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd_client import AsyncClient, Client, DaemonUnavailable, RpcError

STOPPING = -32006
WRITE = {"cwd": "/p", "type": "project", "name": "Freeze", "body": "no merges"}


class StoppingDaemon:
    """A daemon on a real Unix socket whose first `stopping` connections stop at their first
    `memory.write`: as memoryd, that request is answered -32006, and so is every later one
    (read whole before the stop began, or sent after it), but for `late` (read once the
    connection's close began), which is dropped; a
    `slow` request read before it gets its reply after it (started, so drained); the connection
    stays open until `end`. Later connections are a daemon started again (or socket activation)
    and serve everything, `slow` once `release`d; with `comes_back` False the stop removes the
    socket instead, so nobody answers there."""

    def __init__(self, path: Path, stopping: int = 1, comes_back: bool = True) -> None:
        self.path = path
        self.stopping = stopping
        self.comes_back = comes_back
        self.received: list[tuple[int, str, Any]] = []  # connection number, method, params
        self._subscribed: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen(16)
        self._open: list[socket.socket] = []
        self._released = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        number = 0
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self._open.append(conn)
            threading.Thread(target=self._serve, args=(conn, number), daemon=True).start()
            number += 1

    def _send(self, conn: socket.socket, message: dict[str, Any]) -> None:
        with self._lock, contextlib.suppress(OSError):
            conn.sendall(json.dumps(message).encode() + b"\n")

    def _serve(self, conn: socket.socket, number: int) -> None:
        stopped = False
        held: list[int] = []
        with conn, conn.makefile("rb") as lines:
            for line in lines:
                request = json.loads(line)
                method, rid = request["method"], request["id"]
                self.received.append((number, method, request.get("params")))
                error = {"code": STOPPING, "message": "memoryd is stopping: not started"}
                if stopped:
                    if method != "late":
                        self._send(conn, {"jsonrpc": "2.0", "id": rid, "error": error})
                    continue
                if method == "slow" and number < self.stopping:
                    held.append(rid)
                elif method == "slow":
                    self._released.wait(10)
                    self._send(conn, {"jsonrpc": "2.0", "id": rid, "result": number})
                elif method == "memory.write" and number < self.stopping:
                    stopped = True
                    if not self.comes_back:
                        self._listener.close()
                        os.unlink(self.path)
                    self._send(conn, {"jsonrpc": "2.0", "id": rid, "error": error})
                    for slow in held:  # started before the stop: answered in the drain
                        self._send(conn, {"jsonrpc": "2.0", "id": slow, "result": number})
                else:
                    if method == "subscribe":
                        self._subscribed.append(conn)
                    self._send(conn, {"jsonrpc": "2.0", "id": rid, "result": number})

    def notify(self) -> None:
        for conn in self._subscribed:
            self._send(conn, {"jsonrpc": "2.0", "method": "memory/saved", "params": {}})

    def release(self) -> None:
        self._released.set()

    def end(self, number: int) -> None:
        """Close connection `number`, as a daemon at the end of its drain."""
        with contextlib.suppress(OSError):
            self._open[number].shutdown(socket.SHUT_RDWR)

    def writes(self) -> list[int]:
        return [number for number, method, _ in self.received if method == "memory.write"]

    def close(self) -> None:
        self._listener.close()
        for conn in self._open:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def daemon_factory(short_tmp: Path) -> Iterator[Any]:
    made: list[StoppingDaemon] = []

    def make(**options: Any) -> StoppingDaemon:
        made.append(StoppingDaemon(short_tmp / "m.sock", **options))
        return made[-1]

    yield make
    for daemon in made:
        daemon.close()


def test_sync_call_answered_stopping_is_sent_again_with_its_subscription(
    daemon_factory: Any,
) -> None:
    daemon = daemon_factory()
    with Client(daemon.path, timeout=10) as conn:
        assert conn.subscribe(["memory/saved"]) == 0
        assert conn.call("memory.write", WRITE) == 1  # before: RpcError -32006
        assert daemon.writes() == [0, 1]
        assert daemon.received[-2:] == [
            (1, "subscribe", {"events": ["memory/saved"]}),
            (1, "memory.write", WRITE),
        ]
        daemon.notify()
        note = conn.poll_notification(10)
        assert note is not None
        assert note["method"] == "memory/saved"


def test_sync_call_is_sent_again_once_only(daemon_factory: Any) -> None:
    daemon = daemon_factory(stopping=2)
    with Client(daemon.path, timeout=10) as conn, pytest.raises(RpcError) as info:
        conn.call("memory.write", WRITE)
    assert info.value.code == STOPPING
    assert daemon.writes() == [0, 1]


def test_sync_call_raises_stopping_when_no_daemon_comes_back(daemon_factory: Any) -> None:
    daemon = daemon_factory(comes_back=False)
    with Client(daemon.path, timeout=10) as conn, pytest.raises(RpcError) as info:
        conn.call("memory.write", WRITE)
    assert info.value.code == STOPPING
    assert daemon.writes() == [0]


async def test_async_call_answered_stopping_is_sent_again_and_started_calls_still_answered(
    daemon_factory: Any,
) -> None:
    daemon = daemon_factory()
    async with AsyncClient(daemon.path, timeout=10) as conn:
        assert await conn.subscribe(["memory/saved"]) == 0
        slow = asyncio.create_task(conn.call("slow"))
        await asyncio.sleep(0.05)  # read before the write, as a request already started
        writes = [conn.call("memory.write", WRITE) for _ in range(2)]
        results = await asyncio.wait_for(asyncio.gather(slow, *writes), 10)
        # The slow call's reply came on the stopping daemon's connection; both writes (the
        # second sent before the first's answer, so dropped or refused there) on one new one.
        assert results[0] == 0
        assert results[1:] == [1, 1]
        assert [n for n, method, _ in daemon.received if method == "subscribe"] == [0, 1]
        assert daemon.writes().count(1) == 2
        daemon.notify()
        note = await conn.next_notification(10)
        assert note["method"] == "memory/saved"
        assert await conn.status() == 1  # later calls go on the new connection
        # The stopping daemon's connection ending fails nothing of the new one's.
        held = asyncio.create_task(conn.call("slow"))
        await asyncio.sleep(0.05)
        daemon.end(0)
        await asyncio.sleep(0.1)
        assert not held.done()
        daemon.release()
        assert await asyncio.wait_for(held, 10) == 1


async def test_async_call_sent_after_the_stop_is_not_sent_again(daemon_factory: Any) -> None:
    """A request the stopping daemon dropped (read once its connection's close began) may not
    be one: it fails with the connection's end, as before; the daemon never says it was not
    started."""
    daemon = daemon_factory()
    async with AsyncClient(daemon.path, timeout=10) as conn:
        write = asyncio.create_task(conn.call("memory.write", WRITE))
        late = asyncio.create_task(conn.call("late"))
        assert await asyncio.wait_for(write, 10) == 1
        daemon.end(0)
        with pytest.raises(DaemonUnavailable):
            await asyncio.wait_for(late, 10)
    assert [method for n, method, _ in daemon.received if n == 1] == ["memory.write"]


async def test_async_call_is_sent_again_once_only(daemon_factory: Any) -> None:
    daemon = daemon_factory(stopping=2)
    async with AsyncClient(daemon.path, timeout=10) as conn:
        with pytest.raises(RpcError) as info:
            await conn.call("memory.write", WRITE)
    assert info.value.code == STOPPING
    assert daemon.writes() == [0, 1]


async def test_async_call_raises_stopping_when_no_daemon_comes_back(daemon_factory: Any) -> None:
    daemon = daemon_factory(comes_back=False)
    async with AsyncClient(daemon.path, timeout=10) as conn:
        with pytest.raises(RpcError) as info:
            await conn.call("memory.write", WRITE)
    assert info.value.code == STOPPING
    assert daemon.writes() == [0]
