"""memctl upgraded while the daemon started before the upgrade keeps running: what that older
daemon answers to a method or a parameter added since (its replies as a real one gives them,
from a daemon of session 10) says that the daemon may be older and how to restart it, not only
"method not found" or "Extra inputs are not permitted", which read as the user's mistake."""

from __future__ import annotations

import json
from typing import Any

from tests.clients.conftest import run_memctl
from tests.clients.fake_daemon import FakeDaemon, FakeError

RESTART = "`memctl restart` runs the installed one"


def _older_recall(params: dict[str, Any]) -> dict[str, Any]:
    if "explain" in params:  # a parameter added after this daemon was built
        raise FakeError(-32602, "invalid params: explain: Extra inputs are not permitted")
    if not str(params.get("cwd", "")).startswith("/"):
        raise FakeError(-32602, "invalid params: cwd: must be an absolute path")
    return {"memories": [], "selector": "local"}


def test_an_older_daemon_s_refusals_say_to_restart_it(fake_daemon: FakeDaemon) -> None:
    fake_daemon.on("recall", _older_recall)
    sock = str(fake_daemon.socket_path)
    why = run_memctl("--socket", sock, "recall", "--why", "deploy", "--cwd", "/tmp")
    assert why.returncode == 1
    assert "Extra inputs are not permitted" in why.stderr
    assert RESTART in why.stderr
    # memory.snapshot is newer than this daemon: no such method.
    snapshot = run_memctl("--socket", sock, "--json", "call", "memory.snapshot", "{}")
    assert snapshot.returncode == 1
    assert RESTART in json.loads(snapshot.stdout)["error"]
    # An error of the user's own says nothing about versions.
    own = run_memctl("--socket", sock, "call", "recall", '{"cwd": "rel", "query": "q"}')
    assert own.returncode == 1
    assert "must be an absolute path" in own.stderr
    assert "memctl restart" not in own.stderr
