"""A daemon that refuses a connection (past its connection cap: docs/daemon.md) sends one
error line with `id: null` and closes. A client whose request then finds the connection
broken (EPIPE) raises that error, not "connection to memoryd lost: Broken pipe"."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd_client import AsyncClient, Client, RpcError
from tests.conftest import DaemonHandle

BUSY = {
    "jsonrpc": "2.0",
    "error": {"code": -32004, "message": "memoryd is serving 32 clients, all its open-files …"},
    "id": None,
}


@pytest.fixture
def refusing_server(short_tmp: Path) -> Iterator[tuple[Path, threading.Event]]:
    """A socket that answers each connection with BUSY and closes it; the event is set once
    the first connection is closed."""
    path = short_tmp / "d.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    listener.settimeout(0.05)
    closed = threading.Event()
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps(BUSY).encode() + b"\n")
            conn.close()
            closed.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path, closed
    stop.set()
    thread.join(10)
    listener.close()


def _wait_closed(closed: threading.Event) -> None:
    assert closed.wait(10), "the server never closed the connection"
    time.sleep(0.05)  # the close reaches the client's side


def test_sync_client_raises_the_reason_sent_before_the_close(
    refusing_server: tuple[Path, threading.Event],
) -> None:
    path, closed = refusing_server
    client = Client(path, timeout=5).connect()
    _wait_closed(closed)  # the request's send now fails: EPIPE
    with pytest.raises(RpcError) as caught:
        client.call("status")
    assert caught.value.code == -32004
    assert "open-files" in caught.value.message
    # The next call connects again (the daemon may have room by then).
    assert client._sock is None


async def test_async_client_raises_the_reason_sent_before_the_close(
    refusing_server: tuple[Path, threading.Event],
) -> None:
    path, closed = refusing_server
    client = await AsyncClient(path, timeout=5).connect()
    try:
        await asyncio.to_thread(_wait_closed, closed)
        with pytest.raises(RpcError) as caught:
            await client.call("status")
        assert caught.value.code == -32004
        assert "open-files" in caught.value.message
    finally:
        await client.close()


async def test_async_client_connects_when_no_spare_descriptor_is_left(
    daemon: DaemonHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second descriptor is a nicety: out of descriptors (EMFILE), the client still connects
    (and only a refusal's reason would be lost)."""

    def no_descriptor(self: socket.socket) -> socket.socket:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(socket.socket, "dup", no_descriptor)
    async with AsyncClient(daemon.socket_path, timeout=10) as client:
        status = await client.call("status")
    assert status["pid"] == os.getpid()
