"""memctl writing to a standard output that refuses the bytes (`> /dev/full`: ENOSPC, as EIO,
EDQUOT or EFBIG would) or whose reader is gone (a closed pipe).

Found by a bug hunt: recall, call, watch and `--json status` ended in an `OSError: [Errno 28]`
traceback out of the write, and `--help` exited 0 as if it had been read. Now each says once
on stderr that it cannot write standard output and exits 1, with nothing more from the
interpreter's own flush at exit; a closed pipe stays a quiet exit 0.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.clients.conftest import memctl_env
from tests.clients.fake_daemon import FakeDaemon

FULL = "memctl: cannot write standard output: No space left on device\n"
MEMORY = {"path": "/m/tabs.md", "name": "Tabs", "type": "feedback", "content": "use tabs"}
COMMANDS = [
    ["recall", "tabs"],
    ["recall", "--json", "tabs"],
    ["call", "status", "{}"],
    ["--json", "status"],  # the daemon's answer is an error here: it goes to stdout too
    ["--help"],
    ["--version"],
    ["--json", "no-such-command"],  # a usage error as JSON on stdout
]


def _env(buffered: bool) -> dict[str, str]:
    # Unbuffered, the write itself fails; buffered, only the flush of what is left does.
    env = memctl_env()
    env.pop("PYTHONUNBUFFERED", None)
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    return env


def _memctl(fake: FakeDaemon, args: list[str], stdout: int, buffered: bool) -> tuple[int, str]:
    socket = str(fake.socket_path) if args != ["--json", "status"] else str(fake.socket_path) + "x"
    done = subprocess.run(
        [sys.executable, "-m", "memctl", "--socket", socket, *args],
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(buffered),
        timeout=60,
        check=False,
    )
    return done.returncode, done.stderr


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_full_disk_is_said_once(fake_daemon: FakeDaemon, args: list[str], buffered: bool) -> None:
    fake_daemon.on("recall", {"memories": [MEMORY], "selector": "local"})
    fake_daemon.on("status", {"version": "0", "pid": 1})
    with open("/dev/full", "w") as full:
        code, err = _memctl(fake_daemon, args, full.fileno(), buffered)
    assert (code, err) == (1, FULL)


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_closed_pipe_is_a_quiet_exit_0(
    fake_daemon: FakeDaemon, args: list[str], buffered: bool
) -> None:
    fake_daemon.on("recall", {"memories": [MEMORY], "selector": "local"})
    fake_daemon.on("status", {"version": "0", "pid": 1})
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader left before the first byte: every write is EPIPE
    try:
        code, err = _memctl(fake_daemon, args, write_end, buffered)
    finally:
        os.close(write_end)
    assert (code, err) == (0, "")


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
def test_watch_on_a_full_disk(fake_daemon: FakeDaemon, buffered: bool) -> None:
    with open("/dev/full", "w") as full:
        proc = subprocess.Popen(
            [sys.executable, "-m", "memctl", "--socket", str(fake_daemon.socket_path), "watch"],
            stdin=subprocess.DEVNULL,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(buffered),
        )
    try:
        fake_daemon.wait_for_subscriber(timeout=60)
        fake_daemon.notify("memory/saved", {"path": "/m/tabs.md"})
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 1
    assert err.splitlines()[1:] == [FULL.strip()]  # after "watching memory/saved (Ctrl-C …)"
