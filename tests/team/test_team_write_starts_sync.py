"""A team memory written through the daemon starts its project's sync and is pushed within the
debounce — no `get_context` or turn needed first (issue 14)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from memoryd_client import RpcError
from tests.automem.test_memctl import _memctl
from tests.conftest import DaemonHandle, IsolatedEnv
from tests.team.conftest import REPO, eventually, remember_deploy_freeze, server_history
from tests.team.test_team_sync_daemon import make_repo, start, team_dir_of
from tests.team_server.conftest import ThreadedServer


@pytest.fixture
async def synced_daemon(
    server: ThreadedServer, short_tmp: Path, daemons: list[DaemonHandle]
) -> DaemonHandle:
    handle = await start(short_tmp, "a", url=server.url, token=server.token(REPO), debounce_s=0.2)
    daemons.append(handle)
    return handle


async def assert_pushed_soon(server: ThreadedServer, team_dir: Path, path: Path) -> None:
    """A pull, the watcher's start and a debounced push: a few seconds on a slow machine."""
    key = path.relative_to(team_dir).as_posix()
    deadline = time.monotonic() + 5.0
    while key not in await asyncio.to_thread(server_history, server, REPO):
        assert time.monotonic() < deadline, f"{key} was never pushed"
        await asyncio.sleep(0.05)


async def test_memory_write_team_starts_sync_and_pushes(
    server: ThreadedServer, synced_daemon: DaemonHandle, tmp_path: Path, isolated_env: IsolatedEnv
) -> None:
    root = make_repo(tmp_path / "proj")
    written = await synced_daemon.call(
        "memory.write",
        cwd=str(root),
        type="project",
        name="Deploy",
        description="how we deploy",
        body="Deploys go through the release branch.\n",
        team=True,
    )
    assert written["warnings"] == []  # a team server is configured: it will be shared
    await assert_pushed_soon(server, team_dir_of(isolated_env, root), Path(written["path"]))


async def test_memctl_remember_team_starts_sync_and_pushes(
    server: ThreadedServer, synced_daemon: DaemonHandle, tmp_path: Path, isolated_env: IsolatedEnv
) -> None:
    root = make_repo(tmp_path / "proj")
    code, out, err = await _memctl(
        synced_daemon,
        "--json",
        "remember",
        "We release on Thursdays.",
        "--team",
        "--cwd",
        str(root),
    )
    assert code == 0, err
    assert json.loads(out)["warnings"] == []
    await assert_pushed_soon(server, team_dir_of(isolated_env, root), Path(json.loads(out)["path"]))


async def test_a_synced_team_memory_is_not_deleted_behind_the_teams_back(
    server: ThreadedServer, short_tmp: Path, tmp_path: Path, daemons: list[DaemonHandle]
) -> None:
    # Found by the team-memory SPEC audit: memory.delete answered {deleted: true}, the next pull
    # put the file back (deletions do not propagate), and the index line the delete removed was
    # pushed: every teammate's MEMORY.md lost it while the file stayed.
    handle = await start(short_tmp, "a", url=server.url, token=server.token(REPO))
    daemons.append(handle)
    root = make_repo(tmp_path / "clone")
    written = await remember_deploy_freeze(handle, root, body="No deploys on Fridays.")
    await eventually(lambda: "project_deploy_freeze.md" in server_history(server))
    engine = handle.daemon.services.team._folders_by_root[(root.resolve(), root.resolve())].engine
    await eventually(lambda: "project_deploy_freeze.md" in engine.state.synced)  # push settled
    with pytest.raises(RpcError) as refused:
        await handle.call("memory.delete", cwd=str(root), path=written["path"])
    assert refused.value.code == -32002
    assert "deletions do not reach the team server" in refused.value.message
    team = Path(written["path"]).parent
    assert Path(written["path"]).exists()
    assert "project_deploy_freeze.md" in (team / "MEMORY.md").read_text()


async def test_a_team_memory_of_a_folder_that_does_not_sync_is_deleted(
    server: ThreadedServer, short_tmp: Path, tmp_path: Path, daemons: list[DaemonHandle]
) -> None:
    handle = await start(short_tmp, "a", url=server.url, token=server.token(REPO))
    daemons.append(handle)
    root = make_repo(tmp_path / "no-remote", remote=None)  # no_repo: nothing shared
    written = await handle.call(
        "memory.write",
        cwd=str(root),
        type="project",
        name="scratch",
        description="a local team note",
        body="Local only.",
        team=True,
    )
    deleted = await handle.call("memory.delete", cwd=str(root), path=written["path"])
    assert deleted["deleted"] is True
    assert not Path(written["path"]).exists()


async def test_a_team_memory_never_pushed_is_deleted(
    server: ThreadedServer, short_tmp: Path, tmp_path: Path, daemons: list[DaemonHandle]
) -> None:
    # Found by a review: the refusal above also met memories that never reached the server —
    # one the secret scan kept back (its warning says to remove it) and one still waiting in
    # the debounce — and said a pull would bring them back, which it would not.
    handle = await start(short_tmp, "a", url=server.url, token=server.token(REPO), debounce_s=30)
    daemons.append(handle)
    root = make_repo(tmp_path / "clone")
    await handle.call("team.pull", cwd=str(root))
    secret = await handle.call(
        "memory.write",
        cwd=str(root),
        type="reference",
        name="ci key",
        description="the CI key",
        body="AKIAIOSFODNN7EXAMPLQ is the ci key\n",
        team=True,
    )
    waiting = await handle.call(
        "memory.write",
        cwd=str(root),
        type="project",
        name="oops",
        description="wrong scope",
        body="meant to be private\n",
        team=True,
    )
    await handle.call("team.push", cwd=str(root))  # the clean one goes, the secret stays
    assert Path(secret["path"]).name not in server_history(server)
    deleted = await handle.call("memory.delete", cwd=str(root), path=secret["path"])
    assert deleted["deleted"] is True
    assert not Path(secret["path"]).exists()
    with pytest.raises(RpcError) as refused:  # this one reached the server
        await handle.call("memory.delete", cwd=str(root), path=waiting["path"])
    assert refused.value.code == -32002
