"""Team server storage: pick SQLite or PostgreSQL from a database URL.

`sqlite:///abs/path.sqlite3` (or a bare path), `postgresql://…` / `postgres://…`; no URL means
the zero-config SQLite file `team.sqlite3` in memoryd's data dir.
"""

from __future__ import annotations

from pathlib import Path

from memoryd import paths
from memoryd_team.storage.base import Storage

DATABASE_ENV = "MEMORYD_TEAM_DATABASE"


def default_sqlite_path() -> Path:
    return paths.data_dir() / "team.sqlite3"


def open_storage(url: str | None) -> Storage:
    """A not-yet-opened Storage for `url`; raises ValueError for a URL it cannot use."""
    if url is None or not url.strip():
        return _sqlite(default_sqlite_path(), own_folder=True)
    url = url.strip()
    if url.startswith(("postgresql://", "postgres://")):
        # Imported only here: SQLite users never load the PostgreSQL driver.
        from memoryd_team.storage.postgres import PostgresStorage

        return PostgresStorage(url)
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
