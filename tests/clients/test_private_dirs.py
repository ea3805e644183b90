"""Folders memctl creates are 0700, parents included; existing ones keep their mode."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from memoryd_client.private_dirs import make_private_dirs


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_every_folder_created_is_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        shared = tmp_path / "shared"
        shared.mkdir(mode=0o755)
        created = make_private_dirs(shared / "a" / "b" / "c")
    finally:
        os.umask(old)
    assert created == [shared / "a", shared / "a" / "b", shared / "a" / "b" / "c"]
    assert [mode(p) for p in created] == [0o700, 0o700, 0o700]
    assert mode(shared) == 0o755  # not memctl's: left alone
    assert make_private_dirs(shared / "a" / "b") == []


def test_a_file_in_the_way_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    with pytest.raises(FileExistsError):
        make_private_dirs(tmp_path / "afile" / "sub")
