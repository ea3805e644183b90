"""`memctl status`: a daemon that is there but does not answer is a timeout, not "not running"."""

from __future__ import annotations

from tests.clients.conftest import run_memctl
from tests.clients.fake_daemon import FakeDaemon


def test_status_of_a_hung_daemon_is_a_timeout(fake_daemon: FakeDaemon) -> None:
    # Found by a bug hunt: after 5 s it said "memoryd is not running" (exit 3), and the
    # `memctl start` that advice leads to failed: something was serving the socket.
    fake_daemon.delays["status"] = 8.0
    done = run_memctl("--socket", str(fake_daemon.socket_path), "status")
    assert done.returncode == 4, done.stderr
    assert "did not answer" in done.stderr
    assert "not running" not in done.stderr


def test_status_of_no_daemon_is_not_running(fake_daemon: FakeDaemon) -> None:
    done = run_memctl("--socket", str(fake_daemon.socket_path.with_name("none.sock")), "status")
    assert done.returncode == 3
    assert "not running" in done.stderr


def test_status_text_names_the_protocol_version(fake_daemon: FakeDaemon) -> None:
    # Found by a bug hunt: docs/operations.md's upgrade check reads the protocol version from
    # `memctl status`, which printed only the package version.
    fake_daemon.on("status", {"version": "1.2.3", "protocol_version": 1, "pid": 7, "socket": "/s"})
    done = run_memctl("--socket", str(fake_daemon.socket_path), "status")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "memoryd 1.2.3, protocol 1 (pid 7) on /s"
