"""JSON files memctl reads that nest deeper than Python reads (a damaged status file, hook
state, a transcript line): json's RecursionError was a traceback (found by the session 24
hunt: `memctl status`, `stop` and `start` exited 1 on a status file of 3,000 `[`)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from memctl.claude_code import parse_transcript_lines
from memctl.files import read_json_object
from tests.clients.conftest import run_memctl

DEEP = "[" * 3_000


def test_a_file_nested_too_deep_is_no_json_object(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text(DEEP)
    assert read_json_object(path, 1 << 20) is None


@pytest.mark.parametrize("command", ["status", "stop"])
def test_a_status_file_nested_too_deep_is_no_status(short_tmp: Path, command: str) -> None:
    sock = short_tmp / "d.sock"
    with socket.socket(socket.AF_UNIX) as left:  # a socket file nobody listens on
        left.bind(str(sock))
    sock.with_name("d.sock.status.json").write_text(DEEP)
    done = run_memctl("--socket", str(sock), command)
    assert (done.returncode, done.stderr) == (3, f"memctl: memoryd is not running on {sock}\n")


def test_a_transcript_line_nested_too_deep_is_skipped() -> None:
    line = '{"type": "user", "uuid": "u1", "message": {"role": "user", "content": "hi"}}'
    messages = parse_transcript_lines([DEEP, line])
    assert [m["content"] for m in messages] == [[{"type": "text", "text": "hi"}]]
