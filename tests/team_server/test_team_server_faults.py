"""The server when its database goes away: a retryable 503 in JSON, never a hang or a crash."""

from __future__ import annotations

import pytest

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
