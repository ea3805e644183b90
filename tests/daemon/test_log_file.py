"""The log file: private, and only ever a plain file of the user's in a folder of the user's.

`memoryd --log-file` and `memctl start` (which always passes one, beside the socket) used to
open it with `open(path, "a")`: created 0644 (0666 under umask 000), a link put where it goes
followed, a FIFO there hung the start, all before the socket folder was checked.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.daemon.test_lifecycle import spawn_daemon, wait_healthy


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def _memoryd(sock: Path, log: Path, umask: int = 0o022) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "memoryd", "--socket", str(sock), "--log-file", str(log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        preexec_fn=lambda: os.umask(umask),
    )


def _refused(sock: Path, log: Path) -> str:
    """The one line a daemon that cannot use `log` prints; it exits 2 and never listens."""
    proc = spawn_daemon(sock, "--log-file", str(log), capture=True)
    try:
        _out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:  # pragma: no cover - the old code hung on a FIFO
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 2, err
    assert err.strip().splitlines() == [err.strip()]
    assert f"cannot write the log file {log}" in err
    assert not sock.exists()
    return err


def test_the_log_is_created_private_whatever_the_umask(short_tmp: Path) -> None:
    shared = short_tmp / "logs"
    shared.mkdir(mode=0o755)  # a folder others may read: ~, ~/logs
    sock = short_tmp / "d.sock"
    log = shared / "memoryd.log"
    proc = _memoryd(sock, log, umask=0o000)
    try:
        wait_healthy(sock)
    finally:
        proc.terminate()
        proc.wait(10)
    assert _mode(log) == 0o600
    assert log.read_text()  # it logged there


def test_an_existing_log_readable_by_others_is_made_private(short_tmp: Path) -> None:
    log = short_tmp / "memoryd.log"
    log.write_text('{"event": "an earlier run"}\n')
    log.chmod(0o644)
    sock = short_tmp / "d.sock"
    proc = _memoryd(sock, log)
    try:
        wait_healthy(sock)
    finally:
        proc.terminate()
        proc.wait(10)
    assert _mode(log) == 0o600
    lines = log.read_text().splitlines()
    assert lines[0] == '{"event": "an earlier run"}'  # appended to, not truncated
    assert len(lines) > 1


def test_a_link_where_the_log_goes_is_not_followed(short_tmp: Path) -> None:
    victim = short_tmp / "bashrc"
    victim.write_text("# the user's own file\n")
    log = short_tmp / "memoryd.log"
    log.symlink_to(victim)
    assert "is a symbolic link; it is not followed" in _refused(short_tmp / "d.sock", log)
    assert victim.read_text() == "# the user's own file\n"


def test_a_fifo_where_the_log_goes_is_refused_at_once(short_tmp: Path) -> None:
    log = short_tmp / "memoryd.log"
    os.mkfifo(log)
    assert "is not a regular file" in _refused(short_tmp / "d.sock", log)


def test_a_second_name_of_another_file_is_refused(short_tmp: Path) -> None:
    victim = short_tmp / "notes.txt"
    victim.write_text("mine\n")
    log = short_tmp / "memoryd.log"
    os.link(victim, log)
    assert "has 2 hard links" in _refused(short_tmp / "d.sock", log)
    assert victim.read_text() == "mine\n"


def test_a_log_folder_others_may_write_in_is_refused(short_tmp: Path) -> None:
    folder = short_tmp / "open"
    folder.mkdir()
    folder.chmod(0o777)  # not sticky: anyone could swap the log for a link
    err = _refused(short_tmp / "d.sock", folder / "memoryd.log")
    assert f"its folder {folder} is writable by other users" in err
    assert not (folder / "memoryd.log").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="another user's folder needs root to make")
def test_a_log_folder_of_another_user_is_refused(short_tmp: Path) -> None:
    folder = short_tmp / "theirs"
    folder.mkdir(mode=0o755)
    os.chown(folder, 65534, 65534)
    err = _refused(short_tmp / "d.sock", folder / "memoryd.log")
    assert f"its folder {folder} belongs to uid 65534, not to you" in err
    assert not (folder / "memoryd.log").exists()


def test_memctl_start_makes_the_log_private_and_never_follows_a_link(short_tmp: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path.cwd() / "clients"), "."])}
    sock = short_tmp / "run" / "memoryd.sock"

    def memctl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memctl", "--socket", str(sock), *args],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            preexec_fn=lambda: os.umask(0o000),
            check=False,
        )

    started = memctl("start")
    try:
        assert started.returncode == 0, started.stderr
        assert _mode(sock.with_name("memoryd.log")) == 0o600
    finally:
        memctl("stop")
    victim = short_tmp / "bashrc"
    victim.write_text("# the user's own file\n")
    sock.with_name("memoryd.log").unlink()
    sock.with_name("memoryd.log").symlink_to(victim)
    refused = memctl("start")
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert "memoryd.log is a symbolic link; it is not followed" in refused.stderr
    assert victim.read_text() == "# the user's own file\n"
