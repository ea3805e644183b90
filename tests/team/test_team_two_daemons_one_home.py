"""Two daemons of one user on one HOME (two sockets: a login service and one started by hand)
syncing the same team folder: they share its sync state file, so each must see what the
other pulled and pushed."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.conftest import DaemonHandle, IsolatedEnv
from tests.team.conftest import REPO, SideFactory, eventually, seed_server, server_history
from tests.team.test_team_sync_daemon import make_repo, start, team_dir_of
from tests.team_server.conftest import ThreadedServer


async def two_daemons_on_one_clone(
    server: ThreadedServer,
    short_tmp: Path,
    tmp_path: Path,
    isolated_env: IsolatedEnv,
    daemons: list[DaemonHandle],
) -> tuple[Path, Path, list[DaemonHandle]]:
    """One clone, two daemons of one HOME, both pulled: (the clone, its team folder, them)."""
    token = server.token(REPO)
    root = make_repo(tmp_path / "clone")
    handles = [await start(short_tmp, f"d{i}", url=server.url, token=token) for i in range(2)]
    daemons.extend(handles)
    for handle in handles:
        await handle.call("team.pull", cwd=str(root))
    return root, team_dir_of(isolated_env, root), handles


async def test_two_daemons_on_one_home_share_one_folder_without_conflicts(
    server: ThreadedServer,
    short_tmp: Path,
    tmp_path: Path,
    isolated_env: IsolatedEnv,
    daemons: list[DaemonHandle],
) -> None:
    root, team, handles = await two_daemons_on_one_clone(
        server, short_tmp, tmp_path, isolated_env, daemons
    )
    texts = []
    for version in range(6):
        text = f"the deploy rule, version {version}\n"
        (team / "deploy.md").write_text(text)
        texts.append(text)
        await eventually(lambda text=text: text in server_history(server).get("deploy.md", []))
        await asyncio.sleep(0.3)  # both watchers have looked
    for handle in handles:
        await handle.call("team.pull", cwd=str(root))
    await asyncio.sleep(0.5)
    assert (team / "deploy.md").read_text() == texts[-1]
    assert sorted(p.name for p in team.glob("*.conflict-*")) == []
    assert server_history(server)["deploy.md"] == texts
    statuses = [await h.call("team.status", cwd=str(root)) for h in handles]
    assert [s["conflicts"] for s in statuses] == [[], []]


async def test_an_edit_made_on_what_one_daemon_pulled_is_no_conflict_for_the_other(
    server: ThreadedServer,
    make_side: SideFactory,
    short_tmp: Path,
    tmp_path: Path,
    isolated_env: IsolatedEnv,
    daemons: list[DaemonHandle],
) -> None:
    token = server.token(REPO)
    await seed_server(make_side, server, token, {"deploy.md": "v1\n"})
    root, team, handles = await two_daemons_on_one_clone(
        server, short_tmp, tmp_path, isolated_env, daemons
    )
    mate = make_side("mate", server.url, token)
    for round_ in range(4):
        await mate.engine.pull()
        mate.write("deploy.md", f"teammate {round_}\n")
        await mate.engine.push()
        await handles[round_ % 2].call("team.pull", cwd=str(root))
        mine = f"mine {round_}, on the teammate's\n"
        (team / "deploy.md").write_text(mine)
        await eventually(lambda mine=mine: mine in server_history(server).get("deploy.md", []))
        await asyncio.sleep(0.4)
    conflicts = sorted(p.name for p in team.glob("*.conflict-*"))
    assert conflicts == []
    assert (team / "deploy.md").read_text() == "mine 3, on the teammate's\n"
