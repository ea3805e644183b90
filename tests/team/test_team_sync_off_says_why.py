"""Team sync that cannot work says so, and why: `status.features.team_sync` with a configuration
problem, and the server's refusal of the token naming the token, the repo binding and which
request (a pull or a push) was refused (it said "refused a push" even for a pull)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from memoryd.core.team_config import TeamConfig
from tests.conftest import DaemonHandle
from tests.team.conftest import REPO
from tests.team.test_team_sync_daemon import make_repo, start
from tests.team_server.conftest import ThreadedServer


@pytest.mark.parametrize(
    ("url", "token"),
    [("http://127.0.0.1:9", None), ("notaurl", "mdt_" + "x" * 20), ("http://h:9", "two words")],
)
async def test_a_configuration_that_cannot_sync_is_not_shown_as_on(
    short_tmp: Path, daemons: list[DaemonHandle], url: str, token: str | None
) -> None:
    handle = await start(short_tmp, "a", url=url, token=token)
    daemons.append(handle)
    team = (await handle.call("status"))["features"]["team_sync"]
    assert team == {"enabled": False, "reason": TeamConfig(url=url, token=token).problem}


async def test_a_token_not_bound_to_the_repo_says_so_and_that_a_pull_was_refused(
    server: ThreadedServer, short_tmp: Path, tmp_path: Path, daemons: list[DaemonHandle]
) -> None:
    handle = await start(short_tmp, "a", url=server.url, token=server.token("other/repo"))
    daemons.append(handle)
    root = make_repo(tmp_path / "proj")
    pulled = await handle.call("team.pull", cwd=str(root))
    assert pulled["http_status"] == 403
    assert pulled["suppressed"] == "http_403"
    pushed = await handle.call("team.push", cwd=str(root))
    assert pushed["ok"] is False
    assert "the server refused a pull" in pushed["error"]
    assert "MEMORYD_TEAM_TOKEN is not bound to this repository" in pushed["error"]
    assert "--repo owner/repo" in pushed["error"]


async def test_a_revoked_token_says_so_and_that_a_push_was_refused(
    server: ThreadedServer, short_tmp: Path, tmp_path: Path, daemons: list[DaemonHandle]
) -> None:
    handle = await start(short_tmp, "a", url=server.url, token=server.token(REPO), debounce_s=30)
    daemons.append(handle)
    root = make_repo(tmp_path / "proj")
    assert (await handle.call("team.pull", cwd=str(root)))["ok"] is True
    (token,) = server.run(server.storage.list_tokens())
    assert server.run(server.storage.revoke_token(token.id, datetime.now(UTC)))
    written = await handle.call(
        "memory.write",
        cwd=str(root),
        type="project",
        name="deploy",
        description="how we deploy",
        body="Through the release branch.\n",
        team=True,
    )
    assert written["warnings"] == []  # not known to be refused yet
    refused = await handle.call("team.push", cwd=str(root))
    assert refused["http_status"] == 401
    again = await handle.call("team.push", cwd=str(root))
    assert "the server refused a push" in again["error"]
    assert "MEMORYD_TEAM_TOKEN was not accepted" in again["error"]
