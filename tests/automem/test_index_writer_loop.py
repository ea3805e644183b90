"""The index writer's first look at a memory dir keeps its file work off the event loop."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from memoryd.automem import index_writer
from tests.automem.conftest import memory_text
from tests.conftest import DaemonHandle


async def test_temp_files_a_killed_writer_left_are_removed_off_the_event_loop(
    daemon: DaemonHandle, project: Path, memdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by a bug hunt: the first look listed every folder holding a memory, and made a
    # Path of each memory's folder, on the event loop: 35-57 ms at 10,000 memories.
    listed_on: list[int] = []
    real = index_writer.remove_stale_staged

    def recording(folder: Path, *args: Any, **kwargs: Any) -> list[Path]:
        listed_on.append(threading.get_ident())
        return real(folder, *args, **kwargs)

    monkeypatch.setattr(index_writer, "remove_stale_staged", recording)
    stale = []
    for folder in ("", "sub/deeper/", "team/"):
        (memdir / folder).mkdir(parents=True, exist_ok=True)
        (memdir / folder / "project_a.md").write_text(memory_text("A", "about a", "project", "a"))
        left = memdir / folder / ".project_a.md.a1b2c3d4.tmp"
        left.write_text("---\nname: A")
        os.utime(left, (time.time() - 3600, time.time() - 3600))
        stale.append(left)
    await daemon.call("memory.list", cwd=str(project))
    deadline = time.monotonic() + 10
    while any(p.exists() for p in stale):
        assert time.monotonic() < deadline, "temp files not removed"
        await asyncio.sleep(0.02)
    assert len(listed_on) == 3  # the memory dir, team/ and sub/deeper/
    assert threading.get_ident() not in listed_on
