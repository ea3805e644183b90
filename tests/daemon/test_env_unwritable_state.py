"""A state folder that cannot be created (a file where it goes; a read-only HOME): the daemon
starts and serves, and its first lines say which folder and what is not kept, instead of
scattered warnings (or -32603s) later, one per feature that tried to write there."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from memoryd.daemon import main as daemon_main
from memoryd.daemon import state_upkeep
from memoryd_client import Client
from tests.conftest import IsolatedEnv
from tests.daemon.test_lifecycle import spawn_daemon, wait_healthy


def test_a_state_folder_that_cannot_be_made_is_said_at_start(
    isolated_env: IsolatedEnv, short_tmp: Path
) -> None:
    blocker = isolated_env.root / "not-a-folder"
    blocker.write_text("a file where the state folder goes\n")
    sock = short_tmp / "d.sock"
    proc = spawn_daemon(
        sock, "--log-level", "warning", env={"XDG_STATE_HOME": str(blocker)}, capture=True
    )
    try:
        wait_healthy(sock)
        with Client(sock, timeout=5) as conn:
            assert conn.call("status")["pid"] == proc.pid
    finally:
        proc.terminate()
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    first = err.splitlines()[0]
    assert f"{blocker}/memoryd cannot be written ({blocker} is not a folder)" in first
    assert "XDG_STATE_HOME" in first
    assert "Traceback" not in err
    assert proc.returncode == 0


def test_a_writable_state_folder_is_not_reported(
    isolated_env: IsolatedEnv, short_tmp: Path
) -> None:
    sock = short_tmp / "d.sock"
    proc = spawn_daemon(sock, "--log-level", "warning", capture=True)
    try:
        wait_healthy(sock)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "cannot be written" not in err
    assert not [p for p in os.listdir(isolated_env.state_dir) if p.endswith(".tmp")]


def test_a_write_probe_a_kill_left_behind_is_swept_at_the_next_start(
    isolated_env: IsolatedEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Killed between creating its probe and removing it: the file stays. Named as a staged
    # temp file, the next start's upkeep removes it (a fixed name of its own was never swept).
    isolated_env.state_dir.mkdir(parents=True, exist_ok=True)
    with monkeypatch.context() as patched:
        patched.setattr(daemon_main.os, "unlink", lambda path: None)
        daemon_main._probe_write(isolated_env.state_dir)
    (left,) = isolated_env.state_dir.iterdir()
    long_ago = time.time() - 3600  # made by a daemon that is gone
    os.utime(left, (long_ago, long_ago))
    assert state_upkeep.remove_stale_temp_files() == [left]
    assert not left.exists()
