"""A daemon at its connection cap answers -32004 with why (docs/protocol.md). `memctl status`
said "not running" and `memctl start` started a second daemon (which exited: "already
serving"); `memctl stop` waited 30 s for a shutdown it could not have asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.clients.conftest import memctl_env, run_memctl
from tests.clients.fake_daemon import FakeDaemon, FakeError

WHY = "memoryd is serving 32 clients, all its open-files limit leaves room for; try again"


def _busy(_params: dict[str, Any]) -> Any:
    raise FakeError(-32004, WHY)


def test_status_and_start_say_the_daemons_reason(fake_daemon: FakeDaemon) -> None:
    fake_daemon.on("status", _busy)
    env = memctl_env()
    for command in ("status", "start"):
        done = run_memctl("--socket", str(fake_daemon.socket_path), command, env=env)
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        assert WHY in done.stderr
        assert "not running" not in done.stdout + done.stderr


def test_service_status_reports_the_units_and_a_busy_daemon(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    # It printed only the -32004 error, the units' report lost (before a10867a: "not running").
    fake_daemon.on("status", _busy)
    no_tools = tmp_path / "bin"  # no systemctl to ask: the test never talks to a user manager
    no_tools.mkdir()
    env = memctl_env(PATH=str(no_tools), HOME=str(tmp_path))
    done = run_memctl(
        "--socket",
        str(fake_daemon.socket_path),
        "service",
        "--manager",
        "systemd",
        "status",
        env=env,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "/memoryd.socket: missing" in done.stdout
    assert f"daemon: running on {fake_daemon.socket_path}, but it refused memctl: " in done.stdout
    assert WHY in done.stdout
