"""`memctl stop` says "stopped" only when the daemon's process is gone, and signals no other."""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from memctl import lifecycle
from memctl.commands import daemon
from tests.clients.conftest import memctl_env, run_memctl
from tests.clients.fake_daemon import FakeDaemon, FakeError
from tests.clients.held_daemon import held_daemon
from tests.clients.test_memctl_busy_daemon import WHY, _busy


@contextmanager
def _real_daemon(sock: Path) -> Iterator[int]:
    """A daemon `memctl start` started on `sock`: its pid; killed after, if a test left it."""
    done = run_memctl("--json", "--socket", str(sock), "start")
    assert done.returncode == 0, done.stderr
    pid = json.loads(done.stdout)["pid"]
    try:
        yield pid
    finally:
        if lifecycle.pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_daemon_that_outlives_sigterm_is_not_stopped(fake_daemon: FakeDaemon) -> None:
    # Found by a bug hunt: a hung daemon was sent SIGTERM, kept running, and `memctl stop`
    # printed "memoryd stopped (pid N)" and exited 0.
    fake_daemon.on("shutdown", {"shutting_down": True})  # answers, then does not go
    with held_daemon(fake_daemon, on_term="ignore") as hung:
        result = lifecycle.stop(fake_daemon.socket_path, wait_s=0.2, term_wait_s=0.3)
        assert result["stopped"] is False
        assert result["pid"] == hung.pid
        assert hung.poll() is None


def test_a_busy_daemon_gets_the_whole_wait_after_its_sigterm(fake_daemon: FakeDaemon) -> None:
    # At its connection cap it cannot take the shutdown request, so it got SIGTERM at once and
    # only the 5 s meant for after a SIGTERM that follows the request: one draining for longer
    # (memoryd may take 30 s) was said not to stop, exit 4.
    fake_daemon.on("shutdown", _busy)
    with held_daemon(fake_daemon, on_term="drain", drain_s=1.0) as draining:
        result = lifecycle.stop(fake_daemon.socket_path, wait_s=10.0, term_wait_s=0.2)
        assert result["stopped"] is True
        assert result["pid"] == draining.pid
        assert draining.wait(5) == 0  # it drained and exited of itself


def test_stop_takes_its_wait_from_the_command_line(fake_daemon: FakeDaemon) -> None:
    fake_daemon.on("shutdown", _busy)
    with held_daemon(fake_daemon, on_term="drain", drain_s=1.0) as draining:
        done = run_memctl(
            "--json", "--socket", str(fake_daemon.socket_path), "stop", "--wait", "20"
        )
        assert done.returncode == 0, (done.stdout, done.stderr)
        result = json.loads(done.stdout)
        assert (result["stopped"], result["pid"]) == (True, draining.pid)


@pytest.mark.parametrize("wait", ["-1", "nan", "inf", "soon"])
def test_wait_must_be_a_number_of_seconds(wait: str) -> None:
    done = run_memctl("--socket", "/nonexistent/m.sock", "stop", "--wait", wait)
    assert done.returncode == 2
    assert "is not a number of seconds" in done.stderr


@pytest.mark.parametrize("answer", ["shutting down", "busy"])
def test_a_stale_status_files_pid_is_never_signalled(fake_daemon: FakeDaemon, answer: str) -> None:
    # A daemon answers on the socket (after a reboot, one the socket unit just started), but the
    # status file next to it is from before and names a process of the user that is not the
    # daemon: `stop` waited 30 s for it and sent it SIGTERM (a busy daemon: SIGTERM at once).
    fake_daemon.on("shutdown", {"shutting_down": True} if answer != "busy" else _busy)
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        lifecycle.status_file(fake_daemon.socket_path).write_text(
            json.dumps({"pid": bystander.pid})
        )
        result = lifecycle.stop(fake_daemon.socket_path, wait_s=0.3, term_wait_s=0.3)
        assert bystander.poll() is None  # not signalled
        assert result["pid"] is None
        if answer == "busy":
            assert result == {
                "stopped": False,
                "pid": None,
                "refused": WHY,
                "status_pid": bystander.pid,
            }
            done = run_memctl("--socket", str(fake_daemon.socket_path), "stop")
            assert done.returncode == 1
            assert (
                f"no pid known to stop it (the status file's pid {bystander.pid} is not the "
                "process serving the socket)"
            ) in done.stderr
        else:
            assert result == {"stopped": True, "pid": None}
            done = run_memctl("--socket", str(fake_daemon.socket_path), "stop")
            assert done.returncode == 0, done.stderr
            assert "is stopping (its pid is unknown: not waited for)" in done.stdout
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc tells who holds a socket")
def test_the_last_to_call_listen_is_not_taken_for_the_daemon(fake_daemon: FakeDaemon) -> None:
    # SO_PEERCRED names whoever called listen() last: a socket-activated daemon does so on
    # systemd's socket, and when it died (a crash, its status file left) its pid stayed the
    # socket's peer, another process of the user's by now. `stop` waited for that process and
    # sent it SIGTERM. Here the bystander calls listen() on the fake's socket and lets it go.
    fake_daemon.on("shutdown", {"shutting_down": True})
    listening = fake_daemon._server.fileno()
    script = (
        f"import socket, time\nheld = socket.socket(fileno={listening})\nheld.listen(8)\n"
        "held.close()\nprint('ready', flush=True)\ntime.sleep(60)\n"
    )
    bystander = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, pass_fds=(listening,)
    )
    try:
        assert bystander.stdout is not None
        assert bystander.stdout.readline() == "ready\n"
        assert lifecycle.listener_pid(fake_daemon.socket_path) == bystander.pid
        lifecycle.status_file(fake_daemon.socket_path).write_text(
            json.dumps({"pid": bystander.pid})
        )
        result = lifecycle.stop(fake_daemon.socket_path, wait_s=0.3, term_wait_s=0.3)
        assert bystander.poll() is None  # neither waited for nor signalled
        assert result == {"stopped": True, "pid": None}
        assert fake_daemon.calls("shutdown") == [{}]
    finally:
        bystander.kill()
        bystander.wait()
        if bystander.stdout is not None:
            bystander.stdout.close()


def test_stop_waits_for_the_real_daemon_it_verified(short_tmp: Path) -> None:
    # The daemon listens itself (no socket activation): SO_PEERCRED names it.
    sock = short_tmp / "run" / "m.sock"
    with _real_daemon(sock) as pid:
        result = lifecycle.stop(sock)
        assert result["stopped"] is True
        assert result["pid"] == pid


def test_stop_that_did_not_stop_is_a_timeout(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    sock = tmp_path / "memoryd.sock"
    result = {"stopped": False, "pid": 4242, "waited_s": 35.0}
    waits: list[float] = []

    def stop(_sock: Path, wait_s: float) -> dict[str, Any]:
        waits.append(wait_s)
        return result

    monkeypatch.setattr(lifecycle, "stop", stop)
    args = argparse.Namespace(socket=sock, json=False, wait=12.0)
    assert daemon.run_stop(args) == 4
    err = capsys.readouterr().err
    assert f"memoryd (pid 4242) on {sock} did not stop within 35s, not even after SIGTERM" in err
    assert daemon.run_restart(args) == 4  # no second daemon next to a hung one
    assert waits == [12.0, 12.0]
    monkeypatch.setattr(lifecycle, "stop", lambda _sock, wait_s: {"stopped": False, "pid": None})
    assert daemon.run_stop(args) == 3
    assert "not running" in capsys.readouterr().err


def test_a_zombie_is_not_alive() -> None:
    # A daemon child of the caller that exited but was not reaped yet has stopped.
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 10
        while lifecycle.pid_alive(child.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not lifecycle.pid_alive(child.pid)
    finally:
        child.wait()


def _start_in_background(sock: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "memctl", "--json", "--socket", str(sock), "start"],
        env=memctl_env(),
        stdout=subprocess.PIPE,
        text=True,
    )


def test_two_starts_at_once_start_one_daemon_and_say_so(short_tmp: Path) -> None:
    # Each spawned a daemon and both said "started" (the same pid): the one that lost the
    # socket could still be starting when the other was stopped, and then took its place.
    sock = short_tmp / "run" / "m.sock"
    starts = [_start_in_background(sock) for _ in range(2)]
    results = [json.loads(start.communicate(timeout=60)[0]) for start in starts]
    try:
        assert sorted(r["started"] for r in results) == [False, True]
        assert results[0]["pid"] == results[1]["pid"]
    finally:
        assert lifecycle.stop(sock)["stopped"] is True
    assert lifecycle.query_status(sock) is None


def _start_lock_held(sock: Path) -> bool:
    """Does a `memctl start` hold `sock`'s start lock? (A shared lock is refused then; when
    it is had, it is let go at once.)"""
    try:
        fd = os.open(lifecycle.start_lock(sock), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_stop_while_start_brings_the_daemon_up_stops_it(short_tmp: Path) -> None:
    # `stop` said "not running" (exit 3) of a daemon `start` was still bringing up, which then
    # came up and stayed; it waits for the start, then stops what it started.
    sock = short_tmp / "run" / "m.sock"
    starting = _start_in_background(sock)
    deadline = time.monotonic() + 30
    # Its start lock held: it is spawning the daemon. Its log made was no such sign: start
    # makes it before taking the lock, and a start held up between the two (a loaded
    # machine) let this stop come first, a stop before the start ("not running").
    while not _start_lock_held(sock) and starting.poll() is None:
        assert time.monotonic() < deadline, "memctl start never took its lock"
        time.sleep(0.01)
    stopped = run_memctl("--socket", str(sock), "stop")
    started = json.loads(starting.communicate(timeout=60)[0])
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout == f"memoryd stopped (pid {started['pid']})\n"
    assert lifecycle.query_status(sock) is None


def test_stop_ends_a_daemon_whose_socket_file_was_deleted(short_tmp: Path) -> None:
    # A tmp cleaner (or a user) removed the socket: the daemon still ran, unreachable, and
    # `stop` said "not running" of it. It holds the listening socket bound at that path.
    sock = short_tmp / "run" / "m.sock"
    with _real_daemon(sock) as pid:
        sock.unlink()
        stopped = run_memctl("--json", "--socket", str(sock), "stop")
        assert stopped.returncode == 0, stopped.stderr
        assert json.loads(stopped.stdout)["pid"] == pid
        assert not lifecycle.pid_alive(pid)


def test_stop_ends_a_daemon_stopped_by_sigstop(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-Z on a foreground daemon: its SIGTERM stayed pending, `stop` waited 35 s and said it
    # did not stop. SIGCONT follows the SIGTERM, as systemd sends it.
    sock = short_tmp / "run" / "m.sock"
    with _real_daemon(sock) as pid:
        os.kill(pid, signal.SIGSTOP)
        # Its shutdown request goes unanswered: waited 0.5 s for, not the default 5 s.
        monkeypatch.setenv(lifecycle.ANSWER_TIMEOUT_ENV, "0.5")
        result = lifecycle.stop(sock, wait_s=5.0, term_wait_s=5.0)
        assert (result["stopped"], result["pid"]) == (True, pid)


def test_start_next_to_a_daemon_that_does_not_answer_starts_nothing(
    fake_daemon: FakeDaemon,
) -> None:
    # A hung or SIGSTOPped daemon: `start` took it for absent, spawned a second one, which
    # exited "already serving" 12 s later (exit 3). It says why at once, exit 4 (a timeout).
    fake_daemon.delays["status"] = 8.0
    done = run_memctl(
        "--socket",
        str(fake_daemon.socket_path),
        "start",
        env=memctl_env(MEMORYD_ANSWER_TIMEOUT="0.5"),  # not the default 5 s
    )
    assert done.returncode == 4, (done.stdout, done.stderr)
    assert (
        f"memoryd on {fake_daemon.socket_path} accepts connections but did not answer within "
        "0.5 s (hung, or stopped by SIGSTOP): no second one was started"
    ) in done.stderr
    assert not fake_daemon.socket_path.with_name("memoryd.log").exists()  # nothing spawned


def test_a_daemon_behind_a_stale_status_file_is_waited_for_by_its_own_pid(
    short_tmp: Path,
) -> None:
    # The status file names another process (it was not the daemon's to trust): `stop` asked
    # for the shutdown and returned at once, "its pid unknown", the daemon still draining (a
    # `restart` then started the next one beside it). The daemon says its own pid.
    sock = short_tmp / "run" / "m.sock"
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        with _real_daemon(sock) as pid:
            lifecycle.status_file(sock).write_text(json.dumps({"pid": bystander.pid}))
            result = lifecycle.stop(sock)
            assert (result["stopped"], result["pid"]) == (True, pid)
            assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


@pytest.mark.parametrize("status_file", [True, False])
def test_status_of_a_sigstopped_daemon_says_it_is_stopped(
    short_tmp: Path, status_file: bool
) -> None:
    # It said only "memoryd did not answer within 5 s", as of a hung one; without a status file
    # (removed by hand, never written) it said so until session 21: the socket's peer is asked.
    sock = short_tmp / "run" / "m.sock"
    with _real_daemon(sock) as pid:
        if not status_file:
            lifecycle.status_file(sock).unlink()
        os.kill(pid, signal.SIGSTOP)
        try:
            done = run_memctl(
                "--socket", str(sock), "status", env=memctl_env(MEMORYD_ANSWER_TIMEOUT="0.5")
            )
        finally:
            os.kill(pid, signal.SIGCONT)
        assert done.returncode == 4
        assert (
            f"memoryd did not answer within 0.5 s: its process (pid {pid}) is stopped (SIGSTOP, "
            f"or Ctrl-Z in its terminal); `kill -CONT {pid}` resumes it, `memctl stop` ends it"
        ) in done.stderr
        assert lifecycle.stop(sock)["stopped"] is True


def test_a_status_error_does_not_keep_the_shutdown_from_being_asked(
    fake_daemon: FakeDaemon,
) -> None:
    # With no status file, `stop` asks the daemon's pid first; an error there (not the busy
    # one) is no pid, and the shutdown is still asked for.
    def broken(_params: dict[str, Any]) -> Any:
        raise FakeError(-32603, "internal error")

    fake_daemon.on("status", broken)
    fake_daemon.on("shutdown", {"shutting_down": True})
    assert lifecycle.stop(fake_daemon.socket_path) == {"stopped": True, "pid": None}
    assert fake_daemon.calls("shutdown") == [{}]


def test_a_fifo_or_a_huge_file_as_the_status_file_is_no_status(fake_daemon: FakeDaemon) -> None:
    # A FIFO in its place hung `stop` for ever (its open waited for a writer).
    fake_daemon.on("shutdown", {"shutting_down": True})
    status_file = lifecycle.status_file(fake_daemon.socket_path)
    os.mkfifo(status_file)
    done = run_memctl("--socket", str(fake_daemon.socket_path), "stop", timeout=20)
    assert done.returncode == 0, done.stderr
    status_file.unlink()
    status_file.write_text(json.dumps({"pid": 1, "pad": "x" * 100_000}))
    assert lifecycle.read_status_file(fake_daemon.socket_path) is None
    status_file.write_text(json.dumps({"pid": 1}))
    assert lifecycle.read_status_file(fake_daemon.socket_path) == {"pid": 1}
