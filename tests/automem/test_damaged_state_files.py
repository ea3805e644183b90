"""memoryd's own state files, damaged (a disk error, a bad restore, an edit): JSON nested too
deep for the parser (RecursionError) is read as unreadable, as other damage is, with a
warning; it raised out of the reader and failed every extraction (extraction places) or
every turn of the session (session records)."""

from __future__ import annotations

from pathlib import Path

from memoryd.automem.cursors import Cursors
from memoryd.session import state
from tests.conftest import IsolatedEnv

DEEP = "[" * 100_000 + "]" * 100_000


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
