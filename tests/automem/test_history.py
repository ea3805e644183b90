"""History: versions newest first, identical content not kept twice, ids validated."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from memoryd.automem.history import History
from memoryd.errors import InvalidParams, NotFound


def test_versions_newest_first(tmp_path: Path) -> None:
    h = History(tmp_path / "hist")
    mem = tmp_path / "mem"
    v1 = h.save(mem, "a.md", b"one", "overwrite")
    v2 = h.save(mem, "a.md", b"two!", "delete")
    assert v1 is not None
    assert v2 is not None
    listed = h.versions(mem, "a.md")
    assert [v.version for v in listed] == [v2.version, v1.version]
    assert [(v.size, v.reason) for v in listed] == [(4, "delete"), (3, "overwrite")]
    assert h.read(mem, "a.md", v1.version) == b"one"
    assert listed[0].as_dict()["time"].endswith("+00:00")


def test_same_content_not_kept_twice(tmp_path: Path) -> None:
    h = History(tmp_path)
    assert h.save(tmp_path / "m", "a.md", b"x", "overwrite") is not None
    assert h.save(tmp_path / "m", "a.md", b"x", "overwrite") is None
    assert len(h.versions(tmp_path / "m", "a.md")) == 1


def test_files_and_dirs_kept_apart(tmp_path: Path) -> None:
    h = History(tmp_path)
    h.save(tmp_path / "m1", "a.md", b"1", "overwrite")
    h.save(tmp_path / "m2", "a.md", b"2", "overwrite")
    h.save(tmp_path / "m1", "team/a.md", b"3", "overwrite")
    assert [
        len(h.versions(tmp_path / d, f))
        for d, f in (("m1", "a.md"), ("m2", "a.md"), ("m1", "team/a.md"))
    ] == [1, 1, 1]


@pytest.mark.parametrize("version", ["../../etc/passwd", "", "123", "00000000000000000001-../x"])
def test_bad_version_ids(tmp_path: Path, version: str) -> None:
    with pytest.raises(InvalidParams):
        History(tmp_path).read(tmp_path / "m", "a.md", version)


def test_missing_version(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        History(tmp_path).read(tmp_path / "m", "a.md", "00000000000000000001-overwrite")


def test_long_names_stay_short(tmp_path: Path) -> None:
    h = History(tmp_path)
    folder = h.folder(tmp_path / ("d" * 300), "f" * 300 + ".md")
    assert all(len(part) <= 120 for part in folder.relative_to(tmp_path).parts)


def test_files_that_sanitise_alike_keep_separate_histories(tmp_path: Path) -> None:
    from memoryd.automem.history import History

    history = History(tmp_path / "h")
    memdir = tmp_path / "m"
    history.save(memdir, "feedback_x.md", b"underscore", "write")
    history.save(memdir, "feedback-x.md", b"dash", "write")
    assert history.folder(memdir, "feedback_x.md") != history.folder(memdir, "feedback-x.md")
    assert len(history.versions(memdir, "feedback_x.md")) == 1
    assert len(history.versions(memdir, "feedback-x.md")) == 1
    assert history.folder(tmp_path / "a" / "b-c", "x.md") != history.folder(
        tmp_path / "a" / "b" / "c", "x.md"
    )


@pytest.mark.parametrize("junk", ["dangling link", "folder", "fifo"])
def test_junk_named_like_a_version_is_skipped(tmp_path: Path, junk: str) -> None:
    import os

    h = History(tmp_path / "hist")
    mem = tmp_path / "mem"
    v1 = h.save(mem, "a.md", b"one", "overwrite")
    assert v1 is not None
    newest = h.folder(mem, "a.md") / "09999999999999999999-overwrite.md"
    if junk == "dangling link":
        newest.symlink_to(tmp_path / "gone" / "x.md")
    elif junk == "folder":
        newest.mkdir()
    else:
        os.mkfifo(newest)
    assert [v.version for v in h.versions(mem, "a.md")] == [v1.version]
    assert h.save(mem, "a.md", b"two", "overwrite") is not None  # neither read nor waited on
    with pytest.raises(NotFound):
        h.read(mem, "a.md", "09999999999999999999-overwrite")


def test_a_clock_set_back_keeps_the_newest_version_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Versions are named by the time they were kept; a clock set back (NTP after a VM
    resume, a dead RTC battery) named the next one older than the last: it was listed below
    it, `memory.restore` of "the newest" put back an older text, and the same text kept
    twice in a row was not seen as such."""
    from memoryd.automem import history

    h = History(tmp_path / "hist")
    mem = tmp_path / "mem"
    clock = iter([2_000_000_000_000_000_000, 1_000_000_000_000_000_000, 999_000_000_000_000_000])
    monkeypatch.setattr(history, "time", SimpleNamespace(time_ns=lambda: next(clock)))
    h.save(mem, "a.md", b"before the jump", "overwrite")
    later = h.save(mem, "a.md", b"after the jump", "overwrite")
    assert later is not None
    assert h.versions(mem, "a.md")[0].version == later.version
    assert h.save(mem, "a.md", b"after the jump", "overwrite") is None  # the newest, again
    assert len(h.versions(mem, "a.md")) == 2


class _Entry:
    """A directory entry that counts its stat calls."""

    def __init__(self, entry: os.DirEntry[str], stats: list[str]) -> None:
        self._entry, self._stats = entry, stats
        self.name, self.path = entry.name, entry.path

    def is_file(self, *, follow_symlinks: bool = True) -> bool:
        return self._entry.is_file(follow_symlinks=follow_symlinks)

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
        self._stats.append(self.name)
        return self._entry.stat(follow_symlinks=follow_symlinks)


def test_a_save_lists_the_versions_once_and_stats_only_the_newest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A save listed and stat'ed every version, sorted them, then listed them all again for the
    # name check: 47 ms at 5,000 versions against 3 ms at 100 (bench/bench_history.py).
    h = History(tmp_path / "hist")
    mem = tmp_path / "mem"
    for n in range(30):
        h.save(mem, "a.md", f"text {n}".encode(), "overwrite")
    newest = h.versions(mem, "a.md")[0]
    listings: list[str] = []
    stats: list[str] = []
    real_scandir, real_listdir = os.scandir, os.listdir

    class _Listing:
        def __init__(self, path: str | Path) -> None:
            listings.append(str(path))
            self._it = real_scandir(path)

        def __enter__(self) -> Iterator[_Entry]:
            return (_Entry(e, stats) for e in self._it)

        def __exit__(self, *exc: object) -> None:
            self._it.close()

        def __iter__(self) -> Iterator[_Entry]:
            return (_Entry(e, stats) for e in self._it)

    def listdir(path: str | Path = ".") -> list[str]:
        listings.append(str(path))
        return real_listdir(path)

    real_lstat = os.lstat

    def lstat(path: str | Path) -> os.stat_result:
        if str(path).endswith("-overwrite.md"):
            stats.append(str(path))
        return real_lstat(path)

    monkeypatch.setattr(os, "scandir", _Listing)
    monkeypatch.setattr(os, "listdir", listdir)
    monkeypatch.setattr(os, "lstat", lstat)
    kept = h.save(mem, "a.md", b"one more", "overwrite")
    monkeypatch.undo()
    # One listing; of the 30 versions, only the newest is looked at.
    assert (len(listings), len(stats)) == (1, 1)
    assert kept is not None
    assert kept.version > newest.version
    assert h.versions(mem, "a.md")[0] == kept
    assert h.save(mem, "a.md", b"one more", "overwrite") is None  # the newest, found by name
