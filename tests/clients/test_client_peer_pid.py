"""`Client.peer_pid()`: the server's pid as the kernel gives it (SO_PEERCRED, LOCAL_PEERPID),
the one place memctl's lifecycle asks it (it opened a socket of its own for it before)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from memctl import lifecycle
from memoryd_client import Client
from tests.clients.fake_daemon import FakeDaemon


@pytest.mark.skipif(sys.platform not in ("linux", "darwin"), reason="SO_PEERCRED/LOCAL_PEERPID")
def test_the_client_tells_the_servers_pid(fake_daemon: FakeDaemon) -> None:
    with Client(fake_daemon.socket_path, timeout=2.0) as conn:
        assert conn.peer_pid() == os.getpid()  # the fake serves from a thread of this process
    # Not connected yet: it connects to ask.
    fresh = Client(fake_daemon.socket_path, timeout=2.0)
    try:
        assert fresh.peer_pid() == os.getpid()
    finally:
        fresh.close()
    assert lifecycle.listener_pid(fake_daemon.socket_path) == os.getpid()


def test_nobody_listening_is_no_pid(short_tmp: Path) -> None:
    assert lifecycle.listener_pid(short_tmp / "none.sock") is None
