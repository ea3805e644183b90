"""Connecting while the daemon is busy or restarting (issue 14): a full accept backlog (EAGAIN;
ECONNREFUSED on macOS) or a socket not listening yet is retried briefly with backoff, by the
client library (blocking and asyncio) and by memctl; a missing socket (ENOENT) is not."""

from __future__ import annotations

import contextlib
import errno
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd_client import AsyncClient, Client, DaemonUnavailable
from tests.clients.conftest import run_memctl
from tests.clients.fake_daemon import FakeDaemon


@contextlib.contextmanager
def full_backlog(path: Path) -> Iterator[None]:
    """Connections queued on `path` until the listener's backlog refuses one more."""
    queued: list[socket.socket] = []
    try:
        for _ in range(1_000):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.setblocking(False)
            queued.append(sock)
            code = sock.connect_ex(str(path))
            if code in (errno.EAGAIN, errno.ECONNREFUSED):
                break
            assert code == 0, errno.errorcode.get(code)
        else:
            raise AssertionError("the backlog never filled")
        yield
    finally:
        for sock in queued:
            sock.close()


@pytest.fixture
def busy_daemon(short_tmp: Path) -> Iterator[FakeDaemon]:
    """A daemon that listens but accepts nobody for 0.3 s, its backlog full meanwhile."""
    fake = FakeDaemon(short_tmp / "busy.sock")  # bound and listening; not accepting yet
    with full_backlog(fake.socket_path):
        threading.Timer(0.3, fake.start).start()
        yield fake
    fake.stop()


def test_blocking_client_waits_for_a_full_backlog_to_drain(busy_daemon: FakeDaemon) -> None:
    with Client(busy_daemon.socket_path, timeout=10) as conn:
        assert conn.call("status")["version"] == "fake"


async def test_async_client_waits_for_a_full_backlog_to_drain(busy_daemon: FakeDaemon) -> None:
    async with AsyncClient(busy_daemon.socket_path, timeout=10) as conn:
        assert (await conn.call("status"))["version"] == "fake"


@pytest.mark.parametrize("command", [["status"], ["call", "status"]])
def test_memctl_waits_for_a_full_backlog_to_drain(
    busy_daemon: FakeDaemon, command: list[str]
) -> None:
    result = run_memctl("--socket", str(busy_daemon.socket_path), "--json", *command)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["version"] == "fake"


def test_a_socket_that_starts_listening_soon_is_waited_for(short_tmp: Path) -> None:
    """A daemon restarting: its socket file exists but is not listening yet (ECONNREFUSED)."""
    path = short_tmp / "restarting.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    threading.Timer(0.3, server.listen).start()
    try:
        with Client(path, timeout=10):
            pass
    finally:
        server.close()


def test_retrying_a_refused_connect_is_bounded(short_tmp: Path) -> None:
    path = short_tmp / "stale.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # a stale socket file: every connect is refused
    with pytest.raises(DaemonUnavailable, match="not running"):
        Client(path, connect_retry_s=0.2).connect()
    result = run_memctl("--socket", str(path), "status")
    assert result.returncode == 3
    assert "not running" in result.stderr


def test_a_missing_socket_is_reported_at_once(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No socket file at all: nobody is restarting there, so no retry (memctl stays fast)."""
    import memoryd_client.client

    def no_wait(seconds: float) -> None:  # a retry waits between attempts: none here
        raise AssertionError(f"waited {seconds} s to retry")

    monkeypatch.setattr(memoryd_client.client.time, "sleep", no_wait)
    with pytest.raises(DaemonUnavailable, match="not running"):
        Client(short_tmp / "absent.sock", connect_retry_s=30.0).connect()
