"""`memory.list` lists the instruction files in effect now without reading them all again.

Found by a scale review: it dropped the project's cached instruction files at every call (so
an edit the watcher had not reported yet was shown), and a warm call with 1,000 rule files
read and parsed every one again. The cached load is re-stat'ed instead."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.conftest import DaemonHandle


def _project(root: Path) -> Path:
    (root / ".git").mkdir(parents=True)
    (root / "CLAUDE.md").write_text("# Project\n")
    rules = root / ".claude" / "rules"
    rules.mkdir(parents=True)
    for i in range(5):
        (rules / f"rule{i}.md").write_text(f"# Rule {i}\n")
    return root


def _paths(listed: dict[str, Any]) -> set[str]:
    return {Path(f["path"]).name for f in listed["instruction_files"]}


async def test_a_warm_memory_list_reads_no_instruction_file_again(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    root = _project(tmp_path / "proj")
    first = await daemon.call("memory.list", cwd=str(root))
    service = daemon.daemon.services.instructions
    loads = service.misses
    second = await daemon.call("memory.list", cwd=str(root))
    assert service.misses == loads  # was one more load per call
    assert second["instruction_files"] == first["instruction_files"]
    assert {"CLAUDE.md", "rule0.md", "rule4.md"} <= _paths(second)


async def test_memory_list_shows_a_rule_the_watcher_has_not_reported(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    root = _project(tmp_path / "proj")
    service = daemon.daemon.services.instructions
    for _ in range(200):  # until the watcher covers the load and vouches for it
        await daemon.call("memory.list", cwd=str(root))
        if service.feature_status()["instruction_files"]["trusted"]:
            break
        await asyncio.sleep(0.05)
    assert service.feature_status()["instruction_files"]["trusted"] == 1
    watcher = service._watcher
    assert watcher is not None
    watcher._on_change = lambda _changed: None  # the edit below is not reported (yet)
    (root / ".claude" / "rules" / "added.md").write_text("# Added\n")
    (root / ".claude" / "rules" / "rule0.md").unlink()
    listed = await daemon.call("memory.list", cwd=str(root))
    assert "added.md" in _paths(listed)
    assert "rule0.md" not in _paths(listed)
