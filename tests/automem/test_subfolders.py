"""Memories in subfolders of the memory directory are memories (issue 16).

Claude Code's own memory scan reads `.md` files below the memory directory recursively, and
its agents may write `notes/x.md`; memoryd lists, indexes and recalls them the same way.
"""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

from memoryd.automem.index import parse_index
from tests.automem.conftest import USER, memory_text
from tests.conftest import DaemonHandle

NOTE = {
    "type": "reference",
    "name": "Grafana board for the checkout service",
    "description": "where checkout latency is graphed",
    "body": "The checkout latency board is grafana.internal/d/checkout.",
}


def _index(memdir: Path) -> list[str]:
    return [e.file for e in parse_index((memdir / "MEMORY.md").read_text())]


async def test_a_write_into_a_subfolder_is_indexed_listed_and_recalled(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    res = await daemon.call("memory.write", cwd=str(project), file="sub/dir/new.md", **NOTE)
    assert res["path"] == str(memdir / "sub" / "dir" / "new.md")
    assert _index(memdir) == ["sub/dir/new.md"]
    for folder in (memdir / "sub", memdir / "sub" / "dir"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    # A later write keeps the subfolder's line (it is not taken for a dangling one).
    await daemon.call("memory.write", cwd=str(project), **USER)
    assert _index(memdir) == ["sub/dir/new.md", "user_prefers_short_answers.md"]
    listed = await daemon.call("memory.list", cwd=str(project))
    assert [m["file"] for m in listed["memories"]] == [
        "sub/dir/new.md",
        "user_prefers_short_answers.md",
    ]
    assert listed["index"]["dangling"] == []
    found = await daemon.call("recall", cwd=str(project), query="checkout latency grafana board")
    assert found["memories"][0]["path"] == res["path"]
    read = await daemon.call("memory.read", cwd=str(project), path="sub/dir/new.md")
    assert read["valid"] is True


async def test_files_an_agent_put_in_subfolders_are_found_hidden_ones_are_not(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    (memdir / "notes" / "deep").mkdir(parents=True)
    (memdir / ".git").mkdir()
    (memdir / "notes" / "deep" / "x.md").write_text(
        memory_text("Deploy window", "when deploys happen", "project", "Tuesdays only.")
    )
    (memdir / "notes" / "memory.md").write_text("- [x](y.md)\n")
    (memdir / ".git" / "HEAD.md").write_text("not a memory")
    listed = await daemon.call("memory.list", cwd=str(project))
    assert [m["file"] for m in listed["memories"]] == ["notes/deep/x.md"]
    # Found without an index line on the daemon's first look: indexed in the background.
    deadline = asyncio.get_running_loop().time() + 5
    while not (memdir / "MEMORY.md").exists():
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.02)
    assert _index(memdir) == ["notes/deep/x.md"]
