"""`fsutil.atomic_write_bytes(came_out=…)`: the new file is swapped in (renameat2
RENAME_EXCHANGE) and what it replaced is looked at before it is removed; put back when the
look refuses it; a plain replace where renameat2 is not to be had."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from memoryd import fsutil
from memoryd.fsutil import ChangedMeanwhile, atomic_write_bytes


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    made = tmp_path / "folder"
    made.mkdir()
    return made


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _fail_the_exchange_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The second RENAME_EXCHANGE (the put back's; the first is the swap's) fails with EIO."""
    real = fsutil._rename_flags
    swaps: list[int] = []

    def second_exchange_fails(source: Path, dest: Path, flags: int) -> bool:
        if flags == fsutil._RENAME_EXCHANGE:
            swaps.append(1)
            if len(swaps) == 2:
                raise OSError(errno.EIO, "I/O error")
        return real(source, dest, flags)

    monkeypatch.setattr(fsutil, "_rename_flags", second_exchange_fails)


def test_what_came_out_is_seen_then_removed(folder: Path) -> None:
    target = folder / "a.md"
    target.write_text("old")
    seen: list[str] = []
    atomic_write_bytes(target, b"new", came_out=lambda out: seen.append(out.read_text()))
    assert seen == ["old"]
    assert target.read_text() == "new"
    assert _names(folder) == ["a.md"]


def test_nothing_there_is_a_plain_create(folder: Path) -> None:
    seen: list[Path] = []
    atomic_write_bytes(folder / "a.md", b"new", came_out=seen.append)
    assert seen == []
    assert (folder / "a.md").read_text() == "new"


def test_a_refusal_puts_back_what_came_out(folder: Path) -> None:
    target = folder / "a.md"
    target.write_text("someone's save")

    def refuse(out: Path) -> None:
        raise ChangedMeanwhile(errno.EAGAIN, "not ours")

    with pytest.raises(ChangedMeanwhile):
        atomic_write_bytes(target, b"new", came_out=refuse)
    assert target.read_text() == "someone's save"
    assert _names(folder) == ["a.md"]


def test_a_folder_swapped_in_is_put_back(folder: Path) -> None:
    # RENAME_EXCHANGE swaps a file with a folder: the look refuses it, and it goes back.
    target = folder / "a.md"
    target.mkdir()
    (target / "inside").write_text("x")

    def refuse_folders(out: Path) -> None:
        if out.is_dir():
            raise ChangedMeanwhile(errno.EAGAIN, "a folder")

    with pytest.raises(ChangedMeanwhile):
        atomic_write_bytes(target, b"new", came_out=refuse_folders)
    assert (target / "inside").read_text() == "x"
    assert _names(folder) == ["a.md"]


@pytest.mark.parametrize("code", [errno.EINVAL, errno.ENOSYS])
def test_without_renameat2_it_is_a_plain_replace(
    folder: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    # A filesystem (some FUSE, NFS) or kernel without the flag: replaced as before, unseen.
    def unsupported(*args: object) -> int:
        import ctypes

        ctypes.set_errno(code)
        return -1

    monkeypatch.setattr(fsutil, "_renameat2", lambda: unsupported)
    target = folder / "a.md"
    target.write_text("old")
    seen: list[Path] = []
    atomic_write_bytes(target, b"new", came_out=seen.append)
    assert seen == []
    assert target.read_text() == "new"
    atomic_write_bytes(folder / "b.md", b"made", came_out=seen.append)
    assert (folder / "b.md").read_text() == "made"
    assert _names(folder) == ["a.md", "b.md"]


def test_no_libc_call_is_a_plain_replace(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fsutil, "_renameat2", lambda: None)
    target = folder / "a.md"
    target.write_text("old")
    atomic_write_bytes(target, b"new", came_out=lambda out: None)
    assert target.read_text() == "new"
    assert _names(folder) == ["a.md"]


def test_a_file_made_between_the_two_renames_is_swapped_not_replaced(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing there for the exchange (ENOENT), a file made before the no-replace rename: that
    # one fails (EEXIST) and the next exchange takes the file out, to be seen.
    target = folder / "a.md"
    real = fsutil._rename_flags
    made: list[int] = []

    def made_between(source: Path, dest: Path, flags: int) -> bool:
        if flags == fsutil._RENAME_NOREPLACE and not made:
            made.append(1)
            dest.write_text("someone's")
        return real(source, dest, flags)

    monkeypatch.setattr(fsutil, "_rename_flags", made_between)
    seen: list[str] = []
    atomic_write_bytes(target, b"new", came_out=lambda out: seen.append(out.read_text()))
    assert seen == ["someone's"]
    assert target.read_text() == "new"
    assert _names(folder) == ["a.md"]


def test_the_temp_file_gone_is_an_error_not_a_replace(folder: Path) -> None:
    target = folder / "a.md"
    target.write_text("old")
    staged = fsutil.stage_file(folder, b"new", prefix=".a.md.")
    os.unlink(staged)
    with pytest.raises(FileNotFoundError):
        fsutil.swap_in(staged, target)
    assert target.read_text() == "old"


def test_a_save_met_by_a_put_back_is_kept_beside_under_a_legal_name(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `take_out`, then a save lands at the name before `put_back`: the taken-out file stays
    # beside it, under a name no longer than its temp name (a 255-byte memory name's kept
    # copy was 256 bytes long: ENAMETOOLONG, and the put back failed).
    target = folder / ("m" * 252 + ".md")
    target.write_text("taken out")
    out = fsutil.take_out(target)
    assert len(out.name.encode()) <= 255
    target.write_text("someone's save")
    fsutil.put_back(out, target)
    assert target.read_text() == "someone's save"
    (kept,) = [p for p in folder.iterdir() if p.name.endswith(".kept")]
    assert kept.read_text() == "taken out"
    assert len(kept.name.encode()) <= 255


def test_what_came_out_goes_back_when_the_new_file_is_removed_before_the_put_back(
    folder: Path,
) -> None:
    # Found by the session 22 review: the put back began with an lstat of the new file, and
    # its failure (the file removed meanwhile: an `rm` while the look copied what came out)
    # was swallowed with the rest, so the caller removed the temp name, which still held what
    # came out: someone's save, gone.
    target = folder / "a.md"
    target.write_text("someone's save")

    def removed_then_refused(out: Path) -> None:
        os.unlink(target)
        raise ChangedMeanwhile(errno.EAGAIN, "not ours")

    with pytest.raises(ChangedMeanwhile):
        atomic_write_bytes(target, b"new", came_out=removed_then_refused)
    assert target.read_text() == "someone's save"
    assert _names(folder) == ["a.md"]


def test_what_came_out_is_kept_beside_when_it_cannot_be_exchanged_back(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The exchange back failing (EIO, say) left what came out at the temp name, removed.
    target = folder / "a.md"
    target.write_text("someone's save")
    _fail_the_exchange_back(monkeypatch)

    def refuse(out: Path) -> None:
        raise ChangedMeanwhile(errno.EAGAIN, "not ours")

    with pytest.raises(ChangedMeanwhile):
        atomic_write_bytes(target, b"new", came_out=refuse)
    (kept,) = [p for p in folder.iterdir() if p.name.endswith(".kept")]
    assert kept.read_text() == "someone's save"


def test_a_save_landing_while_what_came_out_is_looked_at_stays(folder: Path) -> None:
    # Found by helper C3 in session 22: the put back took whatever was at the name when it
    # began for memoryd's new file, so an editor's save landing there during the look (by
    # rename, over the new file) was exchanged out and removed with the temp name.
    target = folder / "a.md"
    target.write_text("original")

    def saved_then_refused(out: Path) -> None:
        side = folder / "editor.swp"
        side.write_text("the editor's save")
        os.rename(side, target)
        raise ChangedMeanwhile(errno.EAGAIN, "not ours")

    with pytest.raises(ChangedMeanwhile):
        atomic_write_bytes(target, b"new", came_out=saved_then_refused)
    assert target.read_text() == "the editor's save"
    (kept,) = [p for p in folder.iterdir() if p.name.endswith(".kept")]
    assert kept.read_text() == "original"
    assert len(list(folder.iterdir())) == 2


def test_what_came_out_is_not_removed_when_it_cannot_be_kept_beside(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Review of session 22 (RV7): with the exchange back failed, what came out stays at the
    # temp name if its rename to `.kept` fails too (a full directory: ENOSPC); the caller
    # removed the temp name all the same, and someone's save with it.
    target = folder / "a.md"
    target.write_text("someone's save")

    def full(out: Path, why: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    _fail_the_exchange_back(monkeypatch)
    monkeypatch.setattr(fsutil, "_keep_beside", full)

    def refuse(out: Path) -> None:
        raise ChangedMeanwhile(errno.EAGAIN, "not ours")

    with pytest.raises(ChangedMeanwhile):
        atomic_write_bytes(target, b"new", came_out=refuse)
    texts = sorted(p.read_text() for p in folder.iterdir())
    assert texts == ["new", "someone's save"]


def test_a_name_that_is_not_utf8_is_written_taken_out_and_swept(folder: Path) -> None:
    # Found by the session 22 review: the temp name was cut from the name's UTF-8 encoding,
    # which a byte that is not UTF-8 (`caf\xe9.md`, a Latin-1 name the agent's Glob shows as
    # `caf%E9.md` since 59c7c9a) cannot take: an agent's Edit of that memory, its delete and
    # the sweep of its temp files raised UnicodeEncodeError.
    target = folder / os.fsdecode(b"caf\xe9.md")
    target.write_bytes(b"old")
    seen: list[bytes] = []
    atomic_write_bytes(target, b"new", came_out=lambda out: seen.append(out.read_bytes()))
    assert (seen, target.read_bytes()) == ([b"old"], b"new")
    out = fsutil.take_out(target)
    assert out.name.startswith(os.fsdecode(b".caf\xe9.md."))
    fsutil.put_back(out, target)
    assert _names(folder) == [target.name]
    out = fsutil.take_out(target)
    assert fsutil.remove_stale_staged(folder, float("inf"), names=[target.name]) == [out]


def test_a_long_name_is_cut_between_characters_for_its_temp_name(folder: Path) -> None:
    # 250 bytes: cut to 241 for the temp name, inside the last `é` (2 bytes), which goes whole.
    target = folder / ("m" * 240 + "é" + "x.md")
    atomic_write_bytes(target, b"new")
    staged = fsutil.stage_file(folder, b"x", prefix=fsutil._staged_prefix(target.name))
    assert staged.name.startswith("." + "m" * 240 + ".")
    assert len(staged.name.encode()) <= 255
