"""Team server storage: pick SQLite or PostgreSQL from a database URL.

`sqlite:///abs/path.sqlite3` (or a bare path), `postgresql://…` / `postgres://…`; no URL means
the zero-config SQLite file `team.sqlite3` in memoryd's data dir.
"""

from __future__ import annotations

from pathlib import Path

from memoryd import paths
from memoryd_team.storage.base import Storage

DATABASE_ENV = "MEMORYD_TEAM_DATABASE"
# Seconds each wait on PostgreSQL may take (`serve --database-timeout`).
DATABASE_TIMEOUT_ENV = "MEMORYD_TEAM_DATABASE_TIMEOUT"


def default_sqlite_path() -> Path:
    return paths.data_dir() / "team.sqlite3"


def open_storage(url: str | None, *, timeout_s: float | None = None) -> Storage:
    """A not-yet-opened Storage for `url`; raises ValueError for a URL it cannot use.
    `timeout_s` bounds each wait on PostgreSQL (default: 5 s); SQLite has no such waits."""
    if url is None or not url.strip():
        return _sqlite(default_sqlite_path(), own_folder=True)
    url = url.strip()
    if url.startswith(("postgresql://", "postgres://")):
        # Imported only here: SQLite users never load the PostgreSQL driver.
        from memoryd_team.storage.postgres import PostgresStorage

        if timeout_s is None:
            return PostgresStorage(url)
        return PostgresStorage(url, timeout_s=timeout_s)
    if url.startswith("sqlite://"):
        raw = url.removeprefix("sqlite://")
        if not raw.startswith("/"):
            raise ValueError(f"sqlite URL needs an absolute path (sqlite:///path): {url!r}")
        path = raw
    elif "://" in url:
        scheme = url.split("://", 1)[0]
        raise ValueError(f"unsupported database scheme {scheme!r}: use sqlite:/// or postgresql://")
    else:
        path = url
    if "\0" in path:
        raise ValueError("database path contains NUL")
    return _sqlite(Path(path).expanduser())


def _sqlite(path: Path, *, own_folder: bool = False) -> Storage:
    from memoryd_team.storage.sqlite import SqliteStorage

    return SqliteStorage(path, own_folder=own_folder)
