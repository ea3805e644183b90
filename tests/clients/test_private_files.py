"""`open_private_log` checks the log's folder itself: the daemon's `--log-file` and
`memctl start` each checked it before calling, so a third caller could open a log in a folder
anyone may write in (and where anyone could swap the log for a link)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from memoryd_client.private_files import UnsafeFolder, open_private_log


def test_a_folder_others_may_write_in_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)  # not sticky
    with pytest.raises(UnsafeFolder) as refused:
        open_private_log(folder / "memoryd.log")
    assert refused.value.errno == errno.EPERM
    assert refused.value.problem == f"its folder {folder} is writable by other users"
    assert refused.value.strerror == f"{refused.value.problem}; use a folder of your own"
    assert not (folder / "memoryd.log").exists()


def test_a_sticky_shared_folder_and_a_private_one_are_fine(tmp_path: Path) -> None:
    for mode in (0o1777, 0o700):
        folder = tmp_path / f"f{mode:o}"
        folder.mkdir()
        folder.chmod(mode)
        fd = open_private_log(folder / "memoryd.log")
        try:
            assert (folder / "memoryd.log").is_file()
        finally:
            os.close(fd)
