"""The server when its database goes away: a retryable 503 in JSON, never a hang or a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd_team.storage.base import StorageUnavailable
from memoryd_team.storage.sqlite import SqliteStorage
from tests.team_server.conftest import Repo
from tests.team_server.pg import PgCluster


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_a_dropped_database_is_503_and_the_server_keeps_serving(
    repo: Repo, pg_cluster: PgCluster
) -> None:
    assert repo.put({"a.md": "1"}).status_code == 200
    name = repo.server.database_url.rsplit("/", 1)[1]
    pg_cluster.drop_database(name)
    for _ in range(3):
        reply = repo.get()
        assert reply.status_code == 503
        assert reply.json()["error"] == "storage_unavailable"
    assert repo.http.get("/healthz").status_code == 200
    pg_cluster.create_database(name)  # so the fixture's teardown finds it


async def test_a_sqlite_file_that_is_not_a_database_fails_open_and_leaves_nothing_open(
    tmp_path: Path,
) -> None:
    path = tmp_path / "team.sqlite3"
    path.write_bytes(b"this is not a sqlite database, just some bytes " * 100)
    storage = SqliteStorage(path)
    with pytest.raises(StorageUnavailable):
        await storage.open()
    assert storage._executor is None  # the thread pool was shut down
    assert storage._connections == []
