"""Team sync in a repository whose worktrees choose different memory dirs (fa434e7): a
worktree whose `settings.local.json` names a dir of its own has a team folder of its own.
The folders were kept per repository root, so whichever worktree came first took the map's
one place, and the other's team memories never reached the server (nor said why)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.automem.conftest import git, two_worktrees
from tests.conftest import DaemonHandle, IsolatedEnv, stop_daemon
from tests.team.conftest import REPO, TeamDaemon, eventually, server_history
from tests.team_server.conftest import ThreadedServer


async def test_each_worktrees_team_folder_syncs_whichever_came_first(
    server: ThreadedServer, team_daemon: TeamDaemon, tmp_path: Path, isolated_env: IsolatedEnv
) -> None:
    own, main, own_dir = _a_worktree_with_its_own_memory_dir(tmp_path, isolated_env)
    handle = await team_daemon("a", url=server.url, token=server.token(REPO))
    names = []
    for cwd, name in ((own, "own fact"), (main, "main fact")):  # the own worktree first
        written = await handle.call(
            "memory.write",
            cwd=str(cwd),
            type="project",
            name=name,
            description=f"from {cwd.name}",
            body=f"{name}.\n",
            team=True,
        )
        names.append(Path(written["path"]).name)
        if cwd == own:
            assert written["path"].startswith(str(own_dir)), written["path"]
    await eventually(lambda: set(names) <= set(server_history(server)))


async def test_a_worktrees_own_team_folder_is_resumed_at_start(
    server: ThreadedServer,
    team_daemon: TeamDaemon,
    daemons: list[DaemonHandle],
    tmp_path: Path,
    isolated_env: IsolatedEnv,
) -> None:
    # The start resolved each saved folder from the main worktree's root: a linked
    # worktree's own team folder is another folder, so it was skipped, and what was written
    # in it while memoryd was stopped waited for that worktree's next turn.
    own, _, own_dir = _a_worktree_with_its_own_memory_dir(tmp_path, isolated_env)
    token = server.token(REPO)
    first = await team_daemon("a", url=server.url, token=token)
    pushed = await first.call("team.push", cwd=str(own))
    assert pushed["pushed"] == []
    await stop_daemon(daemons.pop())
    (own_dir / "team").mkdir(exist_ok=True)
    (own_dir / "team" / "while-stopped.md").write_text("written while memoryd was stopped\n")

    await team_daemon("b", url=server.url, token=token)
    # no RPC about the worktree: the startup hook resumes its folder from the saved state
    await eventually(lambda: "while-stopped.md" in server_history(server))


async def test_a_shared_team_folder_is_resumed_once_the_worktree_it_was_made_in_is_removed(
    server: ThreadedServer,
    team_daemon: TeamDaemon,
    daemons: list[DaemonHandle],
    tmp_path: Path,
) -> None:
    # A linked worktree with no memory dir of its own shares the main worktree's team folder;
    # made from the linked one, its state names that worktree. Once the worktree was removed
    # (`git worktree remove` after a merge), the start skipped the state, and the main
    # worktree's folder, still there, was not resumed: what was written in it while memoryd
    # was stopped waited for the project's next turn.
    linked, main = two_worktrees(tmp_path, bare=False)
    git("remote", "set-url", "origin", "git@github.com:acme/widgets.git", cwd=main)
    token = server.token(REPO)
    first = await team_daemon("a", url=server.url, token=token)
    written = await first.call(
        "memory.write",
        cwd=str(linked),
        type="project",
        name="shared fact",
        description="from the linked worktree",
        body="shared fact.\n",
        team=True,
    )
    team_dir = Path(written["path"]).parent
    await eventually(lambda: Path(written["path"]).name in server_history(server))
    await stop_daemon(daemons.pop())
    git("worktree", "remove", "--force", str(linked), cwd=main)
    (team_dir / "while-stopped.md").write_text("written while memoryd was stopped\n")

    await team_daemon("b", url=server.url, token=token)
    await eventually(lambda: "while-stopped.md" in server_history(server))


def _a_worktree_with_its_own_memory_dir(
    tmp_path: Path, isolated_env: IsolatedEnv
) -> tuple[Path, Path, Path]:
    """(`own`, `main`, `own`'s memory dir): a checkout of acme/widgets and a linked worktree
    whose `settings.local.json` names a memory dir of its own."""
    own, main = two_worktrees(tmp_path, bare=False)
    git("remote", "set-url", "origin", "git@github.com:acme/widgets.git", cwd=main)
    own_dir = isolated_env.root / "own-memory"
    (own / ".claude").mkdir()
    (own / ".claude" / "settings.local.json").write_text(
        json.dumps({"autoMemoryDirectory": str(own_dir)})
    )
    return own, main, own_dir
