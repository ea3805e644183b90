"""A change that fails (a full disk) leaves no version behind: the file is as it was, and a
version equal to it listed an overwrite or a delete that never happened.

The disk is a real tmpfs filled up, which needs root (CI has it); elsewhere these skip."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memoryd_client import RpcError
from tests.conftest import DaemonHandle
from tests.fakes.full_disk import SmallDisks


async def _write(daemon: DaemonHandle, project: Path, body: str) -> None:
    await daemon.call(
        "memory.write",
        cwd=str(project),
        type="user",
        name="Tea",
        description="drinks tea",
        body=body,
        file="tea.md",
    )


async def _versions(daemon: DaemonHandle, project: Path) -> list[str]:
    history = await daemon.call("memory.history", cwd=str(project), path="tea.md")
    return [v["reason"] for v in history["versions"]]


async def test_an_overwrite_that_meets_a_full_disk_keeps_no_version(
    daemon: DaemonHandle, project: Path, memdir: Path, small_disks: SmallDisks
) -> None:
    small_disks.mount(memdir)
    await _write(daemon, project, "Green tea.")
    before = (memdir / "tea.md").read_text()
    free = small_disks.fill(memdir)
    with pytest.raises(RpcError, match="the disk is full"):
        await _write(daemon, project, "Black tea, " * 2_000)
    assert (memdir / "tea.md").read_text() == before
    assert await _versions(daemon, project) == []  # was ["overwrite"], equal to the file
    free()
    await _write(daemon, project, "Black tea.")
    assert await _versions(daemon, project) == ["overwrite"]


async def test_a_delete_that_meets_a_full_disk_keeps_no_version(
    daemon: DaemonHandle, project: Path, memdir: Path, small_disks: SmallDisks
) -> None:
    small_disks.mount(memdir)
    await _write(daemon, project, "Green tea.")
    await daemon.call(
        "memory.write", cwd=str(project), type="user", name="Jam", description="d", body="Jam."
    )
    free = small_disks.fill(memdir)
    # MEMORY.md cannot be rewritten without its line, so the delete fails, the file stays.
    with pytest.raises(RpcError, match="the disk is full"):
        await daemon.call("memory.delete", cwd=str(project), path="tea.md")
    free()
    assert (memdir / "tea.md").is_file()
    assert await _versions(daemon, project) == []


async def test_a_restore_that_meets_a_full_disk_keeps_no_version(
    daemon: DaemonHandle, project: Path, memdir: Path, small_disks: SmallDisks
) -> None:
    small_disks.mount(memdir)
    await _write(daemon, project, "Green tea, " * 1_000)
    await _write(daemon, project, "Black tea.")
    (version,) = (await daemon.call("memory.history", cwd=str(project), path="tea.md"))["versions"]
    free = small_disks.fill(memdir)
    with pytest.raises(RpcError, match="the disk is full"):
        await daemon.call(
            "memory.restore", cwd=str(project), path="tea.md", version=version["version"]
        )
    free()
    assert await _versions(daemon, project) == ["overwrite"]  # no "restore" beside it


async def test_a_change_that_failed_after_it_landed_keeps_its_version(
    daemon: DaemonHandle, project: Path, memdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The file was replaced, then something after the rename failed: the version is the only
    # copy of what was there, and stays.
    from memoryd.automem import writes

    await _write(daemon, project, "Green tea.")
    real = writes.atomic_write_bytes

    def lands_then_fails(path: Path, data: bytes, mode: int = 0o600, **kw: Any) -> None:
        real(path, data, mode, **kw)
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(writes, "atomic_write_bytes", lands_then_fails)
    with pytest.raises(RpcError):
        await _write(daemon, project, "Black tea.")
    assert "Black tea." in (memdir / "tea.md").read_text()
    assert await _versions(daemon, project) == ["overwrite"]
