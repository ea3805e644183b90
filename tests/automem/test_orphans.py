"""A memory file with no index line (written, then the writer was killed before the index
was) is found, indexed with a generated line and reported (issue 16)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from memoryd.automem.index import parse_index
from tests.automem.conftest import USER, memory_text
from tests.conftest import DaemonHandle


def _index(memdir: Path) -> list[str]:
    return sorted(e.file for e in parse_index((memdir / "MEMORY.md").read_text()))


def _orphan(memdir: Path, file: str, name: str, *, age_s: float = 0) -> Path:
    path = memdir / file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(memory_text(name, f"about {name}", "project", f"{name} body text."))
    if age_s:
        then = time.time() - age_s
        os.utime(path, (then, then))
    return path


async def _until(check: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_orphans_found_on_first_load_are_indexed_and_reported(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    # What a kill -9 between the file and the index leaves: two files, one index line.
    _orphan(memdir, "project_kept.md", "Kept")
    (memdir / "MEMORY.md").write_text("- [Kept](project_kept.md) — about Kept\n")
    _orphan(memdir, "project_lost.md", "Lost")
    _orphan(memdir, "team/project_team_lost.md", "Team lost")
    # Temp files of atomic writes: one a killed daemon left, one a live writer's (newer).
    stale = memdir / ".project_lost.md.a1b2c3d4.tmp"
    stale.write_text("---\nname: Lo")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    live = memdir / "team" / ".MEMORY.md.zz99yy88.tmp"
    live.write_text("- [x](y.md)")
    os.utime(live, (time.time() + 3600, time.time() + 3600))
    first = await daemon.call("memory.list", cwd=str(project))
    assert len(first["memories"]) == 3
    await _until(lambda: _index(memdir) == ["project_kept.md", "project_lost.md"])
    assert _index(memdir / "team") == ["project_team_lost.md"]
    assert not stale.exists()
    assert live.exists()
    assert "- [Lost](project_lost.md) — about Lost" in (memdir / "MEMORY.md").read_text()
    listed = await daemon.call("memory.list", cwd=str(project))
    assert listed["index"]["orphans"] == []
    assert listed["index"]["team_orphans"] == []
    status = (await daemon.call("status"))["features"]["auto_memory"]
    assert status["orphans_indexed"] == 2


async def test_memory_list_reports_orphans_until_they_are_indexed(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    daemon.daemon.services.automem.sweep_interval_s = 3600  # no periodic sweep here
    await daemon.call("memory.write", cwd=str(project), **USER)
    await asyncio.sleep(0.05)  # the first load's reconciliation has run
    _orphan(memdir, "project_fresh.md", "Fresh")  # just written: maybe a writer mid-way
    listed = await daemon.call("memory.list", cwd=str(project))
    assert listed["index"]["orphans"] == ["project_fresh.md"]
    res = await daemon.call("memory.reconcile", cwd=str(project))
    assert res == {"added": 1, "removed": 0, "warnings": []}
    listed = await daemon.call("memory.list", cwd=str(project))
    assert listed["index"]["orphans"] == []


async def test_the_background_sweep_indexes_orphans_once_they_are_old_enough(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    am = daemon.daemon.services.automem
    am.sweep_interval_s = 0.05
    await daemon.call("memory.write", cwd=str(project), **USER)
    _orphan(memdir, "project_fresh.md", "Fresh")
    _orphan(memdir, "sub/project_old.md", "Old", age_s=120)

    def indexed() -> bool:
        asyncio.get_running_loop()
        am.state(memdir)  # an access: lets a due sweep start
        return "sub/project_old.md" in _index(memdir)

    await _until(indexed)
    # A file younger than the grace period may be a writer's between file and index line.
    assert "project_fresh.md" not in _index(memdir)


async def test_an_orphan_dated_in_the_future_is_indexed_by_the_sweep(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    """A file whose time is ahead of the clock (written before the clock was set back, copied
    from a machine whose clock ran ahead) is no writer's between its file and its line: its
    age was negative, below the grace period for as long as the clock took to catch up, and
    the sweep passed over it until the daemon restarted."""
    am = daemon.daemon.services.automem
    am.sweep_interval_s = 0.05
    await daemon.call("memory.write", cwd=str(project), **USER)
    _orphan(memdir, "project_ahead.md", "Ahead", age_s=-86400)
    _orphan(memdir, "project_old.md", "Old", age_s=120)

    def indexed() -> bool:
        am.state(memdir)  # an access: lets a due sweep start
        return {"project_old.md", "project_ahead.md"} <= set(_index(memdir))

    await _until(indexed)


async def test_a_line_lost_from_an_index_in_step_comes_back(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    """The periodic check passes over an index it found in step while neither the files nor
    the index change; an outside edit of the index alone (no file changes) is still noticed."""
    am = daemon.daemon.services.automem
    am.sweep_interval_s = 0.05
    _orphan(memdir, "project_a.md", "A", age_s=120)
    _orphan(memdir, "project_b.md", "B", age_s=120)
    both = "- [A](project_a.md) — about A\n- [B](project_b.md) — about B\n"
    (memdir / "MEMORY.md").write_text(both)
    await daemon.call("memory.list", cwd=str(project))
    for _ in range(10):  # a few quiet sweeps
        am.state(memdir)
        await asyncio.sleep(0.06)
    assert (memdir / "MEMORY.md").read_text() == both
    (memdir / "MEMORY.md").write_text("- [A](project_a.md) — about A\n")  # in place: same dir

    def back() -> bool:
        am.state(memdir)  # an access: lets a due sweep start
        return _index(memdir) == ["project_a.md", "project_b.md"]

    await _until(back)


async def test_an_index_over_the_cap_is_left_alone_without_failing(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    """memoryd never rewrites a MEMORY.md over its cap: the orphan check passes over it (said
    once, not an error every sweep) and leaves it as it is."""
    from memoryd.automem.index import MAX_INDEX_READ_BYTES

    am = daemon.daemon.services.automem
    _orphan(memdir, "project_a.md", "A", age_s=120)
    huge = "- [A](project_a.md) — " + "x" * MAX_INDEX_READ_BYTES + "\n"
    (memdir / "MEMORY.md").write_text(huge)
    await daemon.call("memory.list", cwd=str(project))
    _orphan(memdir, "project_b.md", "B", age_s=120)
    am.state(memdir)
    for _ in range(2):
        assert await am.index_writer.index_orphans(memdir, 10.0) == []
    assert (memdir / "MEMORY.md").read_text() == huge


async def test_an_index_edited_while_the_orphan_check_reads_it_keeps_the_edit(
    daemon: DaemonHandle, project: Path, memdir: Path, monkeypatch: Any
) -> None:
    from memoryd.automem import index_writer

    _orphan(memdir, "project_kept.md", "Kept")
    (memdir / "MEMORY.md").write_text("- [Kept](project_kept.md) — about Kept\n")
    _orphan(memdir, "project_lost.md", "Lost")
    theirs: list[str] = []
    read = index_writer.unlisted_files

    def edited_while_read(path: Path, *args: Any) -> Any:
        """The check reads the index in a thread; an agent adds a line just after."""
        result = read(path, *args)
        if path == memdir / "MEMORY.md":
            theirs.append(f"- [Theirs {len(theirs)}](theirs_{len(theirs)}.md) — an agent's line\n")
            with path.open("a") as index:
                index.write(theirs[-1])
        return result

    monkeypatch.setattr(index_writer, "unlisted_files", edited_while_read)
    await daemon.call("memory.list", cwd=str(project))  # the first look: an orphan check
    writer = daemon.daemon.services.automem.index_writer
    assert await writer.index_orphans(memdir, 0.0) == []  # the index changed: left alone
    assert all(line in (memdir / "MEMORY.md").read_text() for line in theirs)
    monkeypatch.setattr(index_writer, "unlisted_files", read)
    assert await writer.index_orphans(memdir, 0.0) == ["project_lost.md"]  # the next look
    text = (memdir / "MEMORY.md").read_text()
    assert all(line in text for line in theirs)
    assert "(project_lost.md)" in text


async def test_a_conflict_copy_is_never_a_memory(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    # Found by a bug hunt: a team pull keeps a local edit aside as `x.conflict-<time>.md` in
    # team/, where it was read as one more memory: listed, recalled beside the real one, and
    # given a line in team/MEMORY.md by reconcile or the orphan sweep, which was pushed to
    # every teammate (a line for a file that only exists on this machine).
    copy = "project_plan.conflict-20261202T153012Z.md"
    _orphan(memdir, "team/project_plan.md", "Release plan")
    _orphan(memdir, f"team/{copy}", "Release plan")
    _orphan(memdir, "project_notes.md", "Notes")
    _orphan(memdir, "project_notes.conflict-20261202T153012Z-2.md", "Notes")
    _orphan(memdir, "team/drafts~/project_draft.md", "Draft")  # a folder team sync skips
    _orphan(memdir, "sub.tmp/project_kept.md", "Kept")  # outside team/: still read
    listed = await daemon.call("memory.list", cwd=str(project))
    assert sorted(m["file"] for m in listed["memories"]) == [
        "project_notes.md",
        "sub.tmp/project_kept.md",
        "team/project_plan.md",
    ]
    recalled = await daemon.call("recall", cwd=str(project), query="release plan", selector="local")
    assert [Path(m["path"]).name for m in recalled["memories"]] == ["project_plan.md"]
    await daemon.call("memory.reconcile", cwd=str(project))
    assert _index(memdir / "team") == ["project_plan.md"]
    assert _index(memdir) == ["project_notes.md", "sub.tmp/project_kept.md"]
    assert (memdir / "team" / copy).exists()  # kept for the user to compare, never deleted
