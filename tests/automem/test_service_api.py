"""The AutoMemory service as other engineers call it (agents, extraction, dream)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.automem.manifest import format_manifest
from memoryd.daemon.wiring import rpc_methods
from memoryd.errors import ForbiddenPath
from tests.automem.conftest import memory_text
from tests.conftest import DaemonHandle, IsolatedEnv


async def test_agent_style_write_with_snapshot_and_reconcile(
    daemon: DaemonHandle, project: Path, memdir: Path, isolated_env: IsolatedEnv
) -> None:
    am = daemon.daemon.services.automem
    proj = daemon.daemon.services.projects.resolve(project)
    assert am.enabled(proj)
    assert am.memory_dir(proj) == memdir
    assert am.team_dir(proj) == memdir / "team"
    result = await am.write_memory(
        proj, type="project", name="Freeze", description="release freeze", body="March 5"
    )
    assert result.created
    assert result.merged_into is None
    # An agent edits the file directly, holding the writer lock, snapshotting first.
    async with am.writer_lock(memdir):
        version = await am.snapshot(result.path)
        result.path.write_text(memory_text("Freeze moved", "release freeze", "project", "March 12"))
        (memdir / "agent.md").write_text(memory_text("Agent note", "by the agent", "user", "x"))
    assert version is not None
    assert await am.reconcile_index(proj) == {"added": 1, "removed": 0, "warnings": []}
    headers = am.manifest(proj)
    assert [h.name for h in headers] == ["Agent note", "Freeze moved"]
    assert "Freeze moved" in format_manifest(headers)
    _, versions = am.versions(proj, str(result.path))
    assert [v.version for v in versions] == [version.version]
    with pytest.raises(ForbiddenPath):
        await am.snapshot(isolated_env.root / "elsewhere.md")


async def test_delete_memory_api(daemon: DaemonHandle, project: Path, memdir: Path) -> None:
    am = daemon.daemon.services.automem
    proj = daemon.daemon.services.projects.resolve(project)
    result = await am.write_memory(proj, type="user", name="A", description="a", body="b")
    await am.delete_memory(proj, result.path)
    assert am.manifest(proj) == []
    with pytest.raises(ForbiddenPath):
        await am.delete_memory(proj, memdir / "MEMORY.md")


async def test_status_reports_auto_memory(daemon: DaemonHandle, project: Path) -> None:
    await daemon.call(
        "memory.write", cwd=str(project), type="user", name="A", description="a", body="b"
    )
    status = await daemon.call("status")
    assert status["features"]["auto_memory"]["enabled"] is True
    assert status["features"]["auto_memory"]["memories"] == 1
    methods = {"recall", "memory.write", "memory.history", "memory.restore", "memory.remember"}
    assert methods <= set(rpc_methods())
