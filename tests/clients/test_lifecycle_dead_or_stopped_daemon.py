"""`memctl start` after a daemon was killed and `memctl stop` of a suspended one wait for
nothing that cannot come: the client's connect retry on a socket whose daemon is dead, the
answer to a shutdown request a stopped process cannot read."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import memoryd_client.client as client
from memctl import lifecycle
from memctl.__main__ import main
from tests.clients.conftest import run_memctl
from tests.clients.test_memctl_stop import _real_daemon


def _stale_socket(sock: Path) -> None:
    """A socket file nobody listens on, as a daemon killed by SIGKILL leaves it: it refuses."""
    sock.parent.mkdir(mode=0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock))
    listener.listen()
    listener.close()


def _dead_pid() -> int:
    gone = subprocess.Popen(["true"])
    gone.wait()
    return gone.pid


def _retry_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The pauses the client's connect retry asks for, in order."""
    waits: list[float] = []
    real = client.Connector.attempt

    def attempt(self: client.Connector) -> Any:
        got = real(self)
        if isinstance(got, float):
            waits.append(got)
        return got

    monkeypatch.setattr(client.Connector, "attempt", attempt)
    return waits


def _no_spawn(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    spawned: list[Path] = []

    def spawn(sock: Path, _log: Path, log_fd: int, *_: Any) -> dict[str, Any]:
        os.close(log_fd)
        spawned.append(sock)
        return {"started": True}

    monkeypatch.setattr(lifecycle, "_spawn", spawn)
    return spawned


def test_start_after_a_kill_does_not_retry_the_dead_daemons_socket(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After `kill -9` each of start's two "is one running" checks retried the refusing socket
    # for the client's 1 s: every start after a crash took 2 s more than a first one.
    sock = short_tmp / "run" / "m.sock"
    _stale_socket(sock)
    lifecycle.status_file(sock).write_text(json.dumps({"pid": _dead_pid()}))
    waits, spawned = _retry_waits(monkeypatch), _no_spawn(monkeypatch)
    assert lifecycle.start(sock) == {"started": True}
    assert spawned == [sock]
    assert waits == []


@pytest.mark.parametrize(("platform", "retried"), [("darwin", True), ("linux", False)])
def test_a_launch_agents_crashed_daemon_is_waited_for_as_launchd_restarts_it(
    short_tmp: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, platform: str, retried: bool
) -> None:
    # Found by a review: launchd (KeepAlive) starts a crashed daemon again at once, and it
    # listens about a second later; with no retry `status` said "not running" and `start`
    # spawned a second daemon beside launchd's. Only on macOS: elsewhere the plist (written
    # by `service install --manager launchd`) relaunches nothing, and each waited the retry.
    monkeypatch.setattr(sys, "platform", platform)
    monkeypatch.setenv("HOME", str(tmp_path))
    agents = tmp_path / "Library" / "LaunchAgents"
    agents.mkdir(parents=True)
    (agents / "com.memoryd.daemon.plist").write_text("<plist/>")
    sock = short_tmp / "run" / "m.sock"
    _stale_socket(sock)
    lifecycle.status_file(sock).write_text(json.dumps({"pid": _dead_pid()}))
    assert lifecycle.connect_retry_s(sock) == (client.CONNECT_RETRY_S if retried else 0.0)


def test_start_retries_a_refusing_socket_once_not_again_under_its_lock(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No status file to say the daemon is dead: the first check retries (a daemon restarting,
    # a full backlog on macOS); the one under the start lock does not, as another start
    # releases the lock only once its daemon answers.
    sock = short_tmp / "run" / "m.sock"
    _stale_socket(sock)
    waits, spawned = _retry_waits(monkeypatch), _no_spawn(monkeypatch)
    assert lifecycle.start(sock) == {"started": True}
    assert spawned == [sock]
    assert sum(waits) == pytest.approx(client.CONNECT_RETRY_S)


def test_stop_and_status_after_a_kill_do_not_retry_the_dead_daemons_socket(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each waited the client's 1 s connect retry out before saying "not running".
    sock = short_tmp / "run" / "m.sock"
    _stale_socket(sock)
    lifecycle.status_file(sock).write_text(json.dumps({"pid": _dead_pid()}))
    waits = _retry_waits(monkeypatch)
    assert lifecycle.stop(sock) == {"stopped": False, "pid": None}
    assert main(["--socket", str(sock), "status"]) == 3
    assert "memoryd is not running on" in capsys.readouterr().err
    assert waits == []


def _stop_when_suspended(pid: int) -> None:
    os.kill(pid, signal.SIGSTOP)
    while not lifecycle.suspended(pid):  # stopping every thread takes the kernel a moment
        time.sleep(0.01)


@pytest.mark.parametrize("status_file", [True, False])
def test_stop_of_a_sigstopped_daemon_signals_it_without_asking(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch, status_file: bool
) -> None:
    # It sent the shutdown request and waited the answer's whole timeout (5 s) first.
    sock = short_tmp / "run" / "m.sock"
    asked: list[str] = []
    real = client.Client.call

    def call(self: client.Client, method: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(method)
        return real(self, method, *args, **kwargs)

    with _real_daemon(sock) as pid:
        if not status_file:  # then the socket's listening peer is the pid
            lifecycle.status_file(sock).unlink()
        _stop_when_suspended(pid)
        monkeypatch.setattr(client.Client, "call", call)
        result = lifecycle.stop(sock)
        assert (result["stopped"], result["pid"], result["suspended"]) == (True, pid, True)
        assert asked == []


def test_stop_says_it_signalled_a_suspended_daemon(short_tmp: Path) -> None:
    sock = short_tmp / "run" / "m.sock"
    with _real_daemon(sock) as pid:
        _stop_when_suspended(pid)
        done = run_memctl("--socket", str(sock), "stop")
        assert done.returncode == 0, done.stderr
        assert done.stdout == (
            f"memoryd stopped (pid {pid}): its process was suspended (SIGSTOP, Ctrl-Z or a "
            "tracer) and could not answer a request, so it was sent SIGTERM and SIGCONT\n"
        )
