"""Start-up's sweep of killed writers' temp files leaves another process's write under way.

A daemon still draining when `memctl start` ran, or a second daemon of the user, may be in the
middle of an atomic write (staged, its fsync slow) as this daemon starts: its temp file is
older than the new process by a few seconds. The sweep removed every temp file older than the
process, so that write's rename failed and what it wrote was lost; it now leaves temp files
younger than its margin (`LIVE_WRITE_MARGIN_S`) before the start.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from memoryd.fsutil import LIVE_WRITE_MARGIN_S, _staged_prefix, stage_file
from memoryd_client import Client
from tests.conftest import IsolatedEnv
from tests.daemon.test_lifecycle import wait_healthy


def _staged(path: Path, data: bytes, age_s: float) -> Path:
    """`atomic_write_*`'s temp file for `path`, last written `age_s` ago."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = stage_file(path.parent, data, prefix=_staged_prefix(path.name))
    when = time.time() - age_s
    os.utime(staged, (when, when))
    return staged


def _until_removed(killed: Path) -> None:
    deadline = time.monotonic() + 60  # the daemon's first sweep, on a loaded machine too
    while killed.exists():
        assert time.monotonic() < deadline, "the sweep never removed the killed writer's file"
        time.sleep(0.02)


def test_a_write_under_way_in_another_process_is_left_alone(
    isolated_env: IsolatedEnv, short_tmp: Path
) -> None:
    state = isolated_env.state_dir
    # Another daemon's include approvals, staged 3 s ago and still being synced to disk. The
    # sweep walks the state folder top down: this one is looked at before the killed one.
    under_way = _staged(state / "include-approvals.json", b"whole", 3)
    killed = _staged(state / "history" / "k" / "a.md" / "1-overwrite.md", b"half", 3600)
    assert LIVE_WRITE_MARGIN_S > 3
    sock = short_tmp / "d.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "memoryd", "--socket", str(sock)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_healthy(sock)
        _until_removed(killed)  # the sweep has run once this one is gone
        assert under_way.read_bytes() == b"whole"
    finally:
        proc.terminate()
        proc.wait(15)


def test_a_write_under_way_in_a_memory_folder_is_left_alone(
    isolated_env: IsolatedEnv, short_tmp: Path
) -> None:
    # The same sweep at a memory folder's first use (`IndexWriter`) removed every temp file
    # older than the daemon, a live writer's too.
    memory_dir = short_tmp / "memory"
    under_way = _staged(memory_dir / "user_tabs.md", b"whole", 3)
    killed = _staged(memory_dir / "user_spaces.md", b"half", 3600)
    project = short_tmp / "project"
    project.mkdir()
    sock = short_tmp / "d.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "memoryd", "--socket", str(sock)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "MEMORYD_AUTO_MEMORY_DIR": str(memory_dir)},
    )
    try:
        wait_healthy(sock)
        with Client(sock) as client:
            client.call("memory.list", {"cwd": str(project)})
        # The folder's sweep runs in a thread (0e6747f): it may end after the reply.
        _until_removed(killed)
        assert under_way.read_bytes() == b"whole"
    finally:
        proc.terminate()
        proc.wait(15)
