"""A MEMORY.md that cannot be rewritten (a full disk, an immutable file): the memory files stay
the truth, no write is reported failed once its file is saved, no queued line is lost, and a
delete never leaves its line behind for a file that is gone.

The faults are real: a tmpfs filled up (ENOSPC) and `chattr +i` (EPERM) need root, which CI
has; elsewhere those tests skip. A MEMORY.md that is a folder needs nothing special."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.automem.warmup import ORPHAN_GRACE_S
from memoryd_client import RpcError
from tests.automem.conftest import memory_text
from tests.conftest import DaemonHandle
from tests.fakes.full_disk import SmallDisks


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[None]:
    if os.geteuid() != 0:
        pytest.skip("chattr +i needs root")
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"chattr +i is not supported here: {done.stderr.decode().strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=False)


async def _write(daemon: DaemonHandle, project: Path, name: str) -> dict[str, object]:
    result: dict[str, object] = await daemon.call(
        "memory.write",
        cwd=str(project),
        type="user",
        name=name,
        description=f"about {name}",
        body=f"{name}.",
    )
    return result


async def test_a_write_whose_index_line_meets_a_full_disk_is_saved_with_a_warning(
    daemon: DaemonHandle, project: Path, memdir: Path, small_disks: SmallDisks
) -> None:
    # The memory file was saved, then MEMORY.md's rewrite hit ENOSPC: the write answered
    # -32603, though its file stayed (and no memory/saved was sent).
    small_disks.mount(memdir)
    await _write(daemon, project, "Likes tea")
    free = small_disks.fill(
        memdir, room=1
    )  # room for the memory file, none for the index's rewrite
    result = await _write(daemon, project, "Likes coffee")
    saved = Path(str(result["path"]))
    assert saved.is_file()
    (warning,) = result["warnings"]  # type: ignore[misc]
    assert "No space left on device" in warning
    assert saved.name not in (memdir / "MEMORY.md").read_text()
    free()
    # The line stayed queued: the next sweep writes it once there is room.
    am = daemon.daemon.services.automem
    await am.index_writer.index_orphans(memdir, ORPHAN_GRACE_S)
    index = (memdir / "MEMORY.md").read_text()
    assert index.count("(user_likes_coffee.md)") == 1
    assert "(user_likes_tea.md)" in index


async def test_a_failed_flush_keeps_every_writers_queued_line(
    daemon: DaemonHandle, project: Path, memdir: Path, small_disks: SmallDisks
) -> None:
    # A flush writes the lines of every writer queued behind the lock; one that failed
    # dropped them all, and the other writers had been told their memory was indexed.
    small_disks.mount(memdir)
    await _write(daemon, project, "Likes tea")
    for name in ("a", "b"):
        (memdir / f"{name}.md").write_text(memory_text(name.upper(), name, "user", "x"))
    free = small_disks.fill(memdir)
    writer = daemon.daemon.services.automem.index_writer
    async with daemon.daemon.services.automem.writer_lock(memdir):
        writer.queue(memdir, "a.md", "A", "a")
        writer.queue(memdir, "b.md", "B", "b")
    problem = await writer.flush(memdir)
    assert problem is not None
    assert "could not be rewritten" in problem
    free()
    assert await writer.flush(memdir) is None
    index = (memdir / "MEMORY.md").read_text()
    assert "- [A](a.md) — a" in index
    assert "- [B](b.md) — b" in index


async def test_a_write_beside_an_immutable_index_says_what_mends_it(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    # Found by a bug hunt: the warning said only "Operation not permitted" (EPERM), which names
    # no way out; a delete's error named `chattr -i -a` (c422c02), a write's did not.
    await _write(daemon, project, "Likes tea")
    with immutable(memdir / "MEMORY.md"):
        result = await _write(daemon, project, "Likes coffee")
    (warning,) = result["warnings"]  # type: ignore[misc]
    assert "Operation not permitted" in warning
    assert "chattr -i -a" in warning
    assert Path(str(result["path"])).is_file()


async def test_a_delete_the_index_refuses_leaves_the_memory_and_its_line(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    # The file was unlinked first, then the index rewrite failed: -32603, the file gone (a
    # retry was -32001) and its line in every prompt for good.
    tea = Path(str((await _write(daemon, project, "Likes tea"))["path"]))
    await _write(daemon, project, "Likes coffee")
    with immutable(memdir / "MEMORY.md"), pytest.raises(RpcError) as failed:
        await daemon.call("memory.delete", cwd=str(project), path=str(tea))
    assert failed.value.code == -32603
    assert tea.is_file()
    assert "(user_likes_tea.md)" in (memdir / "MEMORY.md").read_text()
    # Once the index can be written, the delete goes through, its line with it.
    await daemon.call("memory.delete", cwd=str(project), path=str(tea))
    assert not tea.exists()
    index = (memdir / "MEMORY.md").read_text()
    assert "(user_likes_tea.md)" not in index
    assert "(user_likes_coffee.md)" in index
    context = await daemon.call("get_context", cwd=str(project))
    assert "user_likes_tea.md" not in context["claude_md"]


async def test_a_delete_with_a_folder_for_an_index_deletes_nothing(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    tea = Path(str((await _write(daemon, project, "Likes tea"))["path"]))
    (memdir / "MEMORY.md").unlink()
    (memdir / "MEMORY.md").mkdir()
    with pytest.raises(RpcError) as failed:
        await asyncio.wait_for(daemon.call("memory.delete", cwd=str(project), path=str(tea)), 10)
    assert failed.value.code == -32002
    assert tea.is_file()  # it was unlinked before the index was found to be a folder


async def test_a_delete_whose_file_cannot_go_puts_its_line_back(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    tea = Path(str((await _write(daemon, project, "Likes tea"))["path"]))
    before = (memdir / "MEMORY.md").read_text()
    with immutable(tea), pytest.raises(RpcError):
        await daemon.call("memory.delete", cwd=str(project), path=str(tea))
    assert tea.is_file()
    assert (memdir / "MEMORY.md").read_text() == before


async def test_a_line_put_back_after_a_failed_delete_keeps_an_edit_made_meanwhile(
    daemon: DaemonHandle, project: Path, memdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryd.automem.index_writer import IndexWriter

    tea = Path(str((await _write(daemon, project, "Likes tea"))["path"]))
    index = memdir / "MEMORY.md"
    theirs = "- [Added by the agent](agent_note.md) — written while the delete ran\n"
    remove_line = IndexWriter.remove_line

    def remove_then_edit(memory_dir: Path, key: str, known: object = ()) -> object:
        removed = remove_line(memory_dir, key, known)  # type: ignore[arg-type]
        with index.open("a", encoding="utf-8") as handle:  # an outside writer takes no lock
            handle.write(theirs)
        return removed

    from memoryd.automem import writes

    real_take_out = writes.take_out

    def take_out(path: Path) -> Path:  # the delete's rename of the file out of its place
        if path == tea:
            raise PermissionError(1, "Operation not permitted", str(path))
        return real_take_out(path)

    monkeypatch.setattr(IndexWriter, "remove_line", staticmethod(remove_then_edit))
    monkeypatch.setattr(writes, "take_out", take_out)
    with pytest.raises(RpcError):
        await daemon.call("memory.delete", cwd=str(project), path=str(tea))
    text = index.read_text(encoding="utf-8")
    assert tea.is_file()
    assert tea.name in text  # its line is back
    assert theirs in text  # and the line written meanwhile was not dropped by the put back
