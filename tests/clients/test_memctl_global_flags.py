"""`--json` and `--socket` work after the command too, as users type them (issue 14):
`memctl status --json` is `memctl --json status`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clients.conftest import run_memctl
from tests.clients.fake_daemon import FakeDaemon


@pytest.mark.parametrize(
    "argv",
    [
        ["--socket", "{sock}", "--json", "status"],
        ["--socket", "{sock}", "status", "--json"],
        ["status", "--socket", "{sock}", "--json"],
        ["--json", "status", "--socket", "{sock}"],
        ["call", "status", "--json", "--socket", "{sock}"],
        ["includes", "--socket", "{sock}", "list", "--json", "--cwd", "/"],
    ],
)
def test_global_flags_before_or_after_the_command(fake_daemon: FakeDaemon, argv: list[str]) -> None:
    fake_daemon.handlers["includes.list"] = lambda _: {"includes": []}
    argv = [word.format(sock=fake_daemon.socket_path) for word in argv]
    result = run_memctl(*argv)
    assert result.returncode == 0, result.stderr
    assert isinstance(json.loads(result.stdout), dict)


def test_flags_after_the_command_when_the_daemon_is_down(short_tmp: Path) -> None:
    result = run_memctl("status", "--json", "--socket", str(short_tmp / "absent.sock"))
    assert result.returncode == 3
    assert json.loads(result.stdout)["exit_code"] == 3


def test_a_flag_given_before_is_kept_when_not_repeated_after(fake_daemon: FakeDaemon) -> None:
    result = run_memctl("--json", "--socket", str(fake_daemon.socket_path), "call", "status")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["version"] == "fake"


def test_text_that_looks_like_a_flag_stays_text(fake_daemon: FakeDaemon) -> None:
    fake_daemon.handlers["memory.remember"] = lambda params: {
        "path": "/m.md",
        "created": True,
        "type": "user",
        "name": params["text"],
        "description": "",
    }
    result = run_memctl("--socket", str(fake_daemon.socket_path), "remember", "--", "--json")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("saved [user] --json")
