"""memctl writing to a standard output that refuses the bytes (`> /dev/full`: ENOSPC, as EIO,
EDQUOT or EFBIG would) or whose reader is gone (a closed pipe).

Found by a bug hunt: recall, call, watch and `--json status` ended in an `OSError: [Errno 28]`
traceback out of the write, and `--help` exited 0 as if it had been read. Now each says once
on stderr that it cannot write standard output and exits 1, with nothing more from the
interpreter's own flush at exit; a closed pipe stays a quiet exit 0. Standard error on a full
disk (or a terminal gone) drops what cannot be written: it was an OSError that ended `watch`
and made a usage error exit 1.
"""

from __future__ import annotations

import array
import fcntl
import json
import os
import subprocess
import sys
import termios
import time

import pytest

from tests.clients.conftest import memctl_env
from tests.clients.fake_daemon import FakeDaemon

F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)  # Linux
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


def _memctl(
    fake: FakeDaemon, args: list[str], stdout: int, buffered: bool, stderr: int = subprocess.PIPE
) -> tuple[int, str | None]:
    socket = str(fake.socket_path) if args != ["--json", "status"] else str(fake.socket_path) + "x"
    done = subprocess.run(
        [sys.executable, "-m", "memctl", "--socket", socket, *args],
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
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


def _watch(fake: FakeDaemon, stdout: int, stderr: int, buffered: bool) -> tuple[int, str, str]:
    """`memctl watch --count 1` until one notification, then its exit code, stdout, stderr."""
    command = [sys.executable, "-m", "memctl", "--socket", str(fake.socket_path), "watch"]
    proc = subprocess.Popen(
        [*command, "--count", "1"],
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        text=True,
        env=_env(buffered),
    )
    try:
        fake.wait_for_subscriber(timeout=60)
        fake.notify("memory/saved", {"path": "/m/tabs.md"})
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return proc.returncode, out, err


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
def test_watch_on_a_full_disk(fake_daemon: FakeDaemon, buffered: bool) -> None:
    with open("/dev/full", "w") as full:
        code, _, err = _watch(fake_daemon, full.fileno(), subprocess.PIPE, buffered)
    assert code == 1
    assert err.splitlines()[1:] == [FULL.strip()]  # after "watching memory/saved (Ctrl-C …)"


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
def test_a_usage_error_keeps_its_exit_code_when_stderr_is_full(
    fake_daemon: FakeDaemon, buffered: bool
) -> None:
    # Empty standard input: "nothing to recall", exit 2.
    with open("/dev/full", "w") as full:
        code, err = _memctl(fake_daemon, ["recall", "-"], subprocess.PIPE, buffered, full.fileno())
    assert (code, err) == (2, None)


def test_watch_prints_its_notifications_when_stderr_is_full(fake_daemon: FakeDaemon) -> None:
    # Its "watching …" notice goes to stderr.
    with open("/dev/full", "w") as full:
        code, out, _ = _watch(fake_daemon, subprocess.PIPE, full.fileno(), buffered=True)
    assert (code, out) == (0, "memory saved: tabs.md\n")


def _pipe_is_full_or_done(read_end: int, proc: subprocess.Popen[bytes]) -> bool:
    queued = array.array("i", [0])
    fcntl.ioctl(read_end, termios.FIONREAD, queued)
    return queued[0] >= fcntl.fcntl(read_end, F_GETPIPE_SZ) or proc.poll() is not None


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
def test_a_non_blocking_stdout_gets_everything(fake_daemon: FakeDaemon, buffered: bool) -> None:
    # Found by a bug hunt (session 23): stdout left non-blocking by whoever shares it (a
    # Node.js parent, a terminal a crashed program left so), with a reader slower than memctl:
    # once the pipe was full a write was EAGAIN, a traceback, and unbuffered the rest was
    # dropped with exit 0.
    big = "lorem ipsum " * 100_000
    fake_daemon.on("status", {"text": big})
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memctl",
                "--socket",
                str(fake_daemon.socket_path),
                "call",
                "status",
                "{}",
            ],
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=_env(buffered),
        )
    finally:
        os.close(write_end)
    try:
        deadline = time.monotonic() + 60
        # The reader starts once memctl has filled the pipe (or given up on it).
        while not _pipe_is_full_or_done(read_end, proc) and time.monotonic() < deadline:
            time.sleep(0.01)
        with os.fdopen(read_end, "rb") as reader:
            out = reader.read()
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert (proc.returncode, err) == (0, b"")
    assert json.loads(out) == {"text": big}
