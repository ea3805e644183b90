"""SIGUSR1 and SIGUSR2 (a logrotate script, `kill -USR1` from habit) leave the daemon
serving; their default action ended it at once, with no drain and its socket and status
files left behind. SIGTERM after them still stops it cleanly."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from memoryd.paths import status_file_for
from tests.daemon.test_lifecycle import spawn_daemon, wait_healthy


@pytest.mark.parametrize("sig", [signal.SIGUSR1, signal.SIGUSR2], ids=lambda s: s.name)
def test_a_user_signal_leaves_the_daemon_serving(short_tmp: Path, sig: signal.Signals) -> None:
    sock = short_tmp / "d.sock"
    proc = spawn_daemon(sock)
    try:
        wait_healthy(sock)
        proc.send_signal(sig)
        proc.send_signal(sig)
        wait_healthy(sock)
        assert proc.poll() is None
    finally:
        proc.terminate()
        try:
            code = proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
    assert code == 0
    assert not sock.exists()
    assert not status_file_for(sock).exists()
