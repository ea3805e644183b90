"""Issue 13's bad input for `recall`, each through the real daemon on its socket: a clear
error or a sensible result, never a crash, and the daemon goes on answering.

The hybrid ranker's share (a missing or half-written model file) is in test_embeddings.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.automem.conftest import memory_text
from tests.conftest import DaemonHandle


async def _names(daemon: DaemonHandle, project: Path, query: str) -> list[str]:
    got = await daemon.call("recall", cwd=str(project), query=query)
    assert got["selector"] == "local"
    return [Path(m["path"]).name for m in got["memories"]]


def _identical(memdir: Path, n: int) -> None:
    memdir.mkdir(parents=True, exist_ok=True)
    data = memory_text("Same", "the very same memory", "user", "Same body.").encode()
    for i in range(n):
        (memdir / f"user_same_{i:05d}.md").write_bytes(data)


async def test_ten_thousand_identical_memories_never_block_the_daemon(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    _identical(memdir, 10_000)
    other = await daemon.client()
    try:
        # The directory's first load (seconds at 10,000 files) runs in event-loop slices:
        # a `status` asked after the recall is answered before the recall is.
        recall = asyncio.ensure_future(
            daemon.call("recall", cwd=str(project), query="the same memory")
        )
        await asyncio.sleep(0.05)  # the recall is read and waiting on the load
        status = await other.call("status", {})
        assert not recall.done()
        assert status["pid"] > 0
        got = await asyncio.wait_for(recall, 60)
        files = [Path(m["path"]).name for m in got["memories"]]
        assert len(set(files)) == 5  # five of the equals, each once
        again = await daemon.call("recall", cwd=str(project), query="the same memory")
        assert [Path(m["path"]).name for m in again["memories"]] == files  # and the same five
        assert await _names(daemon, project, "nothing alike") == []
        listed = await other.call("memory.list", {"cwd": str(project)})
        assert len(listed["memories"]) == 10_000
    finally:
        await other.close()
