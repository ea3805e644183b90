"""The team folder's files are opened with O_NOFOLLOW|O_NONBLOCK after the scan (issue 14): a
FIFO or a symbolic link swapped in for a scanned file neither hangs the sync nor is uploaded."""

from __future__ import annotations

import os
from pathlib import Path

from memoryd.team.sync.localfs import LocalFolder, LocalScan
from tests.fakes.swapped_files import fifo_released_later, symlink_out


def test_a_file_swapped_for_a_fifo_after_its_stat_is_not_read(tmp_path: Path) -> None:
    team = tmp_path / "team"
    team.mkdir()
    (team / "a.md").write_text("a\n")
    st = os.stat(team / "a.md")  # what the scan saw
    (team / "a.md").unlink()
    fifo_released_later(team / "a.md")
    result = LocalScan()
    LocalFolder(team)._scan_file(str(team / "a.md"), "a.md", st, result, set())
    assert "a.md" not in result.checksums
    assert "a.md" in result.invalid


def test_a_file_swapped_for_a_link_out_after_its_stat_is_not_uploaded(tmp_path: Path) -> None:
    team = tmp_path / "team"
    team.mkdir()
    (team / "a.md").write_text("a\n")
    st = os.stat(team / "a.md")
    symlink_out(team / "a.md", tmp_path / "secret.txt")
    result = LocalScan()
    LocalFolder(team)._scan_file(str(team / "a.md"), "a.md", st, result, set())
    assert "SECRET" not in str(result.contents)
    assert "a.md" in result.invalid
