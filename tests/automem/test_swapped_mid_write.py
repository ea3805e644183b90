"""A memory file checked as a regular file and swapped for a symbolic link before memoryd
copies it to its history (O_NOFOLLOW gives ELOOP): the write or delete is refused as a
forbidden path (-32002) that says so, the link is not followed and nothing is changed."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from memoryd.automem import layout, writes
from memoryd_client import RpcError
from tests.automem.conftest import USER
from tests.conftest import DaemonHandle


def _swap_after_checks(monkeypatch: pytest.MonkeyPatch, target: Path, outside: Path) -> None:
    """Run the real checks (the target's, then the index size's), then put a link to
    `outside` in the target's place: what a hostile process racing the write does between the
    checks and the copy."""
    check: Callable[[Path], None] = layout.check_index_size

    def check_then_swap(index: Path) -> None:
        check(index)
        os.unlink(target)
        os.symlink(outside, target)

    monkeypatch.setattr(writes, "check_index_size", check_then_swap)


async def test_an_overwrite_of_a_file_swapped_for_a_link_is_forbidden(
    daemon: DaemonHandle, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written = await daemon.call("memory.write", cwd=str(project), **USER)
    outside = tmp_path / "outside.md"
    outside.write_text("not a memory\n", encoding="utf-8")
    _swap_after_checks(monkeypatch, Path(written["path"]), outside)
    with pytest.raises(RpcError) as info:
        await daemon.call("memory.write", cwd=str(project), **{**USER, "body": "Changed."})
    assert info.value.code == -32002
    assert "became a symlink" in info.value.message
    assert "not replaced" in info.value.message
    assert outside.read_text(encoding="utf-8") == "not a memory\n"
    assert Path(written["path"]).is_symlink()  # left as the racer made it, not written through


async def test_a_delete_of_a_file_swapped_for_a_link_is_forbidden(
    daemon: DaemonHandle,
    project: Path,
    memdir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    written = await daemon.call("memory.write", cwd=str(project), **USER)
    target = Path(written["path"])
    outside = tmp_path / "outside.md"
    outside.write_text("not a memory\n", encoding="utf-8")
    _swap_after_checks(monkeypatch, target, outside)
    with pytest.raises(RpcError) as info:
        await daemon.call("memory.delete", cwd=str(project), path=str(target))
    assert info.value.code == -32002
    assert "not deleted" in info.value.message
    assert outside.read_text(encoding="utf-8") == "not a memory\n"
    assert target.name in (memdir / "MEMORY.md").read_text(encoding="utf-8")
