"""`memctl recall -`, `remember -` and `call METHOD -` fed more standard input than the daemon
takes on one line.

Found by a bug hunt: standard input was read whole, so `memctl recall - < /dev/zero` ended in a
MemoryError traceback, or took the machine's memory first. Now it is read a chunk at a time and
refused past the daemon's line cap: exit 2, "standard input is over 64 MiB", nothing sent.
"""

from __future__ import annotations

import io
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from memctl.output import UsageError
from memctl.text_input import read_text
from memoryd.daemon.limits import DEFAULT_LINE_LIMIT, MiB
from memoryd_client.client import MAX_LINE_BYTES
from tests.clients.conftest import memctl_env
from tests.clients.fake_daemon import FakeDaemon

# An endless writer: memctl must stop reading it, not run out of memory.
ENDLESS = (
    "import sys\nchunk = b'tabs ' * 200_000\nwhile True:\n    sys.stdout.buffer.write(chunk)\n"
)
ADDRESS_SPACE = 1024 * MiB  # the old memctl, reading all of it, stops at this, not the machine's


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def test_the_cap_is_the_daemons_line_cap() -> None:
    assert MAX_LINE_BYTES == DEFAULT_LINE_LIMIT


@pytest.mark.parametrize(
    ("args", "method"),
    [
        (["recall", "-"], "recall"),
        (["remember", "-"], "memory.remember"),
        (["call", "x", "-"], "x"),
    ],
)
@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["text", "json"])
def test_endless_standard_input_is_refused(
    fake_daemon: FakeDaemon, args: list[str], method: str, json_flag: list[str]
) -> None:
    flags = [*json_flag, *args]
    writer = subprocess.Popen(
        [sys.executable, "-c", ENDLESS], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        done = subprocess.run(
            [sys.executable, "-m", "memctl", "--socket", str(fake_daemon.socket_path), *flags],
            stdin=writer.stdout,
            capture_output=True,
            text=True,
            env=memctl_env(),
            preexec_fn=_limit_memory,
            timeout=120,
            check=False,
        )
    finally:
        writer.kill()
        writer.wait()
        assert writer.stdout is not None
        writer.stdout.close()
    assert done.returncode == 2, done.stderr
    said = "standard input is over 64 MiB"
    if json_flag:
        assert (done.stdout, done.stderr) == (f'{{"error": "{said}", "exit_code": 2}}\n', "")
    else:
        assert (done.stdout, done.stderr) == ("", f"memctl: {said}\n")
    assert fake_daemon.calls(method) == []


def test_standard_input_at_the_cap_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # A query of exactly the cap is read (the daemon, not memctl, says a request is too long).
    text = "é" * (MAX_LINE_BYTES // 2)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    assert read_text("-") == text
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode() + b"\n")))
    with pytest.raises(UsageError, match=r"^standard input is over 64 MiB$"):
        read_text("-")


def test_standard_input_that_cannot_be_read_is_said(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    # Found by a bug hunt (session 23): standard input opened for writing only (`<&3` of a
    # `3>file`) was an OSError (EBADF) traceback; a terminal gone (EIO) would be the same.
    with open(tmp_path / "out", "wb") as write_only:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "memctl",
                "--socket",
                str(fake_daemon.socket_path),
                "recall",
                "-",
            ],
            stdin=write_only,
            capture_output=True,
            text=True,
            env=memctl_env(),
            timeout=60,
            check=False,
        )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "memctl: cannot read standard input: Bad file descriptor\n"
    assert fake_daemon.calls("recall") == []
