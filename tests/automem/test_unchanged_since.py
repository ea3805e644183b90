"""`fsutil.unchanged_since`: the `still=` check of every rewrite made from a read (an index,
a memory), next to `save_stamp` and `put_back_unless` it pairs with (before session 23 it
was `automem.layout`'s, a file-system helper among the memory dir's layout)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memoryd.fsutil import ChangedMeanwhile, atomic_write_bytes, save_stamp, unchanged_since


def _stamped(path: Path) -> tuple[int, ...] | None:
    return save_stamp(path, follow_links=False)


def test_a_file_nobody_touched_is_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_text("- a\n")
    assert unchanged_since(path, _stamped(path))()
    missing = tmp_path / "none.md"
    assert unchanged_since(missing, _stamped(missing))()


def test_a_save_in_place_by_rename_or_a_removal_is_a_change(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_text("- a\n")
    before = _stamped(path)
    assert before is not None
    still = unchanged_since(path, before)
    # The same size, a later time: an editor's save in place.
    os.utime(path, ns=(before[0] + 10**9, before[0] + 10**9))
    assert not still()

    before = _stamped(path)
    still = unchanged_since(path, before)
    other = tmp_path / "other"
    other.write_text("- a\n")
    os.replace(other, path)  # a save by rename: another inode
    assert not still()

    still = unchanged_since(path, _stamped(path))
    path.unlink()
    assert not still()
    path.write_text("- a\n")  # and one made where there was none
    assert not unchanged_since(path, None)()


def test_a_link_put_in_its_place_is_a_change_not_followed(tmp_path: Path) -> None:
    path, target = tmp_path / "MEMORY.md", tmp_path / "target.md"
    target.write_text("- a\n")
    path.write_text("- a\n")
    still = unchanged_since(path, _stamped(target))
    os.replace(path, tmp_path / "gone")
    path.symlink_to(target)  # what the link leads to is the file stamped: still a change
    assert not still()


def test_a_rewrite_checked_by_it_writes_nothing_over_a_later_save(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_text("- read\n")
    before = _stamped(path)
    path.write_text("- saved meanwhile, longer\n")
    with pytest.raises(ChangedMeanwhile):
        atomic_write_bytes(path, b"- made from the read\n", still=unchanged_since(path, before))
    assert path.read_text() == "- saved meanwhile, longer\n"
