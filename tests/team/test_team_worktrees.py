"""Team sync in a repository whose worktrees choose different memory dirs (fa434e7): a
worktree whose `settings.local.json` names a dir of its own has a team folder of its own.
The folders were kept per repository root, so whichever worktree came first took the map's
one place, and the other's team memories never reached the server (nor said why)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.automem.conftest import git, two_worktrees
from tests.conftest import IsolatedEnv
from tests.team.conftest import REPO, TeamDaemon, eventually, server_history
from tests.team_server.conftest import ThreadedServer


async def test_each_worktrees_team_folder_syncs_whichever_came_first(
    server: ThreadedServer, team_daemon: TeamDaemon, tmp_path: Path, isolated_env: IsolatedEnv
) -> None:
    own, main = two_worktrees(tmp_path, bare=False)
    git("remote", "set-url", "origin", "git@github.com:acme/widgets.git", cwd=main)
    own_dir = isolated_env.root / "own-memory"
    (own / ".claude").mkdir()
    (own / ".claude" / "settings.local.json").write_text(
        json.dumps({"autoMemoryDirectory": str(own_dir)})
    )
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
