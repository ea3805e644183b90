"""A memory file saved by someone who takes no lock (an editor, Claude Code's agent) while
memoryd overwrites, restores or deletes it: the save lands after memoryd copied the file to
its history and before memoryd's rename or unlink. It is copied too: every version is in
history or on disk. Before session 21 the copy held what was there before the save (or half
of an in-place save: its truncate, then its write), and the save was gone."""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memoryd.automem import writes
from memoryd.automem.index_writer import IndexWriter
from memoryd_client import RpcError
from tests.automem.conftest import memory_text
from tests.conftest import DaemonHandle

SAVED = memory_text("Likes tea", "drinks", "user", "Saved by hand in the editor.")


async def _write(daemon: DaemonHandle, project: Path, body: str) -> Path:
    res = await daemon.call(
        "memory.write", cwd=str(project), type="user", name="Likes tea", description="d", body=body
    )
    return Path(res["path"])


def _kept(daemon: DaemonHandle, project: Path, path: Path) -> list[bytes]:
    am = daemon.daemon.services.automem
    project_ = daemon.daemon.services.projects.resolve(project)
    memory_dir = am.memory_dir(project_)
    key = path.relative_to(memory_dir).as_posix()
    _, versions = am.versions(project_, key)
    return [am.history.read(memory_dir, key, v.version) for v in versions]


def _save_once(target: Path) -> Callable[[], None]:
    """The editor's in-place save, once."""
    done: list[int] = []

    def save() -> None:
        if not done and target.exists():
            done.append(1)
            with target.open("r+", encoding="utf-8") as handle:
                handle.truncate(0)
                handle.write(SAVED)

    return save


def _after_copy(monkeypatch: pytest.MonkeyPatch, save: Callable[[], None]) -> None:
    """`save` runs once memoryd copied the file, before it writes: where a write and a
    restore make their folders."""
    real = writes.make_private_dirs

    def hooked(path: Path, *args: Any, **kwargs: Any) -> Any:
        save()
        return real(path, *args, **kwargs)

    monkeypatch.setattr(writes, "make_private_dirs", hooked)


def _after_the_last_look(monkeypatch: pytest.MonkeyPatch, save: Callable[[], None]) -> None:
    """`save` runs right after a write's or restore's last look (`still`), before its rename."""
    real = writes.unchanged_since

    def look_then_save(target: Path, stamp: Any) -> Callable[[], bool]:
        still = real(target, stamp)

        def then_save() -> bool:
            answer = still()
            save()
            return answer

        return then_save

    monkeypatch.setattr(writes, "unchanged_since", look_then_save)


def _after_the_deletes_look(monkeypatch: pytest.MonkeyPatch, save: Callable[[], None]) -> list[int]:
    """`save` runs right after a delete's look for a save since its copy, before its unlink;
    the looks made, returned."""
    real = writes.save_stamp
    looks: list[int] = []

    def look_then_save(target: Path, **kwargs: Any) -> Any:
        stamp = real(target, **kwargs)
        looks.append(1)
        if len(looks) == 2:  # the look after the copy and the index line: then the save
            save()
        return stamp

    monkeypatch.setattr(writes, "save_stamp", look_then_save)
    return looks


@pytest.mark.parametrize(
    "when",
    # After the last look (`still`) the file is as it was copied, and the save lands before
    # the rename: into the file replaced. It is read from that file, held open, and kept.
    [_after_copy, _after_the_last_look],
    ids=["after-the-copy", "after-the-last-look-before-the-rename"],
)
async def test_an_editors_save_under_an_overwrite_is_kept(
    daemon: DaemonHandle,
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    when: Callable[[pytest.MonkeyPatch, Callable[[], None]], None],
) -> None:
    path = await _write(daemon, project, "Green tea.")
    when(monkeypatch, _save_once(path))
    await _write(daemon, project, "Black tea.")
    assert "Black tea." in path.read_text()
    assert SAVED.encode() in _kept(daemon, project, path)


@pytest.mark.parametrize(
    "by_rename",
    # A save by rename after the last look was replaced unseen until session 22 (below).
    [False, True],
    ids=["in-place-after-the-copy", "by-rename-after-the-last-look"],
)
async def test_an_editors_save_under_a_restore_is_kept(
    daemon: DaemonHandle, project: Path, monkeypatch: pytest.MonkeyPatch, by_rename: bool
) -> None:
    path = await _write(daemon, project, "Green tea.")
    await _write(daemon, project, "Black tea.")
    history = await daemon.call("memory.history", cwd=str(project), path=str(path))
    if by_rename:
        _after_the_last_look(monkeypatch, _rename_save_once(path))
    else:
        _after_copy(monkeypatch, _save_once(path))
    await daemon.call(
        "memory.restore",
        cwd=str(project),
        path=str(path),
        version=history["versions"][0]["version"],
    )
    assert "Green tea." in path.read_text()
    assert SAVED.encode() in _kept(daemon, project, path)


async def test_an_editors_save_under_a_delete_is_kept(
    daemon: DaemonHandle, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = await _write(daemon, project, "Green tea.")
    save = _save_once(path)
    real = IndexWriter.remove_line

    def hooked(*args: Any, **kwargs: Any) -> Any:  # after the copy, before the unlink
        save()
        return real(*args, **kwargs)

    monkeypatch.setattr(IndexWriter, "remove_line", staticmethod(hooked))
    await daemon.call("memory.delete", cwd=str(project), path=str(path))
    assert not path.exists()
    assert SAVED.encode() in _kept(daemon, project, path)


async def test_a_write_whose_folder_is_removed_under_it_is_made_again(
    daemon: DaemonHandle, project: Path, memdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by the session 21 hunt (the memory folder removed, rm -rf, during a write storm):
    # removed after memoryd made the folder and before its temp file was made there, the
    # write was -32603 FileNotFoundError. It is tried again, the folder made again.
    from memoryd import fsutil

    await _write(daemon, project, "Green tea.")
    real = fsutil.stage_file
    removed: list[int] = []

    def removed_first(folder: Path, *args: Any, **kwargs: Any) -> Any:
        if not removed and folder == memdir:
            removed.append(1)
            shutil.rmtree(memdir)
        return real(folder, *args, **kwargs)

    monkeypatch.setattr(fsutil, "stage_file", removed_first)
    path = await _write(daemon, project, "Black tea.")
    assert removed
    assert "Black tea." in path.read_text()


@pytest.mark.parametrize("by_rename", [False, True], ids=["in-place", "by-rename"])
async def test_an_editors_save_after_the_last_look_before_the_unlink_is_kept(
    daemon: DaemonHandle, project: Path, monkeypatch: pytest.MonkeyPatch, by_rename: bool
) -> None:
    # Found by the session 21 review: the delete's last look for a save since its copy found
    # none, and a save landing before the file was opened to be held across the unlink was
    # deleted uncopied (the file held open only from after that look). Session 22: a save by
    # rename there (a new file, not the one held open) was unlinked uncopied; the file is
    # taken out by a rename and looked at before it is removed.
    path = await _write(daemon, project, "Green tea.")
    save = _rename_save_once(path) if by_rename else _save_once(path)
    looks = _after_the_deletes_look(monkeypatch, save)
    await daemon.call("memory.delete", cwd=str(project), path=str(path))
    assert not path.exists()
    assert len(looks) >= 2
    assert SAVED.encode() in _kept(daemon, project, path)


async def test_a_delete_refused_after_its_index_line_went_puts_the_line_back(
    daemon: DaemonHandle, project: Path, memdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by the session 21 review: the file swapped for a link after its line left the
    # index (the look for a save since the copy refuses to copy through it, -32002) left the
    # memory there with no line: only an OSError of the unlink put the line back.
    path = await _write(daemon, project, "Green tea.")
    real = IndexWriter.remove_line
    elsewhere = memdir.parent / "elsewhere.md"
    elsewhere.write_text(SAVED)

    def then_swapped(*args: Any, **kwargs: Any) -> Any:
        answer = real(*args, **kwargs)
        path.unlink()
        path.symlink_to(elsewhere)
        return answer

    monkeypatch.setattr(IndexWriter, "remove_line", staticmethod(then_swapped))
    with pytest.raises(Exception, match="became a symlink"):
        await daemon.call("memory.delete", cwd=str(project), path=str(path))
    assert path.is_symlink()
    assert f"({path.name})" in (memdir / "MEMORY.md").read_text()


async def test_a_late_save_that_cannot_be_copied_fails_no_write_that_landed(
    daemon: DaemonHandle, project: Path, memdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by the session 21 review: the copy of a save landing under the rename, made after
    # the rename, failed the write (a full state disk: -32603 "nothing was changed") with the
    # memory replaced and its index line never queued; and a delete's put its line back with
    # the file gone. The write stands and the lost save is logged.
    from structlog.testing import capture_logs

    from memoryd.automem.history import History

    path = await _write(daemon, project, "Green tea.")
    await daemon.call(
        "memory.write",
        cwd=str(project),
        type="user",
        name="Likes coffee",
        description="d",
        body="b",
    )
    real_save = History.save

    def full_for_the_save(
        self: History, memory_dir: Path, file: str, content: bytes, reason: str
    ) -> Any:
        if content == SAVED.encode():
            raise OSError(28, "No space left on device")
        return real_save(self, memory_dir, file, content, reason)

    monkeypatch.setattr(History, "save", full_for_the_save)
    _after_the_last_look(monkeypatch, _save_once(path))
    with capture_logs() as logs:
        await _write(daemon, project, "Black tea.")
    assert "Black tea." in path.read_text()
    assert f"({path.name})" in (memdir / "MEMORY.md").read_text()
    assert "an editor's save under a change not kept" in [e["event"] for e in logs]
    # A delete: the save lands after its last look, under the unlink.
    _after_the_deletes_look(monkeypatch, _save_once(path))
    with capture_logs() as logs:
        await daemon.call("memory.delete", cwd=str(project), path=str(path))
    assert "an editor's save under a change not kept" in [e["event"] for e in logs]
    assert not path.exists()
    assert f"({path.name})" not in (memdir / "MEMORY.md").read_text()


def _assert_put_back(memdir: Path, path: Path) -> None:
    """A delete that failed leaves the memory's index line, and no temp file beside it."""
    assert f"({path.name})" in (memdir / "MEMORY.md").read_text()
    assert [p.name for p in memdir.iterdir() if p.name.startswith(".")] == []


def _rename_save_once(target: Path, *, new: bool = False) -> Callable[[], None]:
    """The editor's save by rename (`:w` with `backupcopy=no`, most GUI editors): a new file
    written beside it, then renamed over it, once (`new`: also where there is none yet)."""
    done: list[int] = []

    def save() -> None:
        if not done and (new or target.exists()):
            done.append(1)
            staged = target.with_name(f"{target.name}~new")
            staged.write_text(SAVED, encoding="utf-8")
            staged.replace(target)

    return save


async def test_an_editors_save_by_rename_after_the_last_look_is_kept(
    daemon: DaemonHandle, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Left by session 21: a save by rename landing after the write's last look and before its
    # rename was replaced unseen (a new file: the one held open was no longer there). The new
    # file is swapped in (RENAME_EXCHANGE) and what came out is looked at: not what memoryd
    # read, so it is someone's save, kept in history.
    path = await _write(daemon, project, "Green tea.")
    _after_the_last_look(monkeypatch, _rename_save_once(path))
    await _write(daemon, project, "Black tea.")
    assert "Black tea." in path.read_text()
    assert SAVED.encode() in _kept(daemon, project, path)
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []


async def test_a_file_made_by_rename_under_a_first_write_is_kept(
    daemon: DaemonHandle, project: Path, memdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first write of a name: nothing there at the last look, an editor's new file renamed
    # into place before memoryd's rename. It was replaced unseen; now it is found there (no
    # replace of a file that appeared: RENAME_NOREPLACE), copied, and the write made over it.
    await _write(daemon, project, "Green tea.")
    target = memdir / "new_fact.md"
    _after_the_last_look(monkeypatch, _rename_save_once(target, new=True))
    await daemon.call(
        "memory.write",
        cwd=str(project),
        type="user",
        name="Likes tea",
        description="d",
        body="Black tea.",
        file="new_fact.md",
    )
    assert "Black tea." in target.read_text()
    assert SAVED.encode() in _kept(daemon, project, target)


async def test_a_folder_renamed_over_a_memory_under_its_delete_is_put_back(
    daemon: DaemonHandle, project: Path, memdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The delete takes the file out by a rename to look at it: a folder renamed there after
    # its last look is no memory, so it goes back as it was, the delete refused as a copy of
    # it is, and the memory's index line stays.
    path = await _write(daemon, project, "Green tea.")
    done: list[int] = []

    def folder_over_it() -> None:
        if not done:
            done.append(1)
            folder = memdir / "elsewhere"
            folder.mkdir()
            (folder / "inside.txt").write_text("kept")
            path.unlink()
            folder.rename(path)

    _after_the_deletes_look(monkeypatch, folder_over_it)
    with pytest.raises(Exception, match="not a regular file"):
        await daemon.call("memory.delete", cwd=str(project), path=str(path))
    assert (path / "inside.txt").read_text() == "kept"
    _assert_put_back(memdir, path)


async def test_a_save_by_rename_under_a_delete_whose_copy_fails_is_put_back(
    daemon: DaemonHandle, project: Path, memdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by the session 22 review: the delete took the file out by a rename and only a
    # refusal (ChangedMeanwhile) put it back; a copy of a save by rename that failed (a full
    # disk) left it under its temp name, the delete reported failed, its index line put back,
    # and the next start swept the file as a temp file a killed write left.
    path = await _write(daemon, project, "Green tea.")
    save = _rename_save_once(path)
    _after_the_deletes_look(monkeypatch, save)
    history = daemon.daemon.services.automem.history
    real = history.save

    def full_disk(memory_dir: Path, file: str, content: bytes, reason: str) -> Any:
        if content == SAVED.encode():
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(memory_dir, file, content, reason)

    monkeypatch.setattr(history, "save", full_disk)
    with pytest.raises(Exception, match="disk is full"):
        await daemon.call("memory.delete", cwd=str(project), path=str(path))
    assert path.read_text(encoding="utf-8") == SAVED
    _assert_put_back(memdir, path)


async def test_a_taken_out_memory_whose_unlink_fails_is_put_back(
    daemon: DaemonHandle, project: Path, memdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by the session 22 review: since the delete takes the file out by a rename first,
    # an unlink that failed (EIO) left it under its temp name, the delete reported failed and
    # its index line put back, and the next start swept the file; before, it stayed in place.
    path = await _write(daemon, project, "Green tea.")
    real = os.unlink

    def unlink(target: Any, *args: Any, **kwargs: Any) -> None:
        name = os.path.basename(os.fsdecode(target))
        if name.startswith(f".{path.name}.") and name.endswith(".tmp"):
            raise OSError(errno.EIO, "Input/output error", os.fsdecode(target))
        real(target, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)
    with pytest.raises(RpcError):
        await daemon.call("memory.delete", cwd=str(project), path=str(path))
    monkeypatch.undo()
    assert "Green tea." in path.read_text(encoding="utf-8")
    _assert_put_back(memdir, path)
