"""The file that keeps extraction's place per session across restarts (`automem.cursors`):
read back as written, bounded, and a broken one is a fresh start, never a failure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.automem import cursors
from memoryd.automem.cursors import Cursor, Cursors


def _saved(store: Cursors) -> None:
    text = store.unsaved()
    assert text is not None
    store.write(text)


def test_places_come_back_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "state" / "extraction_cursors.json"
    store = Cursors(path)
    store["a"] = Cursor(12, "m1")
    store["b"] = Cursor(3, None)
    store["gone"] = Cursor(1, "x")
    store.pop("gone")
    _saved(store)
    assert store.unsaved() is None  # nothing changed since
    again = Cursors(path)
    assert again.get("a") == Cursor(12, "m1")
    assert again.get("b") == Cursor(3, None)
    assert again.get("gone") is None
    assert path.stat().st_mode & 0o777 == 0o600


def test_only_the_sessions_set_last_are_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cursors, "MAX_SAVED", 3)
    path = tmp_path / "c.json"
    store = Cursors(path)
    for i in range(5):
        store[f"s{i}"] = Cursor(i, None)
    store["s0"] = Cursor(9, None)  # set again: among the newest
    _saved(store)
    again = Cursors(path)
    assert [again.get(f"s{i}") is not None for i in range(5)] == [True, False, False, True, True]


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"\xff\xfe",
        b"[]",
        json.dumps({"version": 1, "sessions": [["a", 1]]}).encode(),
        json.dumps({"version": 1, "sessions": [["a", -1, None], ["b", True, None]]}).encode(),
    ],
)
def test_a_broken_file_is_a_fresh_start(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "c.json"
    path.write_bytes(content)
    store = Cursors(path)
    assert store.get("a") is None
    assert store.get("b") is None
    store["c"] = Cursor(1, None)  # and it is written anew
    _saved(store)
    assert Cursors(path).get("c") == Cursor(1, None)


def test_a_place_that_cannot_be_written_is_logged_not_raised(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = Cursors(blocker / "c.json")  # under a file: every write fails
    store["a"] = Cursor(1, None)
    _saved(store)
    assert store.get("a") == Cursor(1, None)
