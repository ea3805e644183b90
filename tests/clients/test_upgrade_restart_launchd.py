"""`memctl restart` (the upgrade step) of the daemon memoryd's LaunchAgent runs: launchd starts
it again, with the plist's environment. Before, memctl stopped it (a clean exit, which KeepAlive
does not restart) and started a daemon of its own from the shell's environment: the model key
set in the plist was gone until the next login, and launchd no longer managed memoryd.

launchd is faked by a `launchctl` on PATH that keeps the one job as launchd would: started with
the job's environment on `bootstrap` and `kickstart`, its pid shown by `print`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clients.conftest import memctl_env

FAKE_LAUNCHCTL = """#!/bin/sh
S="{state}"
printf '%s\\n' "$*" >> "$S/calls.log"
start_job() {{
  env ANTHROPIC_API_KEY=sk-ant-set-in-the-plist "{python}" -m memoryd --socket "{sock}" \\
    >/dev/null 2>&1 &
  echo $! > "$S/pid"
}}
case "$1" in
  print)
    if [ -e "$S/pid" ] && kill -0 "$(cat "$S/pid")" 2>/dev/null; then
      printf 'gui/0/com.memoryd.daemon = {{\\n\\tstate = running\\n\\tpid = %s\\n}}\\n' "$(cat "$S/pid")"
      exit 0
    fi
    exit 113 ;;
  bootstrap|kickstart) start_job; exit 0 ;;
esac
exit 0
"""


@pytest.fixture
def launchd(short_tmp: Path, tmp_path: Path) -> Iterator[tuple[dict[str, str], Path, Path]]:
    state = tmp_path / "launchd"
    folder = tmp_path / "bin"
    for path in (state, folder):
        path.mkdir()
    sock = short_tmp / "memoryd.sock"
    tool = folder / "launchctl"
    tool.write_text(FAKE_LAUNCHCTL.format(state=state, python=sys.executable, sock=sock))
    tool.chmod(0o755)
    env = memctl_env(PATH=f"{folder}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    env.pop("ANTHROPIC_API_KEY", None)
    try:
        yield env, sock, state
    finally:
        subprocess.run(
            [sys.executable, "-m", "memctl", "--socket", str(sock), "stop"],
            env=env,
            capture_output=True,
            check=False,
            timeout=60,
        )
        for pid_file in state.glob("pid"):
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid_file.read_text()), signal.SIGTERM)


def _memctl(env: dict[str, str], sock: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memctl", "--socket", str(sock), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def _status(env: dict[str, str], sock: Path) -> dict[str, Any] | None:
    done = _memctl(env, sock, "--json", "status")
    return json.loads(done.stdout) if done.returncode == 0 else None


@pytest.mark.slow  # real daemons started and stopped
def test_restart_of_the_launch_agent_s_daemon_goes_through_launchd(
    launchd: tuple[dict[str, str], Path, Path],
) -> None:
    env, sock, state = launchd
    subprocess.run(
        [str(Path(env["PATH"].split(":")[0]) / "launchctl"), "bootstrap", "gui/0", "p"],
        env=env,
        check=True,
    )
    deadline = time.monotonic() + 30
    before = None
    while before is None and time.monotonic() < deadline:
        before = _status(env, sock)
        time.sleep(0.05)
    assert before is not None
    assert before["model"]["configured"]
    done = _memctl(env, sock, "restart")
    assert done.returncode == 0, done.stderr
    assert "restarted by launchd" in done.stdout
    after = _status(env, sock)
    assert after is not None
    assert after["pid"] == int((state / "pid").read_text()) != before["pid"]
    assert after["model"]["configured"]  # the job's environment, not the shell's
    calls = (state / "calls.log").read_text().splitlines()
    assert calls[-1] == f"kickstart gui/{os.getuid()}/com.memoryd.daemon"


@pytest.mark.slow
def test_restart_of_a_daemon_launchd_does_not_run_starts_one_as_before(
    launchd: tuple[dict[str, str], Path, Path],
) -> None:
    env, sock, state = launchd
    assert _memctl(env, sock, "start").returncode == 0
    done = _memctl(env, sock, "restart")
    assert done.returncode == 0, done.stderr
    assert "memoryd started" in done.stdout
    calls = state / "calls.log"
    assert not calls.exists() or "kickstart" not in calls.read_text()
