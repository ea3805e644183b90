"""Auto memory reads what its scans found with O_NOFOLLOW|O_NONBLOCK and a size cap (issue 14):
a FIFO or a symbolic link put in a memory file's or MEMORY.md's place neither hangs the daemon
nor is followed out of the folder, and MEMORY.md is read up to a cap, whatever its size."""

from __future__ import annotations

import errno
import os
import tracemalloc
from pathlib import Path

import pytest

from memoryd.automem.index import MAX_INDEX_BYTES, MAX_INDEX_READ_BYTES
from memoryd.automem.store import DirState
from memoryd.fsutil import NotRegularFile, read_regular_file
from memoryd_client import RpcError
from tests.automem.conftest import USER
from tests.conftest import DaemonHandle
from tests.fakes.swapped_files import fifo_released_later, symlink_out


def test_read_regular_file_refuses_fifos_and_links_and_stops_at_the_cap(tmp_path: Path) -> None:
    with pytest.raises(NotRegularFile):
        read_regular_file(fifo_released_later(tmp_path / "fifo"), 100)
    with pytest.raises(OSError, match="symbolic links") as info:
        read_regular_file(symlink_out(tmp_path / "link", tmp_path / "out"), 100)
    assert info.value.errno == errno.ELOOP
    (tmp_path / "big").write_bytes(b"x" * 1000)
    assert read_regular_file(tmp_path / "big", 100) == b"x" * 101


def test_a_memory_file_swapped_for_a_fifo_after_the_scan_is_dropped(tmp_path: Path) -> None:
    state = DirState(tmp_path)
    fifo = fifo_released_later(tmp_path / "user_x.md")
    state._load("user_x.md", fifo, (1, 1, 1, 1))  # what the scan saw was a regular file
    assert "user_x.md" not in state.entries


async def test_memory_list_with_memory_md_a_fifo_does_not_hang(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    await daemon.call("memory.write", cwd=str(project), **USER)
    os.unlink(memdir / "MEMORY.md")
    fifo_released_later(memdir / "MEMORY.md")
    listed = await daemon.call("memory.list", cwd=str(project))
    assert listed["memories"]
    assert listed["index"]["dangling"] == []  # not "fifo.md", a line read from the FIFO
    context = await daemon.call("get_context", cwd=str(project))
    assert "Read through a FIFO" not in str(context)


async def test_memory_md_swapped_for_a_link_out_is_not_followed(
    daemon: DaemonHandle, project: Path, memdir: Path, tmp_path: Path
) -> None:
    await daemon.call("memory.write", cwd=str(project), **USER)
    symlink_out(memdir / "MEMORY.md", tmp_path / "outside.md")
    listed = await daemon.call("memory.list", cwd=str(project))
    context = await daemon.call("get_context", cwd=str(project))
    assert "SECRET" not in str(listed) + str(context)


async def test_a_huge_memory_md_is_read_only_up_to_the_cap(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    await daemon.call("memory.write", cwd=str(project), **USER)
    line = "- [A memory](a.md) — " + "a long hook " * 8 + "\n"
    with open(memdir / "MEMORY.md", "a", encoding="utf-8") as handle:
        handle.write(line * (32_000_000 // len(line)))  # 32 MB
    tracemalloc.start()
    try:
        context = await daemon.call("get_context", cwd=str(project))
        listed = await daemon.call("memory.list", cwd=str(project))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Reading the 32 MB file took 250 MB (bytes, text, lines); the capped read about 8 MB.
    assert peak < 16 * MAX_INDEX_READ_BYTES
    assert context["index_truncated"] is True
    assert "WARNING: MEMORY.md" in context["claude_md"]
    assert len(context["claude_md"].encode()) < MAX_INDEX_BYTES + 20_000
    assert listed["index"]["truncated"] is True
    # Writers never rewrite an index they cannot read whole: a clear error, nothing lost.
    size = (memdir / "MEMORY.md").stat().st_size
    with pytest.raises(RpcError) as info:
        await daemon.call(
            "memory.write", cwd=str(project), type="user", name="Another", description="d", body="b"
        )
    assert info.value.code == -32004
    assert "MEMORY.md" in info.value.message
    assert (memdir / "MEMORY.md").stat().st_size == size
    assert not (memdir / "user_another.md").exists()
