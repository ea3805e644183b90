"""A daemon that runs for months and its log file: moved away (logrotate's default `create`
mode) or removed to give its room back, the daemon wrote on into the old or deleted file for
the rest of its life and nothing appeared at the path again; and the file grew without end.
The next line now starts a new file at the path (with the same checks as at start-up), and
over `MAX_LOG_BYTES` the file is moved to `<name>.1`."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memoryd.daemon import logging as daemon_logging
from memoryd.daemon.logging import LogFile
from memoryd_client import Client
from tests.conftest import IsolatedEnv
from tests.daemon.test_lifecycle import spawn_daemon, wait_healthy


def _events(path: Path) -> list[str]:
    return [json.loads(line)["event"] for line in path.read_text().splitlines()]


@pytest.mark.parametrize("how", ["moved", "removed"])
def test_a_log_moved_or_removed_is_started_again_at_its_path(
    short_tmp: Path, isolated_env: IsolatedEnv, how: str
) -> None:
    sock, log = short_tmp / "d.sock", short_tmp / "logs" / "memoryd.log"
    proc = spawn_daemon(sock, "--log-file", str(log))
    try:
        wait_healthy(sock)
        project = isolated_env.root / "work" / "p"
        project.mkdir(parents=True)
        with Client(sock, timeout=10) as conn:
            memory_dir = Path(conn.call("get_context", {"cwd": str(project)})["memory_dir"])
            if how == "moved":
                log.rename(log.with_name("memoryd.log.1"))
            else:
                log.unlink()
            memory_dir.mkdir(parents=True, exist_ok=True)
            (memory_dir / "by_hand.md").write_text(
                "---\nname: by hand\ndescription: d\ntype: user\n---\nwritten by hand\n"
            )
            # Indexing the file written by hand logs a warning.
            conn.call("recall", {"cwd": str(project), "query": "by hand", "selector": "local"})
        deadline = time.monotonic() + 10
        while not log.exists() or "without an index line" not in log.read_text():
            assert time.monotonic() < deadline, "the next line never reached the log's path"
            time.sleep(0.05)
        assert stat.S_IMODE(log.stat().st_mode) == 0o600
    finally:
        proc.terminate()
        proc.wait(20)


def test_a_log_over_the_cap_is_moved_aside_between_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(daemon_logging, "MAX_LOG_BYTES", 1000)
    path = tmp_path / "logs" / "memoryd.log"
    log = LogFile(path)
    try:
        for i in range(50):
            log.write(json.dumps({"event": f"line {i:02d}", "pad": "x" * 40}))
            log.write("\n")  # as print() writes a line: the text, then its newline
            log.flush()
    finally:
        log.close()
    older = path.with_name("memoryd.log.1")
    assert path.stat().st_size < 1000 + 100
    assert older.stat().st_size < 1000 + 100
    kept = _events(older) + _events(path)  # whole lines only, the newest ones, in order
    assert kept == [f"line {i:02d}" for i in range(50 - len(kept), 50)]
    assert not list(tmp_path.glob("logs/memoryd.log.2"))


def test_a_link_put_at_the_path_is_not_followed(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "memoryd.log"
    log = LogFile(path)
    try:
        log.write("first\n")
        path.unlink()
        target = tmp_path / "elsewhere.txt"
        target.write_text("")
        path.symlink_to(target)
        log.write("second\n")
        log.flush()
    finally:
        log.close()
    assert target.read_text() == ""  # refused as at start-up: the line went to the open file


def test_stdout_and_stderr_follow_the_log_when_they_wrote_to_it(tmp_path: Path) -> None:
    # Found by a review: `memctl start` hands the daemon its log file as stdout and stderr;
    # the daemon reopened its own handle, but fds 1 and 2 stayed on the deleted file.
    path = tmp_path / "logs" / "memoryd.log"
    script = f"""
import os, sys
from pathlib import Path
from memoryd.daemon.logging import LogFile, open_log_file
path = Path({str(path)!r})
std = open_log_file(path)
os.dup2(std.fileno(), 1); os.dup2(std.fileno(), 2)
log = LogFile(path)
log.write("first\\n")
path.unlink()
log.write("second\\n")
sys.stderr.write("a traceback, say\\n"); sys.stderr.flush()
print(os.readlink("/proc/self/fd/2"), file=open({str(tmp_path / "fd2")!r}, "w"))
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert path.read_text() == "second\na traceback, say\n"
    assert not (tmp_path / "fd2").read_text().strip().endswith("(deleted)")
