"""`memctl dream` exits 1 when the dream failed or the model refused it (stop_reason "error"):
it exited 0, and a script running it could not tell a failed consolidation from a done one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clients.conftest import memctl_env, run_memctl
from tests.clients.fake_daemon import FakeDaemon

DONE = {"memory_dir": "/m", "memories": 5, "edited": [], "retired": [], "summary": "merged"}


@pytest.mark.parametrize(
    ("stop_reason", "code"), [("error", 1), ("end_turn", 0), ("nothing_to_do", 0), (None, 0)]
)
def test_the_exit_code_says_whether_the_dream_failed(
    fake_daemon: FakeDaemon, tmp_path: Path, stop_reason: str | None, code: int
) -> None:
    reply = DONE | {"stop_reason": stop_reason, "project": str(tmp_path)}
    if stop_reason == "error":
        reply["error"] = "the model refused"
    fake_daemon.on("memory.dream", reply)
    env = memctl_env()
    socket = str(fake_daemon.socket_path)
    done = run_memctl("--socket", socket, "dream", "--cwd", str(tmp_path), env=env)
    assert done.returncode == code, done.stderr
    as_json = run_memctl("--socket", socket, "--json", "dream", "--cwd", str(tmp_path), env=env)
    assert as_json.returncode == code
    assert json.loads(as_json.stdout)["stop_reason"] == stop_reason
