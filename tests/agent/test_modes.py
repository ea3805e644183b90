"""One rule for the permission bits of a rewritten file: memoryd's own writes of memories and
indexes (`automem.layout.kept_mode`) and an agent's writes (`agent.tools.perform`) keep the
same bits of each file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from memoryd.agent.modes import rewrite_mode
from memoryd.agent.tools import WriteOp, perform
from memoryd.automem.layout import kept_mode
from memoryd.fsutil import save_stamp


@pytest.mark.parametrize(
    ("mode", "kept"),
    [(0o600, 0o600), (0o644, 0o644), (0o664, 0o664), (0o666, 0o664), (0o4777, 0o775)],
)
def test_both_writers_keep_the_same_bits(tmp_path: Path, mode: int, kept: int) -> None:
    memory = tmp_path / "user_a.md"
    memory.write_text("old\n")
    memory.chmod(mode)
    assert rewrite_mode(os.stat(memory)) == kept
    assert kept_mode(memory) == kept
    perform(
        WriteOp(memory, "new\n", created=False, planned_over=save_stamp(memory, follow_links=False))
    )
    assert stat.S_IMODE(memory.stat().st_mode) == kept


def test_what_is_no_file_gets_a_new_files_bits(tmp_path: Path) -> None:
    assert rewrite_mode(os.stat(tmp_path)) == 0o600
    assert kept_mode(tmp_path) == 0o600
    assert kept_mode(tmp_path / "missing.md") == 0o600
