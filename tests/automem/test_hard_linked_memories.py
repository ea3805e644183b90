"""A memory file with other hard links (a notes folder linking its memories in): memoryd
replaces a memory by a rename, so those names keep the text before; the reply says so."""

from __future__ import annotations

from pathlib import Path

from tests.automem.conftest import memory_text
from tests.conftest import DaemonHandle

OLD = memory_text("Tea", "what the user drinks", "user", "Green tea.")


async def _write(daemon: DaemonHandle, project: Path, body: str) -> dict[str, object]:
    result: dict[str, object] = await daemon.call(
        "memory.write",
        cwd=str(project),
        file="user_tea.md",
        type="user",
        name="Tea",
        description="what the user drinks",
        body=body,
    )
    return result


async def test_a_write_of_a_hard_linked_memory_says_its_other_name_keeps_the_old_text(
    daemon: DaemonHandle, project: Path, memdir: Path, tmp_path: Path
) -> None:
    # Session 22: the link was cut unsaid (an agent's Write of such a file is refused).
    memdir.mkdir(parents=True)
    notes = tmp_path / "notes-tea.md"
    notes.write_text(OLD)
    (memdir / "user_tea.md").hardlink_to(notes)
    result = await _write(daemon, project, "Black tea.")
    assert result["warnings"] == [
        "user_tea.md had 1 other hard link: the memory is saved as a file of its own "
        "(memoryd writes by rename), and that name keeps the text it had before"
    ]
    assert (memdir / "user_tea.md").read_text().endswith("Black tea.\n")
    assert notes.read_text() == OLD
    # Its own file now: the next write has nothing to say.
    assert (await _write(daemon, project, "Oolong."))["warnings"] == []


async def test_a_restore_over_a_hard_linked_memory_says_so_too(
    daemon: DaemonHandle, project: Path, memdir: Path, tmp_path: Path
) -> None:
    await _write(daemon, project, "Green tea.")
    await _write(daemon, project, "Black tea.")
    history = await daemon.call("memory.history", cwd=str(project), path="user_tea.md")
    for extra in ("a.md", "b.md"):
        (tmp_path / extra).hardlink_to(memdir / "user_tea.md")
    restored = await daemon.call(
        "memory.restore",
        cwd=str(project),
        path="user_tea.md",
        version=history["versions"][0]["version"],
    )
    assert restored["warnings"] == [
        "user_tea.md had 2 other hard links: the memory is saved as a file of its own "
        "(memoryd writes by rename), and they keep the text it had before"
    ]
    assert (memdir / "user_tea.md").read_text().endswith("Green tea.\n")
    assert (tmp_path / "a.md").read_text().endswith("Black tea.\n")
