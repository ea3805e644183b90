"""A folder, regular file or FIFO where the socket should be (a mistyped --socket or
MEMORYD_SOCKET): connecting to one is ECONNREFUSED, which the client retried for a second as a
daemon restarting (every call, every hook), and memctl said only "not running" (session 21).
Now it is said at once, naming what is there."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

import pytest

from memoryd_client import DaemonUnavailable
from memoryd_client.client import Connector
from tests.clients.conftest import run_memctl


def _make(path: Path, kind: str) -> None:
    if kind == "folder":
        path.mkdir()
    elif kind == "regular file":
        path.write_text("notes\n")
    else:
        os.mkfifo(path)


@pytest.mark.parametrize(
    ("kind", "said"),
    [("folder", "a folder"), ("regular file", "a regular file"), ("fifo", "a FIFO")],
)
def test_what_is_no_socket_is_said_at_the_first_attempt(
    short_tmp: Path, kind: str, said: str
) -> None:
    path = short_tmp / "m.sock"
    _make(path, kind)
    # The first attempt raises: no wait is asked for (a float), as for a daemon restarting.
    with pytest.raises(DaemonUnavailable, match=f"it is {said}, not a socket"):
        Connector(path, budget_s=1.0).attempt()
    for command in ("status", "stop", "recall"):
        done = run_memctl("--socket", str(path), command, *(["q"] if command == "recall" else []))
        assert done.returncode == 3, done.stderr
        assert f"memoryd is not running on {path}: it is {said}, not a socket" in done.stderr


def test_a_connect_that_says_enotsock_names_what_is_there(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Some BSDs answer a connect to a regular file with ENOTSOCK, not ECONNREFUSED: it failed
    # at once but said only the errno, not what is at the path.
    path = short_tmp / "m.sock"
    _make(path, "regular file")

    def refuse(self: socket.socket, address: object) -> None:
        raise OSError(errno.ENOTSOCK, os.strerror(errno.ENOTSOCK))

    monkeypatch.setattr(socket.socket, "connect", refuse)
    with pytest.raises(DaemonUnavailable, match="it is a regular file, not a socket"):
        Connector(path, budget_s=1.0).attempt()
