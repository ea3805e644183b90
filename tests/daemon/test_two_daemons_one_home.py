"""A second daemon of one user (on another socket, same state dir) is told of and reported:
`status.other_daemon`, a warning in its log and in `memctl status`; once the first stops, the
second takes over and the warning goes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from memoryd.daemon.home_lock import HomeLock
from memoryd_client import Client
from tests.daemon.test_lifecycle import start_healthy, terminated_stderr


def _start(sock: Path) -> subprocess.Popen[str]:
    return start_healthy(sock, "--log-level", "warning", capture=True)


def _status(sock: Path) -> dict[str, object]:
    with Client(sock, timeout=5) as conn:
        result: dict[str, object] = conn.call("status")
        return result


def _stop(proc: subprocess.Popen[str]) -> str:
    return terminated_stderr(proc)


def test_a_second_daemon_says_who_came_first_and_takes_over_when_it_stops(
    short_tmp: Path,
) -> None:
    first_sock, second_sock = short_tmp / "service.sock", short_tmp / "byhand.sock"
    first = _start(first_sock)
    second = None
    try:
        second = _start(second_sock)
        assert _status(first_sock)["other_daemon"] is None
        assert _status(second_sock)["other_daemon"] == {
            "pid": first.pid,
            "socket": str(first_sock),
        }
        shown = subprocess.run(
            [sys.executable, "-m", "memctl", "--socket", str(second_sock), "status"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert shown.returncode == 0, shown.stderr
        assert (
            f"warning: another memoryd of this user (pid {first.pid}) is running on "
            f"{first_sock}; keep one: memctl --socket {first_sock} stop"
        ) in shown.stdout
        _stop(first)
        assert _status(second_sock)["other_daemon"] is None  # the second holds it now
    finally:
        if first.poll() is None:
            _stop(first)
        log = _stop(second) if second is not None else ""
    assert "another memoryd of this user is running" in log
    assert str(first_sock) in log


def test_a_lone_daemon_reports_no_other(short_tmp: Path) -> None:
    proc = _start(short_tmp / "only.sock")
    try:
        assert _status(short_tmp / "only.sock")["other_daemon"] is None
    finally:
        log = _stop(proc)
    assert "another memoryd" not in log


def test_a_note_that_is_not_ours_names_no_one(tmp_path: Path) -> None:
    path = tmp_path / "state" / "daemon.lock"
    holder = HomeLock(path, tmp_path / "a.sock")
    assert holder.claim() is None
    assert holder.held
    path.write_bytes(b'{"pid": true, "socket": 7}')  # rewritten by something else
    other = HomeLock(path, tmp_path / "b.sock").claim()
    assert other is not None
    assert (other.pid, other.socket) == (None, None)
    path.write_bytes(b"\xff\xfe not json")
    other = HomeLock(path, tmp_path / "b.sock").claim()
    assert other is not None
    assert (other.pid, other.socket) == (None, None)
    path.write_bytes(b"[" * 4096)  # nested past json's depth: was a RecursionError traceback
    other = HomeLock(path, tmp_path / "b.sock").claim()
    assert other is not None
    assert (other.pid, other.socket) == (None, None)
    # A pid longer than any (the note is read up to 4 KiB, so never the 4,300 digits Python
    # converts at most) is none, its socket kept.
    path.write_bytes(b'{"pid": ' + b"9" * 30 + b', "socket": "/run/a.sock"}')
    other = HomeLock(path, tmp_path / "b.sock").claim()
    assert other is not None
    assert (other.pid, other.socket) == (None, "/run/a.sock")
    holder.release()
    after = HomeLock(path, tmp_path / "b.sock")
    assert after.claim() is None
    assert after.held
    after.release()
    assert oct(path.stat().st_mode & 0o777) == "0o600"
