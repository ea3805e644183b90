"""`memctl stop` says "stopped" only when the daemon's process is gone."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memctl import lifecycle
from memctl.commands import daemon
from tests.clients.fake_daemon import FakeDaemon

IGNORES_SIGTERM = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


def test_a_daemon_that_outlives_sigterm_is_not_stopped(fake_daemon: FakeDaemon) -> None:
    # Found by a bug hunt: a hung daemon was sent SIGTERM, kept running, and `memctl stop`
    # printed "memoryd stopped (pid N)" and exited 0.
    hung = subprocess.Popen([sys.executable, "-c", IGNORES_SIGTERM], stdout=subprocess.PIPE)
    try:
        assert hung.stdout is not None
        assert hung.stdout.readline() == b"ready\n"
        sock = fake_daemon.socket_path
        lifecycle.status_file(sock).write_text(json.dumps({"pid": hung.pid}))
        fake_daemon.on("shutdown", {"shutting_down": True})  # answers, then does not go
        result = lifecycle.stop(sock, wait_s=0.2, term_wait_s=0.3)
        assert result["stopped"] is False
        assert result["pid"] == hung.pid
        assert hung.poll() is None
    finally:
        hung.kill()
        hung.communicate()


def test_stop_that_did_not_stop_is_a_timeout(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    sock = tmp_path / "memoryd.sock"
    result = {"stopped": False, "pid": 4242, "waited_s": 35.0}
    monkeypatch.setattr(lifecycle, "stop", lambda _sock: result)
    args = argparse.Namespace(socket=sock, json=False)
    assert daemon.run_stop(args) == 4
    err = capsys.readouterr().err
    assert f"memoryd (pid 4242) on {sock} did not stop within 35s, not even after SIGTERM" in err
    assert daemon.run_restart(args) == 4  # no second daemon next to a hung one
    monkeypatch.setattr(lifecycle, "stop", lambda _sock: {"stopped": False, "pid": None})
    assert daemon.run_stop(args) == 3
    assert "not running" in capsys.readouterr().err


def test_a_zombie_is_not_alive() -> None:
    # A daemon child of the caller that exited but was not reaped yet has stopped.
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 10
        while lifecycle.pid_alive(child.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not lifecycle.pid_alive(child.pid)
    finally:
        child.wait()
