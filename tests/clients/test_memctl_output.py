"""What memctl writes to a terminal: never a teammate's escape sequence, never a crash.

Found by a bug hunt (session 15): a team memory whose description held OSC 52 (set the
clipboard) and a clear-screen sequence was printed byte for byte; a NUL or half a surrogate
pair in a memory's frontmatter crashed the memory UI, `--list` and `recall`.
"""

from __future__ import annotations

import argparse
import json

import pytest

from memctl.output import emit, fail, one_line, printable


def test_control_characters_are_shown_not_obeyed() -> None:
    hostile = "release\x1b]52;c;cm0gLXJm\x07\x1b[2J\r done\x00\x85 \ud800"
    assert (
        printable(hostile) == "release\\x1b]52;c;cm0gLXJm\\x07\\x1b[2J\\x0d done\\x00\\x85 \ufffd"
    )
    assert printable("line one\n\tline two") == "line one\n\tline two"


def test_emit_writes_hostile_text_and_odd_names_safely(
    capsys: pytest.CaptureFixture[str],
) -> None:
    emit(argparse.Namespace(json=False), {}, "how we release\x1b[2J")
    assert capsys.readouterr().out == "how we release\\x1b[2J\n"
    emit(argparse.Namespace(json=True), {"file": "caf\udce9.md", "name": "a\x1bb"})
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert json.loads(out) == {"file": "caf\udce9.md", "name": "a\x1bb"}


def test_c1_controls_are_escaped_in_json_and_errors_are_printable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Found by a bug hunt: json.dumps escapes only C0, so U+009B (CSI) reached the terminal
    # raw through --json; fail() printed the message as it came.
    emit(argparse.Namespace(json=True), {"name": "a\x9b2Jb\x7f"})
    out = capsys.readouterr().out
    assert "\x9b" not in out
    assert "\x7f" not in out
    assert "\\u009b" in out
    assert json.loads(out) == {"name": "a\x9b2Jb\x7f"}
    assert fail(argparse.Namespace(json=False), "no such file x\x1b]0;t\x07", 2) == 2
    assert capsys.readouterr().err == "memctl: no such file x\\x1b]0;t\\x07\n"
    fail(argparse.Namespace(json=True), "x\x9b", 2)
    out = capsys.readouterr().out
    assert "\x9b" not in out
    assert json.loads(out)["error"] == "x\x9b"


def test_one_line_fields_cannot_be_broken_into_several_lines() -> None:
    # Found by a bug hunt: a memory name with "\n  9. User memory …" posed as an entry of the
    # numbered menu, and a file name with line breaks as extra `memctl watch` notifications.
    name = "alpha\n  9. User memory\r\tx\u2028y\u2029z\x1b[2J\x85"
    shown = one_line(name)
    assert shown == "alpha\\n  9. User memory\\r\\tx\\u2028y\\u2029z\\x1b[2J\\x85"
    assert len(shown.splitlines()) == 1
    assert printable("a\nb") == "a\nb"  # multi-line output keeps its lines
