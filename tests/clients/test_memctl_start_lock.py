"""The start lock beside the socket (`memctl start`/`stop`, lifecycle._one_at_a_time): a file
system without locks and another user's lock file (session 21). `flock` failing with ENOLCK
(NFS without its lock service) was a traceback; another user's lock in a shared sticky folder
held start and stop 15 s, waiting for their `memctl`, before either went on regardless."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from memctl import lifecycle
from memctl.__main__ import main
from tests.clients.conftest import memctl_env, run_memctl


def _no_locks(fd: int, operation: int) -> None:
    raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))


def test_a_file_system_without_locks_fails_start_with_what_to_do(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sock = short_tmp / "nfs" / "m.sock"
    monkeypatch.setattr(fcntl, "flock", _no_locks)
    assert main(["--json", "--socket", str(sock), "start"]) == 3
    error = json.loads(capsys.readouterr().out)["error"]
    assert error.startswith(f"cannot lock {lifecycle.start_lock(sock)}: No locks available")
    assert "set MEMORYD_SOCKET to a path on a local file system" in error
    assert not sock.exists()  # nothing was started
    # `stop` goes on without the lock: nobody is there, and it says just that.
    assert main(["--socket", str(sock), "stop"]) == 3
    assert f"memoryd is not running on {sock}" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
@pytest.mark.parametrize("command", ["start", "stop"])
def test_another_users_start_lock_is_refused_at_once(short_tmp: Path, command: str) -> None:
    shared = short_tmp / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp: anyone may make files there, only their own
    sock = shared / "m.sock"
    lock = lifecycle.start_lock(sock)
    lock.write_text("")
    lock.chmod(0o666)
    os.chown(lock, 65534, -1)
    # Their `memctl start`, holding it.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time\n"
            "f = open(sys.argv[1], 'rb')\nfcntl.flock(f, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\ntime.sleep(60)\n",
            str(lock),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    with holder:
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline() == "held\n"
            done = run_memctl("--json", "--socket", str(sock), command, timeout=25.0)
        finally:
            holder.kill()
    started = lifecycle.read_status_file(sock)
    if started is not None:  # one that went on, after waiting its 15 s in vain
        os.kill(started["pid"], signal.SIGKILL)
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert json.loads(done.stdout)["error"] == (
        f"refusing {sock}: its start lock {lock} belongs to uid 65534, not to you (uid 0); "
        "another user uses this socket path: set MEMORYD_SOCKET or XDG_RUNTIME_DIR to a folder "
        "of your own"
    )
    assert not sock.exists()


@pytest.mark.parametrize("where", ["log", "folder"])
def test_start_names_the_file_in_its_way(short_tmp: Path, where: str) -> None:
    # "Is a directory" and "File exists" named neither the log nor the socket's folder.
    if where == "log":
        sock = short_tmp / "m.sock"
        (short_tmp / "memoryd.log").mkdir()
        said = f"{short_tmp / 'memoryd.log'}: Is a directory"
    else:
        (short_tmp / "sub").write_text("")
        sock = short_tmp / "sub" / "m.sock"
        said = f"{short_tmp / 'sub'}: not a folder"
    done = run_memctl("--json", "--socket", str(sock), "start")
    assert done.returncode == 3
    assert json.loads(done.stdout)["error"] == f"cannot start memoryd at {sock}: {said}"


def test_start_says_why_the_daemon_refused_its_environment(short_tmp: Path) -> None:
    # A refusal made before logging is set up is a plain `memoryd: …` line in the log; start
    # said only "exited with code 2", though operations.md promises the daemon's reason.
    sock = short_tmp / "m.sock"
    done = run_memctl(
        "--json", "--socket", str(sock), "start", env=memctl_env(MEMORYD_MODEL_TIMEOUT="abc")
    )
    assert done.returncode == 3
    error = json.loads(done.stdout)["error"]
    assert "during start-up: MEMORYD_MODEL_TIMEOUT='abc' is not a number of seconds" in error
