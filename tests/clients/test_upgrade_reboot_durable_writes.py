"""What `memctl service install` and `memctl claude-code install` write survives a power cut
right after they return: the file is synced before the rename and its folder after it (without
the folder's sync the rename could be lost, and the next boot had no unit, or no hooks)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from memctl import files


def _synced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    kinds: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        kinds.append("folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return kinds


def test_a_durable_write_syncs_the_file_then_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kinds = _synced(monkeypatch)
    target = tmp_path / "units" / "memoryd.service"
    files.write_atomic(target, "[Service]\n")
    assert target.read_text() == "[Service]\n"
    assert kinds == ["file", "folder"]


def test_a_cache_write_syncs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kinds = _synced(monkeypatch)
    files.write_atomic(tmp_path / "hooks" / "s.json", "{}", durable=False)
    assert kinds == []
