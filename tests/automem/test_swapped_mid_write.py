"""A memory file checked as a regular file and swapped for a symbolic link before memoryd
copies it to its history (O_NOFOLLOW gives ELOOP): the write or delete is refused as a
forbidden path (-32002) that says so, the link is not followed and nothing is changed."""

from __future__ import annotations

import asyncio
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


async def test_writers_queued_on_the_lock_do_not_write_through_a_dir_swapped_for_a_link(
    daemon: DaemonHandle, project: Path, memdir: Path, tmp_path: Path
) -> None:
    # Found by the session 21 hunt: each writer's memory dir was checked before it waited for
    # the dir's writer lock. The dir swapped meanwhile for a link out of the config dir (which
    # memoryd refuses as a default dir), every queued write, delete and restore went through
    # the link once the lock was free (MEMORY.md too), then answered -32002 all the same.
    written = await daemon.call("memory.write", cwd=str(project), **USER)
    await daemon.call("memory.write", cwd=str(project), **{**USER, "body": "Changed."})
    (version,) = (await daemon.call("memory.history", cwd=str(project), path=written["path"]))[
        "versions"
    ]
    outside = tmp_path / "outside"
    outside.mkdir()
    name = Path(written["path"]).name
    (outside / name).write_text("not a memory of this project\n", encoding="utf-8")
    am = daemon.daemon.services.automem
    calls = [
        daemon.call("memory.write", cwd=str(project), **{**USER, "name": f"queued {i}"})
        for i in range(3)
    ]
    calls.append(daemon.call("memory.delete", cwd=str(project), path=name))
    calls.append(
        daemon.call("memory.restore", cwd=str(project), path=name, version=version["version"])
    )
    async with am.writer_lock(memdir):
        queued = [asyncio.ensure_future(call) for call in calls]
        while len(am.writer_lock(memdir)._waiters or ()) < len(calls):
            await asyncio.sleep(0.01)  # every one waits for the lock, its dir checked
        os.rename(memdir, memdir.with_name("memory.moved"))
        os.symlink(outside, memdir)
    results = await asyncio.gather(*queued, return_exceptions=True)
    assert [getattr(r, "code", r) for r in results] == [-32002] * len(calls)
    assert all("outside" in r.message for r in results if isinstance(r, RpcError))
    assert sorted(p.name for p in outside.iterdir()) == [name]
    assert (outside / name).read_text(encoding="utf-8") == "not a memory of this project\n"


async def test_a_dir_two_settings_point_at_is_checked_by_each_when_swapped(
    daemon: DaemonHandle, project: Path, memdir: Path, tmp_path: Path
) -> None:
    # Left by session 21: the check under the lock asked only the setting that last asked for
    # the dir. Another project's settings.local.json naming this project's default dir
    # (explicit: a link out of the config dir is allowed for it) asked last, so a write of
    # this project, whose default dir may not be a link out of the config dir, went through
    # such a link swapped in while it waited for the lock. Every setting pointing at the dir
    # is asked now.
    import json

    await daemon.call("memory.write", cwd=str(project), **USER)
    other = tmp_path / "other"
    (other / ".claude").mkdir(parents=True)
    (other / ".claude" / "settings.local.json").write_text(
        json.dumps({"autoMemoryDirectory": str(memdir)})
    )
    outside = tmp_path / "outside"
    outside.mkdir()
    am = daemon.daemon.services.automem
    async with am.writer_lock(memdir):
        call = asyncio.ensure_future(
            daemon.call("memory.write", cwd=str(project), **{**USER, "name": "queued"})
        )
        while not am.writer_lock(memdir)._waiters:
            await asyncio.sleep(0.01)
        # The other project asks for the dir while this project's write waits.
        context = await daemon.call("get_context", cwd=str(other))
        assert Path(context["memory_dir"]) == memdir
        os.rename(memdir, memdir.with_name("memory.moved"))
        os.symlink(outside, memdir)
    (result,) = await asyncio.gather(call, return_exceptions=True)
    assert getattr(result, "code", result) == -32002
    assert list(outside.iterdir()) == []
