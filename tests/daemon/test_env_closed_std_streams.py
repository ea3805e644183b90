"""A daemon started with stdin, stdout and stderr closed (`memoryd <&- >&- 2>&-`, a launcher
that closes them): it serves and stops cleanly. The next descriptors it opened took the
numbers 0-2, and libuv aborted the process when it closed one of them (`uv__close: Assertion
fd > STDERR_FILENO`, exit 134), at the latest at shutdown."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.daemon.test_lifecycle import wait_healthy


def _close_std_fds(which: tuple[int, ...]) -> None:
    for fd in which:
        os.close(fd)


@pytest.mark.parametrize(
    ("closed", "log_file"),
    [((0,), False), ((0, 1, 2), False), ((0, 1, 2), True)],
    ids=["stdin", "all three", "all three, a log file"],
)
def test_a_daemon_with_closed_standard_streams_serves_and_stops_cleanly(
    short_tmp: Path, closed: tuple[int, ...], log_file: bool
) -> None:
    sock, log = short_tmp / "d.sock", short_tmp / "memoryd.log"
    logging = ["--log-file", str(log)] if log_file else []
    proc = subprocess.Popen(
        [sys.executable, "-m", "memoryd", "--socket", str(sock), *logging],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: _close_std_fds(closed),
    )
    try:
        for _ in range(3):  # each client's socket opened and closed in the daemon
            wait_healthy(sock)
    finally:
        proc.terminate()
        try:
            code = proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
    assert code == 0
    if log_file:
        assert "memoryd stopped" in log.read_text(encoding="utf-8")
