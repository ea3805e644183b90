"""`memoryd-mcp` whose default project folder is deleted while it runs (`git worktree remove`,
`rm -rf build` with the agent in it): tools without a `cwd` use the folder's nearest existing
folder in the same work tree, and say so; never one outside it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.clients.fake_daemon import FakeDaemon
from tests.clients.test_mcp_server import mcp_session

LISTING = {"memory_dir": "/m", "memories": [], "instruction_files": []}
MEMORY = {"path": "/m/a.md", "name": "A", "type": "project", "content": "Deploy via staging."}


async def test_a_deleted_default_project_falls_back_within_its_work_tree(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    fake_daemon.on("memory.list", LISTING)
    fake_daemon.on("recall", {"memories": [MEMORY], "selector": "local"})
    repo = tmp_path / "repo"
    build = repo / "build" / "out"
    build.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    async with mcp_session(fake_daemon.socket_path, build) as session:
        shutil.rmtree(repo / "build")
        listed = await session.call_tool("list", {})
        recalled = await session.call_tool("recall", {"query": "deploy"})
    # Before: "cwd must be an existing absolute directory" on every call without a cwd.
    assert not listed.is_error, listed.content
    assert not recalled.is_error, recalled.content
    assert fake_daemon.calls("memory.list") == [{"cwd": str(repo)}]
    assert fake_daemon.calls("recall")[0]["cwd"] == str(repo)
    note = json.loads(recalled.content[0].text)["note"]
    assert note.startswith(f"the default project {build} no longer exists; this is for {repo},")


async def test_outside_git_a_deleted_default_project_stays_an_error(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    fake_daemon.on("memory.list", LISTING)
    plain = tmp_path / "plain" / "build"
    plain.mkdir(parents=True)
    async with mcp_session(fake_daemon.socket_path, plain) as session:
        plain.rmdir()
        listed = await session.call_tool("list", {})
        given = await session.call_tool("list", {"cwd": str(tmp_path / "plain")})
    assert listed.is_error
    assert "cwd must be an existing absolute directory" in listed.content[0].text
    assert not given.is_error
    assert "note" not in json.loads(given.content[0].text)
    assert fake_daemon.calls("memory.list") == [{"cwd": str(tmp_path / "plain")}]
