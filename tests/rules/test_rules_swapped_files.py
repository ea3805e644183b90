"""Instruction files are read through their real path with O_NOFOLLOW|O_NONBLOCK (issue 14): a
symbolic link or FIFO swapped in after the checks is refused, not followed out or waited on;
a CLAUDE.md that is a symlink to a file (as many are) still loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.rules.fsview import FsError
from memoryd.rules.realfs import RealFS
from tests.fakes.swapped_files import fifo_released_later, symlink_out


def test_reading_a_real_path_refuses_a_link_swapped_in(tmp_path: Path) -> None:
    link = symlink_out(tmp_path / "CLAUDE.md", tmp_path / "outside.md")
    with pytest.raises(FsError) as caught:
        RealFS().read_bytes(link, 1000)
    assert caught.value.reason == "unreadable"


def test_reading_a_fifo_swapped_in_does_not_block(tmp_path: Path) -> None:
    with pytest.raises(FsError) as caught:
        RealFS().read_bytes(fifo_released_later(tmp_path / "CLAUDE.md"), 1000)
    assert caught.value.reason == "not_a_file"
