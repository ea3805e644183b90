"""One `fsync_dir` (memoryd_client.durable) for memctl's atomic writes and the daemon's: memctl
had a copy of its own, which could drift from the daemon's rule."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

import memoryd.fsutil
from memctl import files
from memoryd_client import durable


def test_memctl_and_the_daemon_share_one_fsync_dir() -> None:
    assert memoryd.fsutil.fsync_dir is durable.fsync_dir
    assert not hasattr(files, "_fsync_dir")
    assert files.fsync_dir is durable.fsync_dir


def test_fsync_dir_syncs_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[bool] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    durable.fsync_dir(tmp_path)
    assert synced == [True]


def test_fsync_dir_is_best_effort(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    durable.fsync_dir(tmp_path / "gone")  # cannot be opened: nothing raised

    def refuse(fd: int) -> None:
        raise OSError(22, "Invalid argument")  # a filesystem that cannot sync a folder

    monkeypatch.setattr(os, "fsync", refuse)
    durable.fsync_dir(tmp_path)


def test_a_fifo_in_place_of_the_folder_returns_at_once(tmp_path: Path) -> None:
    # A plain open of a FIFO waits for a writer: a FIFO swapped in for a folder held the
    # fsync (and the team pull that asked for it) for ever. Run in a thread so the test ends.

    fifo = tmp_path / "folder"
    os.mkfifo(fifo)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (durable.fsync_dir(fifo), done.set()), daemon=True)
    worker.start()
    assert done.wait(10), "fsync_dir blocked on a FIFO"
