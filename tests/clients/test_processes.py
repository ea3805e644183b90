"""`memoryd_client.processes.process_state`: the state letter memctl (a zombie daemon, a
stopped one) and the team sync state lock (a stopped holder) read from /proc."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memoryd_client.processes import process_state

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="no /proc")


def _until(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 60
    while not check():
        assert time.monotonic() < deadline, "the process never got there"
        time.sleep(0.01)


@pytest.fixture
def sleeper(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    # Its command name, which /proc/<pid>/stat shows in parentheses, holds ") T (".
    name = tmp_path / "x) T (y"
    name.symlink_to("/bin/sleep")
    child = subprocess.Popen([str(name), "600"])
    _until(lambda: Path(f"/proc/{child.pid}/comm").read_text().strip() == name.name)
    yield child
    child.kill()
    child.wait()


def test_a_running_process_is_r() -> None:
    assert process_state(os.getpid()) == "R"


def test_the_state_after_a_command_name_holding_a_parenthesis(
    sleeper: subprocess.Popen[bytes],
) -> None:
    _until(lambda: process_state(sleeper.pid) == "S")


def test_a_stopped_process_is_t_and_an_unreaped_one_z(sleeper: subprocess.Popen[bytes]) -> None:
    os.kill(sleeper.pid, signal.SIGSTOP)
    _until(lambda: process_state(sleeper.pid) == "T")
    os.kill(sleeper.pid, signal.SIGKILL)
    _until(lambda: process_state(sleeper.pid) == "Z")  # exited, its parent not told yet


def test_no_such_process_has_no_state() -> None:
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    assert process_state(pid_max + 1) is None
