"""The SQLite storage's file and folders: what it creates, and what it leaves alone."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from memoryd_team.storage import default_sqlite_path, open_storage
from memoryd_team.storage.sqlite import SqliteStorage


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def _open_and_close(storage: SqliteStorage) -> None:
    await storage.open()
    await storage.close()


async def test_an_existing_folder_of_an_explicit_path_keeps_its_mode(tmp_path: Path) -> None:
    # A team's shared folder, or a sticky world-writable one like /tmp: not the server's.
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    storage = open_storage(f"sqlite://{shared / 'team.sqlite3'}")
    assert isinstance(storage, SqliteStorage)
    await _open_and_close(storage)
    assert _mode(shared) == 0o1777
    assert _mode(shared / "team.sqlite3") == 0o600


async def test_missing_folders_of_an_explicit_path_are_created_private(tmp_path: Path) -> None:
    before = _mode(tmp_path)
    old_umask = os.umask(0o022)
    try:
        await _open_and_close(SqliteStorage(tmp_path / "a" / "b" / "team.sqlite3"))
    finally:
        os.umask(old_umask)
    assert _mode(tmp_path / "a") == 0o700
    assert _mode(tmp_path / "a" / "b") == 0o700
    assert _mode(tmp_path) == before  # the existing folder above them is left alone


async def test_the_default_data_folder_is_kept_private() -> None:
    # memoryd's own data folder: tightened even when something made it looser.
    folder = default_sqlite_path().parent
    folder.mkdir(parents=True)
    folder.chmod(0o755)
    storage = open_storage(None)
    assert isinstance(storage, SqliteStorage)
    await _open_and_close(storage)
    assert _mode(folder) == 0o700
    assert _mode(folder / "team.sqlite3") == 0o600
