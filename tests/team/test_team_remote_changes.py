"""A project's git remote changing while the daemon runs: its team folder follows it.

SPEC.md "Layer 4" lists "no repo" among the permanent failures that last until a deletion or a
restart; the daemon re-reads a project's remote when `.git/config` changes, so a remote added
after `git init` (or a repository moved to another owner) is picked up at the next call that
resolves the project. The folder stayed `no_repo` (or kept syncing with the old repository)
until the daemon restarted."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from tests.team.conftest import REPO, TeamDaemon, server_history
from tests.team.test_team_sync_daemon import make_repo
from tests.team_server.conftest import ThreadedServer


def set_remote(root: Path, remote: str) -> None:
    """Rewrite `.git/config` with `remote` as origin, with a new mtime (the project cache's
    stamp), as `git remote add` / `git remote set-url` would."""
    config = root / ".git" / "config"
    config.write_text(
        "[core]\n\trepositoryformatversion = 0\n"
        f'[remote "origin"]\n\turl = {remote}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n'
    )
    later = time.time() + 5
    os.utime(config, (later, later))


async def pushed(server: ThreadedServer, repo: str, key: str, timeout: float = 8.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if key in await asyncio.to_thread(server_history, server, repo):
            return True
        await asyncio.sleep(0.05)
    return False


async def test_a_remote_added_after_the_first_session_is_synced_without_a_restart(
    server: ThreadedServer, team_daemon: TeamDaemon, tmp_path: Path
) -> None:
    handle = await team_daemon("a", url=server.url, token=server.token(REPO))
    root = make_repo(tmp_path / "proj", remote=None)  # `git init`, no remote yet
    await handle.call("get_context", cwd=str(root))
    status = await handle.call("team.status", cwd=str(root))
    assert status["suppressed"] == "no_repo"

    set_remote(root, "git@github.com:acme/widgets.git")
    written = await handle.call(
        "memory.write",
        cwd=str(root),
        type="reference",
        name="Runbook",
        description="where the runbook is",
        body="The on-call runbook is the Ops wiki page.\n",
        team=True,
    )
    assert written["warnings"] == []  # not "not shared (no_repo)"
    key = Path(written["path"]).name
    assert await pushed(server, REPO, key), "the team memory never reached the server"
    status = await handle.call("team.status", cwd=str(root))
    assert status["repo"] == REPO
    assert status["suppressed"] is None


async def test_a_moved_repository_syncs_with_its_new_name(
    server: ThreadedServer, team_daemon: TeamDaemon, tmp_path: Path
) -> None:
    moved = "newco/widgets"
    handle = await team_daemon("a", url=server.url, token=server.token(REPO, moved))
    root = make_repo(tmp_path / "proj")
    first = await handle.call("team.push", cwd=str(root))
    team_dir = Path(first["team_dir"])
    (team_dir / "before.md").write_text("written under the old name\n")
    assert (await handle.call("team.push", cwd=str(root)))["pushed"] == ["before.md"]

    set_remote(root, f"https://github.com/{moved}.git")
    await handle.call("get_context", cwd=str(root))
    (team_dir / "after.md").write_text("written under the new name\n")
    assert await pushed(server, moved, "after.md")
    assert "after.md" not in await asyncio.to_thread(server_history, server, REPO)
    status = await handle.call("team.status", cwd=str(root))
    assert status["repo"] == moved
