"""memoryd's own state files, damaged (a disk error, a bad restore, an edit): JSON nested too
deep for the parser (RecursionError) or a number too large for a float (OverflowError) is
read as unreadable, as other damage is, with a warning; it raised out of the reader and
failed every extraction (extraction places), every turn of the session (session records) or
every check whether a dream is due (dream.json). A whole number of 5,000 digits is read as
none (memoryd.jsonread), the rest of the file kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memoryd.automem import dream as dream_mod
from memoryd.automem.cursors import Cursor, Cursors
from memoryd.session import state
from tests.conftest import IsolatedEnv

DEEP = "[" * 100_000 + "]" * 100_000
# More digits than Python converts (4,300): json raised ValueError and the whole file was
# read as broken; the number is read as none now, and only what holds it is dropped.
LONG = "9" * 5_000


def test_extraction_places_nested_too_deep_start_afresh(tmp_path: Path) -> None:
    path = tmp_path / "extraction_cursors.json"
    path.write_text('{"version": 1, "sessions": ' + DEEP + "}\n")
    assert Cursors(path).get("s1") is None


def test_a_session_record_nested_too_deep_is_a_fresh_record(isolated_env: IsolatedEnv) -> None:
    path = state.record_path("-project", "s1")
    path.parent.mkdir(parents=True)
    path.write_text(DEEP)
    record, problem = state.load("-project", "s1")
    assert record.updates == 0
    assert problem is not None
    assert "ignoring corrupt" in problem


@pytest.mark.parametrize(
    "text",
    ['{"last_run": ' + DEEP + "}", '{"last_run": {"/p": ' + "9" * 400 + "}}"],
    ids=["nested too deep", "a number too big for a float"],
)
def test_dream_state_damaged_starts_afresh(isolated_env: IsolatedEnv, text: str) -> None:
    path = dream_mod.dream_state_path()
    path.parent.mkdir(parents=True)
    path.write_text(text)
    dream: Any = object.__new__(dream_mod.Dream)  # only its last-run bookkeeping is used
    dream._last_runs = None
    assert dream_mod.Dream.last_runs(dream) == {}


def test_a_session_record_with_a_time_too_big_for_a_float_is_read(
    isolated_env: IsolatedEnv,
) -> None:
    path = state.record_path("-project", "s1")
    path.parent.mkdir(parents=True)
    path.write_text('{"updates": 3, "last_update_at": ' + "9" * 400 + "}\n")
    record, problem = state.load("-project", "s1")
    assert problem is None
    assert record.updates == 3  # the rest of the record is kept
    assert record.last_update_at is None


@pytest.mark.parametrize(
    "entry",
    ["NaN", '"nan"', '"soon"', "null", "true", "[1]", pytest.param(LONG, id="5,000 digits")],
)
def test_a_dream_last_run_that_is_no_time_is_dropped_alone(
    isolated_env: IsolatedEnv, entry: str
) -> None:
    # Found by the session 21 review: NaN (or "nan") was taken as a time, and a dir whose
    # last run is NaN was never due again (each comparison with it false), silently; an entry
    # of another kind made the whole file unreadable, every other dir's dream due again.
    path = dream_mod.dream_state_path()
    path.parent.mkdir(parents=True)
    path.write_text('{"last_run": {"/p": ' + entry + ', "/q": 5.0}}')
    dream: Any = object.__new__(dream_mod.Dream)  # only its last-run bookkeeping is used
    dream._last_runs = None
    assert dream_mod.Dream.last_runs(dream) == {"/q": 5.0}


def test_extraction_places_with_a_long_number_keep_the_other_sessions(tmp_path: Path) -> None:
    path = tmp_path / "extraction_cursors.json"
    path.write_text('{"version": 1, "sessions": [["s1", ' + LONG + ', null], ["s2", 4, "m"]]}')
    places = Cursors(path)
    assert places.get("s1") is None
    assert places.get("s2") == Cursor(4, "m")


def test_a_session_record_with_a_long_number_keeps_the_rest(isolated_env: IsolatedEnv) -> None:
    path = state.record_path("-project", "s1")
    path.parent.mkdir(parents=True)
    path.write_text('{"updates": 3, "compactions": ' + LONG + "}\n")
    record, problem = state.load("-project", "s1")
    assert problem is None
    assert (record.updates, record.compactions) == (3, 0)
