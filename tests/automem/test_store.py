"""The warm per-directory view: what is seen, when, and what is never followed."""

from __future__ import annotations

import os
from datetime import date, datetime
from pathlib import Path

from memoryd.automem.store import DirState, _file_day
from tests.automem.conftest import memory_text


def _write(path: Path, name: str, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(memory_text(name, f"about {name}", "user", body))


def test_created_replaced_and_deleted_files_seen_without_a_sweep(tmp_path: Path) -> None:
    state = DirState(tmp_path, sweep_interval_s=3600)
    _write(tmp_path / "a.md", "alpha", "one")
    state.refresh()
    assert list(state.entries) == ["a.md"]
    updates = state.updates
    _write(tmp_path / "b.md", "beta", "two")
    state.refresh()
    assert sorted(state.entries) == ["a.md", "b.md"]
    assert state.updates == updates + 1  # only the new file was read
    tmp = tmp_path / ".a.md.tmp"
    _write(tmp, "alpha2", "three")
    os.replace(tmp, tmp_path / "a.md")  # atomic replace: a new inode
    state.refresh()
    assert state.entries["a.md"].header.name == "alpha2"
    (tmp_path / "b.md").unlink()
    state.refresh()
    assert list(state.entries) == ["a.md"]
    assert state.index.search("beta") == []


def test_in_place_edit_seen_by_the_periodic_sweep(tmp_path: Path) -> None:
    state = DirState(tmp_path, sweep_interval_s=3600)
    _write(tmp_path / "a.md", "alpha", "one")
    state.refresh()
    with open(tmp_path / "a.md", "a") as handle:
        handle.write("okapi\n")
    state.refresh()
    assert state.index.search("okapi") == []  # same inode, same dir mtime: not yet
    state.sweep_interval_s = 0
    state.refresh()
    assert [k for k, _ in state.index.search("okapi")] == ["a.md"]


def test_team_subfolders_index_and_symlinks(tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    _write(outside / "secret.md", "secret", "private key material")
    mem = tmp_path / "mem"
    _write(mem / "team" / "api" / "notes.md", "api notes", "endpoints")
    _write(mem / "other" / "kept.md", "kept", "subfolders hold memories too")
    (mem / "MEMORY.md").write_text("- [x](x.md)\n")
    (mem / "link.md").symlink_to(outside / "secret.md")
    (mem / "team" / "linkdir").symlink_to(outside)
    (mem / "notes.txt").write_text("not markdown")
    state = DirState(mem)
    state.refresh()
    assert sorted(state.entries) == ["other/kept.md", "team/api/notes.md"]
    assert not state.entries["other/kept.md"].header.team
    header = state.entries["team/api/notes.md"].header
    assert header.team
    assert header.path == mem / "team" / "api" / "notes.md"


def test_team_folder_appearing_later_is_seen(tmp_path: Path) -> None:
    state = DirState(tmp_path, sweep_interval_s=3600)
    _write(tmp_path / "a.md", "alpha", "one")
    state.refresh()
    _write(tmp_path / "team" / "t.md", "team one", "shared")
    state.refresh()
    assert sorted(state.entries) == ["a.md", "team/t.md"]


def test_a_memory_naming_no_date_is_dated_by_its_files_last_write(tmp_path: Path) -> None:
    state = DirState(tmp_path, sweep_interval_s=0)
    _write(tmp_path / "a.md", "alpha", "no date here")
    _write(tmp_path / "b.md", "beta", "Session date: 8 May, 2023")
    _write(tmp_path / "team" / "c.md", "gamma", "synced, no date")
    os.utime(tmp_path / "a.md", (datetime(2024, 3, 2, 12).timestamp(),) * 2)
    state.refresh()
    assert state.index.memory_date("a.md") == date(2024, 3, 2)
    assert state.index.dated_by_file("a.md")
    assert state.index.memory_date("b.md") == date(2023, 5, 8)  # its text's date
    assert not state.index.dated_by_file("b.md")
    assert state.index.memory_date("team/c.md") is None  # its file time is the sync's
    # the date follows the file's time, even when only the time changed (the periodic sweep)
    os.utime(tmp_path / "a.md", (datetime(2025, 1, 9, 12).timestamp(),) * 2)
    state.refresh(force=True)
    assert state.index.memory_date("a.md") == date(2025, 1, 9)
    # the earliest time the file system keeps (1901) is no write's: undated, still loaded;
    # the latest (2514) is dated
    for extreme, dated in ((-(2**31), False), (2**34 - 1, True)):
        os.utime(tmp_path / "a.md", (extreme, extreme))
        state.refresh(force=True)
        assert (state.index.memory_date("a.md") is not None) is dated
        assert state.index.dated_by_file("a.md") is dated
        assert state.entries["a.md"].header.name == "alpha"


def test_a_file_time_no_date_can_hold_or_no_write_was_made_at_leaves_the_memory_undated() -> None:
    assert _file_day(10**21) is None  # beyond the year 9999: ValueError
    assert _file_day(-(10**20)) is None  # before the year 1
    assert _file_day(0) is None  # the epoch: a build tool's or an archive's stamp
    assert _file_day(1_000_000 * 10**9) is None  # 1970-01-12
    noon = datetime(1980, 1, 2, 12)
    assert _file_day(int(noon.timestamp() * 1e9)) == date(1980, 1, 2)


def test_a_binary_file_is_listed_with_why_and_never_ranked(tmp_path: Path) -> None:
    # Found by a hunt: an image (or a UTF-16 note, every other byte NUL) saved as a .md was
    # ranked by its name, and recall put its bytes, as U+FFFD and control characters, into the
    # prompt as a memory.
    (tmp_path / "user_okapi_photo.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00okapi" * 50)
    utf16 = memory_text("Okapi notes", "okapi facts", "user", "Okapis are shy.")
    (tmp_path / "user_okapi_notes.md").write_bytes(utf16.encode("utf-16"))
    _write(tmp_path / "user_okapi.md", "Okapi", "okapi zebra")
    state = DirState(tmp_path, sweep_interval_s=3600)
    state.refresh()
    assert [k for k, _ in state.index.search("okapi photo notes")] == ["user_okapi.md"]
    problems = {h.file: h.problem for h in state.headers()}
    assert problems["user_okapi.md"] is None
    for key in ("user_okapi_photo.md", "user_okapi_notes.md"):
        assert "binary" in (problems[key] or "")
        assert key not in state.embed_texts
