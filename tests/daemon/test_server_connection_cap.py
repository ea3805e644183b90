"""Connections past what the open-files limit leaves room for (a hard `ulimit -n 64`): the
daemon caps connected clients at the soft limit less FD_RESERVE, and each client past the cap
gets one -32004 line saying so before it is closed. Before, libuv's EMFILE handling closed the
extra clients with no word, and the daemon risked running out of descriptors for its own
files (-32603 for the clients it had accepted)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.daemon.server import FD_RESERVE
from memoryd_client import AsyncClient, Client, RpcError
from tests.daemon.test_env_open_files import _spawn, _status_line, _stop
from tests.daemon.test_lifecycle import wait_healthy

LIMIT = 64
CAP = LIMIT - FD_RESERVE


@pytest.fixture
def held() -> Iterator[contextlib.ExitStack]:
    """Closes the connections a test opens."""
    with contextlib.ExitStack() as stack:
        yield stack


def _connect(sock: Path) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(20)
    conn.connect(str(sock))
    return conn


def _outcome(conn: socket.socket, request_id: int) -> str:
    """'ok', 'busy' (the cap's -32004), or what else came (a bare close, another error)."""
    try:
        reply = _status_line(conn, request_id)
    except (AssertionError, OSError) as exc:
        # The daemon may close before the request goes out: its line is still to be read.
        data = b""
        try:
            while not data.endswith(b"\n") and (chunk := conn.recv(1 << 16)):
                data += chunk
        except OSError:
            pass
        if not data:
            return f"closed ({exc})"
        reply = json.loads(data)
    if "result" in reply:
        return "ok"
    error = reply.get("error")
    assert isinstance(error, dict), reply
    if (
        error.get("code") == -32004
        and reply.get("id") is None
        and f"serving {CAP} clients" in str(error.get("message"))
        and "ulimit -n" in str(error.get("message"))
    ):
        return "busy"
    return json.dumps(reply)[:200]


def test_clients_past_the_cap_are_told_why(short_tmp: Path, held: contextlib.ExitStack) -> None:
    sock = short_tmp / "d.sock"
    proc = _spawn(sock, LIMIT, LIMIT)
    try:
        wait_healthy(sock)
        clients = [held.enter_context(_connect(sock)) for _ in range(100)]
        outcomes = [_outcome(conn, i) for i, conn in enumerate(clients)]
    finally:
        log = _stop(proc)
    counts = {kind: outcomes.count(kind) for kind in set(outcomes)}
    assert set(counts) == {"ok", "busy"}, counts
    assert counts["ok"] >= CAP - 1, counts  # wait_healthy's connection may still be closing
    assert "Traceback" not in log


def test_the_client_library_raises_the_cap_and_gets_in_once_there_is_room(
    short_tmp: Path, held: contextlib.ExitStack
) -> None:
    sock = short_tmp / "d.sock"
    proc = _spawn(sock, LIMIT, LIMIT)
    try:
        wait_healthy(sock)
        clients = []
        for i in range(CAP):  # every place taken, each connection answered
            clients.append(held.enter_context(_connect(sock)))
            assert "result" in _status_line(clients[-1], i)
        with pytest.raises(RpcError) as caught, Client(sock, timeout=10) as client:
            client.call("status")
        assert caught.value.code == -32004
        assert f"serving {CAP} clients" in caught.value.message

        async def async_call() -> object:
            async with AsyncClient(sock, timeout=10) as aclient:
                return await aclient.call("status")

        with pytest.raises(RpcError) as caught:
            asyncio.run(async_call())
        assert caught.value.code == -32004

        clients.pop().close()
        wait_healthy(sock)  # a place freed is taken by the next client
    finally:
        _stop(proc)
