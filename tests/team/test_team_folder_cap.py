"""At most MAX_SYNCING_FOLDERS team folders sync (and watch) at once: each held an inotify
instance and two threads for the daemon's life, one per project ever opened. The least
recently used idle one stops; its project's next use starts it again, losing nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.team import service as team_service
from tests.conftest import DaemonHandle, IsolatedEnv, stop_daemon
from tests.team.conftest import REPO, eventually, server_history
from tests.team.test_team_sync_daemon import make_repo, start, team_dir_of
from tests.team_server.conftest import ThreadedServer


async def test_idle_folders_beyond_the_cap_stop_and_come_back_when_used(
    server: ThreadedServer,
    short_tmp: Path,
    tmp_path: Path,
    isolated_env: IsolatedEnv,
    daemons: list[DaemonHandle],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(team_service, "MAX_SYNCING_FOLDERS", 3)
    token = server.token(REPO)
    handle = await start(short_tmp, "a", url=server.url, token=token)
    daemons.append(handle)
    team = handle.daemon.services.team
    roots = [make_repo(tmp_path / f"clone{i}") for i in range(6)]
    for root in roots:
        await handle.call("team.pull", cwd=str(root))  # started, pulled, idle
        await handle.call("team.status", cwd=str(root))  # one more use: sheds the oldest
    await eventually(lambda: not team._retiring)
    assert team.feature_status()["team_sync"]["folders"] == 3
    watching = {f.engine.folder.team_dir for f in team._folders.values()}
    assert watching == {team_dir_of(isolated_env, r) for r in roots[3:]}

    # The first clone's folder stopped watching; an edit there is pushed once it is used.
    first = team_dir_of(isolated_env, roots[0])
    (first / "runbook.md").write_text("restart the queue before the cache\n")
    await handle.call("get_context", cwd=str(roots[0]))
    await eventually(lambda: "runbook.md" in server_history(server))
    assert server_history(server)["runbook.md"] == ["restart the queue before the cache\n"]
    await eventually(lambda: not team._retiring)
    assert team.feature_status()["team_sync"]["folders"] <= 3


async def test_a_folder_with_something_to_push_is_never_stopped(
    server: ThreadedServer,
    short_tmp: Path,
    tmp_path: Path,
    isolated_env: IsolatedEnv,
    daemons: list[DaemonHandle],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(team_service, "MAX_SYNCING_FOLDERS", 1)
    handle = await start(short_tmp, "a", url=server.url, token=server.token(REPO), debounce_s=30)
    daemons.append(handle)
    team = handle.daemon.services.team
    busy = make_repo(tmp_path / "busy")
    await handle.call("team.pull", cwd=str(busy))
    (team_dir_of(isolated_env, busy) / "draft.md").write_text("not pushed yet\n")
    await eventually(lambda: not next(iter(team._folders.values())).runner.idle)
    other = make_repo(tmp_path / "other")
    await handle.call("team.pull", cwd=str(other))
    await handle.call("team.status", cwd=str(other))
    await eventually(lambda: not team._retiring)
    kept = {f.engine.folder.team_dir for f in team._folders.values()}
    assert team_dir_of(isolated_env, busy) in kept  # its edit waits in the debounce


async def test_folders_resumed_at_start_are_held_to_the_cap_too(
    server: ThreadedServer,
    short_tmp: Path,
    tmp_path: Path,
    daemons: list[DaemonHandle],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Found by a review: the cap was applied only when a folder was made, and a daemon's start
    # resumes every saved folder at once, each watching, beyond it.
    token = server.token(REPO)
    first = await start(short_tmp, "a", url=server.url, token=token)
    for i in range(6):
        await first.call("team.pull", cwd=str(make_repo(tmp_path / f"clone{i}")))
    await stop_daemon(first)
    monkeypatch.setattr(team_service, "MAX_SYNCING_FOLDERS", 3)
    second = await start(short_tmp, "b", url=server.url, token=token)
    daemons.append(second)
    team = second.daemon.services.team

    def resuming() -> bool:
        return any(t.get_name() == "worker:startup:resume_team_sync" for t in second.daemon.workers)

    await eventually(lambda: not resuming())  # every saved folder made and started

    def settled() -> bool:
        started = [f.start_task for f in team._folders.values()]
        return bool(started) and all(t is None or t.done() for t in started)

    await eventually(lambda: settled() and not team._shedding and not team._retiring)
    assert len(team._folders) == 3
