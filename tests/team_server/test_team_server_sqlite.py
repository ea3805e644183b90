"""The SQLite storage's file and folders: what it creates, and what it leaves alone."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from memoryd_team.storage import default_sqlite_path, open_storage
from memoryd_team.storage.sqlite import SqliteStorage
from tests.team_server.test_team_server_cli import team


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


async def test_opening_an_up_to_date_database_does_not_wait_for_a_writer(tmp_path: Path) -> None:
    """Every command and every worker opens the database: once it is migrated, that is a read,
    never SQLite's write lock (a `token list` queued behind the server's writers)."""
    path = tmp_path / "team.sqlite3"
    await _open_and_close(SqliteStorage(path))
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        storage = SqliteStorage(path, busy_timeout_s=0.2)
        await storage.open()
        try:
            assert storage.migrations_applied == []
            assert await storage.list_tokens() == []
        finally:
            await storage.close()
    finally:
        writer.execute("ROLLBACK")
        writer.close()


@pytest.mark.parametrize("where", ["a folder", "under a file"])
def test_a_path_that_cannot_be_the_database_is_one_line_and_exit_2(
    tmp_path: Path, where: str
) -> None:
    (tmp_path / "file").write_text("x")
    path = tmp_path if where == "a folder" else tmp_path / "file" / "team.sqlite3"
    result = team("token", "list", "--database", f"sqlite://{path}", check=False)
    assert result.returncode == 2
    culprit = tmp_path if where == "a folder" else tmp_path / "file"
    assert result.stderr.startswith(f"memoryd-team: database: sqlite: {culprit}: ")
    assert result.stderr.count("\n") == 1
