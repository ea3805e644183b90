"""A session's summary.md is created from the template (`fsutil.create_exclusive`); a daemon
killed with SIGKILL while creating it must leave no summary.md or a whole one. Created in
place and then written, a kill in between left an empty (or half) summary.md that every later
update took as the notes (no sections to fill) and that `create_exclusive` never replaced."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd.fsutil import create_exclusive
from memoryd.session.template import builtin_template

CHILD = """
import os, signal, sys
from pathlib import Path
import memoryd.fsutil as fsutil

target, where = Path(sys.argv[1]), sys.argv[2]
def killed(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

setattr(os, where, killed)
fsutil.create_exclusive(target, Path(sys.argv[3]).read_text())
"""


@pytest.mark.parametrize("where", ["fdopen", "fsync"])
def test_a_kill_while_the_summary_is_created_leaves_none_or_a_whole_one(
    tmp_path: Path, where: str
) -> None:
    target = tmp_path / "session-memory" / "summary.md"
    template = tmp_path / "template.md"
    text = builtin_template()
    template.write_text(text)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(target), where, str(template)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert not target.exists() or target.read_text() == text
    # The next update creates it whole (a torn one was never replaced).
    create_exclusive(target, text)
    assert target.read_text() == text


def test_create_exclusive_never_replaces_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "notes" / "summary.md"
    assert create_exclusive(target, "first") is True
    assert create_exclusive(target, "second") is False
    assert target.read_text() == "first"
    assert [p.name for p in target.parent.iterdir()] == ["summary.md"]  # no staged file left
    assert target.stat().st_mode & 0o777 == 0o600
