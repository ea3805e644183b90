"""A memory its owner made read-only (`chmod 444`) is left as it is by `memory.write`,
`memory.restore` and `memory.delete`, as memoryd's background agents leave such a file.

Found by a bug hunt (session 22): a rename needs only the folder writable, so each of them
replaced (or removed) the protected file, and a write or restore kept it 444."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from memoryd_client import RpcError
from tests.conftest import DaemonHandle

TEA = {"type": "user", "name": "Tea", "description": "what the user drinks"}


async def _write(daemon: DaemonHandle, project: Path, body: str, **extra: Any) -> Any:
    return await daemon.call("memory.write", cwd=str(project), **TEA, body=body, **extra)


async def _versions(daemon: DaemonHandle, project: Path) -> list[Any]:
    history = await daemon.call("memory.history", cwd=str(project), path="user_tea.md")
    return list(history["versions"])


async def _protected(daemon: DaemonHandle, project: Path, memdir: Path) -> tuple[Path, bytes]:
    await _write(daemon, project, "Green tea.", file="user_tea.md")
    await _write(daemon, project, "Black tea.", file="user_tea.md")
    path = memdir / "user_tea.md"
    path.chmod(0o444)
    return path, path.read_bytes()


async def _refused(call: Any, path: Path) -> str:
    with pytest.raises(RpcError) as info:
        await call
    assert info.value.code == -32602
    assert "read-only (mode 0444): its owner protected it" in info.value.message
    assert f"chmod u+w {path}" in info.value.message
    return info.value.message


@pytest.mark.parametrize("by", ["file", "name"])
async def test_a_write_of_a_read_only_memory_is_refused_and_changes_nothing(
    daemon: DaemonHandle, project: Path, memdir: Path, by: str
) -> None:
    path, before = await _protected(daemon, project, memdir)
    versions = await _versions(daemon, project)
    extra = {"file": "user_tea.md"} if by == "file" else {}
    await _refused(_write(daemon, project, "Oolong.", **extra), path)
    assert path.read_bytes() == before
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert await _versions(daemon, project) == versions  # no copy of an overwrite not made
    # Its owner lets it be changed again: the write goes through.
    path.chmod(0o644)
    await _write(daemon, project, "Oolong.", **extra)
    assert path.read_text().endswith("Oolong.\n")


async def test_a_restore_over_a_read_only_memory_is_refused(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    path, before = await _protected(daemon, project, memdir)
    versions = await _versions(daemon, project)
    restore = daemon.call(
        "memory.restore", cwd=str(project), path="user_tea.md", version=versions[0]["version"]
    )
    await _refused(restore, path)
    assert path.read_bytes() == before
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert await _versions(daemon, project) == versions


async def test_a_delete_of_a_read_only_memory_is_refused_and_its_index_line_stays(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    # As `rm` asks before removing a write-protected file: memoryd cannot ask, so it refuses
    # and says how to allow it.
    path, before = await _protected(daemon, project, memdir)
    index = (memdir / "MEMORY.md").read_text()
    await _refused(daemon.call("memory.delete", cwd=str(project), path="user_tea.md"), path)
    assert path.read_bytes() == before
    assert (memdir / "MEMORY.md").read_text() == index
    path.chmod(0o644)
    await daemon.call("memory.delete", cwd=str(project), path="user_tea.md")
    assert not path.exists()
