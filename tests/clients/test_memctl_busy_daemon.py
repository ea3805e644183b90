"""A daemon at its connection cap answers -32004 with why (docs/protocol.md). `memctl status`
said "not running" and `memctl start` started a second daemon (which exited: "already
serving"); `memctl stop` waited 30 s for a shutdown it could not have asked for."""

from __future__ import annotations

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
