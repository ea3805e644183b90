"""`--socket '~/…'`: a leading `~` is the home folder for every memctl command and memoryd-mcp.

Found by a bug hunt (session 23): `memctl status` and `stop` expanded it, but recall,
remember, call, watch, includes and the memory UI looked for a folder named `~` ("memoryd is
not running on ~/m.sock" while status found it), and so did memoryd-mcp, whose `--socket`
comes from a host's JSON config that no shell expands.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd_client import mcp_server
from tests.clients.conftest import memctl_env, run_memctl
from tests.clients.fake_daemon import FakeDaemon


@pytest.mark.parametrize(
    ("args", "method"),
    [
        (["recall", "tabs"], "recall"),
        (["call", "status"], "status"),
        (["includes", "list"], "includes.list"),
    ],
)
def test_memctl_commands_expand_a_leading_tilde(
    fake_daemon: FakeDaemon, args: list[str], method: str
) -> None:
    fake_daemon.on(method, {"memories": []})
    home = fake_daemon.socket_path.parent
    env = memctl_env(HOME=str(home))
    done = run_memctl("--socket", f"~/{fake_daemon.socket_path.name}", *args, env=env)
    assert done.returncode == 0, done.stderr
    assert len(fake_daemon.calls(method)) == 1


def test_memoryd_mcp_expands_a_leading_tilde(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/ada")
    assert mcp_server._socket_path("~/m.sock") == "/home/ada/m.sock"
    assert mcp_server._socket_path("rel/m.sock") == "rel/m.sock"


def test_a_hook_expands_a_leading_tilde(fake_daemon: FakeDaemon, tmp_path: Path) -> None:
    # Found by a bug hunt (session 23): a hook's `--socket '~/m.sock'`, from Claude Code's
    # JSON settings that no shell expands, was a folder named ~: no memory was ever recalled.
    memory = {"path": "/m/a.md", "name": "Tabs", "type": "feedback", "content": "use tabs"}
    fake_daemon.on("recall", {"memories": [memory], "selector": "local"})
    home = fake_daemon.socket_path.parent
    payload = json.dumps({"cwd": str(tmp_path), "prompt": "tabs or spaces?"})
    done = run_memctl(
        "hook",
        "user-prompt-submit",
        "--socket",
        f"~/{fake_daemon.socket_path.name}",
        stdin=payload,
        env=memctl_env(HOME=str(home)),
    )
    assert done.returncode == 0, done.stderr
    assert len(fake_daemon.calls("recall")) == 1
    assert "use tabs" in done.stdout
