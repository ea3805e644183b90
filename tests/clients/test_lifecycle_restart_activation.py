"""`memctl restart` of a socket-activated daemon says it restarted.

Under systemd's memoryd.socket the daemon that `restart` stops is started again by the next
connection, `restart`'s own: the fake daemon plays both, answering `shutdown` and then with
another pid, as the socket's new daemon would.
"""

from __future__ import annotations

from typing import Any

import pytest

from memctl.commands.daemon import start_verb
from tests.clients.conftest import run_memctl
from tests.clients.fake_daemon import FakeDaemon


def test_restart_of_a_socket_activated_daemon_says_it_restarted(fake_daemon: FakeDaemon) -> None:
    # Found by a bug hunt (a real daemon behind a socket activator): restart printed
    # "memoryd already running (pid N)", which reads as if it had done nothing.
    daemon = {"version": "v", "pid": 100}

    def shutdown(_params: dict[str, Any]) -> dict[str, Any]:
        daemon["pid"] = 200  # the next connection's daemon
        return {}

    fake_daemon.on("status", lambda _params: dict(daemon))
    fake_daemon.on("shutdown", shutdown)
    done = run_memctl("--socket", str(fake_daemon.socket_path), "restart")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f"memoryd restarted by its service manager (pid 200) on {fake_daemon.socket_path}\n"
    )
    assert len(fake_daemon.calls("shutdown")) == 1


def test_start_of_a_running_daemon_still_says_already_running(fake_daemon: FakeDaemon) -> None:
    status: dict[str, Any] = {"version": "v", "pid": 100}
    fake_daemon.on("status", status)
    done = run_memctl("--socket", str(fake_daemon.socket_path), "start")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"memoryd already running (pid 100) on {fake_daemon.socket_path}\n"


@pytest.mark.parametrize(
    ("stopped", "verb"),
    [
        ({"stopped": True, "pid": 100}, "restarted by its service manager"),
        # Found by a review: with none running, the socket's new daemon was "restarted".
        ({"stopped": False, "pid": None}, "started by its service manager"),
        (None, "already running"),
    ],
)
def test_what_a_start_found_after_a_restart_stopped_is_said_as_it_was(
    stopped: dict[str, Any] | None, verb: str
) -> None:
    assert start_verb({"started": False, "pid": 200}, stopped) == verb
    assert start_verb({"started": True, "pid": 200}, stopped) == "started"
