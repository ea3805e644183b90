"""The extraction agent's duplicate screen (`agent_guards.refusing_duplicates`) over a run: it
compares a new memory with the memories as the run left them, its own Edits included."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.agent.secret_screen import WriteScreen
from memoryd.agent.tools import ToolError, WriteOp
from memoryd.automem.agent_guards import refusing_duplicates
from memoryd.automem.store import DirState
from memoryd.fsutil import save_stamp
from tests.automem.conftest import memory_text

TABS = memory_text("Tabs", "indentation", "user", "The user indents with tabs, never spaces.")
DEPLOY = memory_text(
    "Deploys", "how deploys go", "project", "Deploy with `make ship` from the release branch."
)


def _screen(memory_dir: Path) -> WriteScreen:
    """The screen of a run that starts now (the dir's memories as the store has them)."""
    state = DirState(memory_dir, sweep_interval_s=3600)
    state.refresh()
    return refusing_duplicates(lambda path, op: None, memory_dir, state.snapshot())


def _edit(path: Path, text: str) -> WriteOp:
    return WriteOp(path, text, created=False, planned_over=save_stamp(path, follow_links=False))


def _create(path: Path, text: str) -> WriteOp:
    return WriteOp(path, text, created=True, planned_over=None)


def test_a_fact_an_edit_moved_away_may_be_written_again(tmp_path: Path) -> None:
    # The run edited user_tabs.md to hold another fact: the tabs fact is in no file now, and
    # before it was refused as held by user_tabs.md (the model then dropped it).
    (tmp_path / "user_tabs.md").write_text(TABS)
    check = _screen(tmp_path)
    edited = memory_text("Editor", "the user's editor", "user", "The user edits in Helix.")
    assert check(tmp_path / "user_tabs.md", _edit(tmp_path / "user_tabs.md", edited)) is None
    (tmp_path / "user_tabs.md").write_text(edited)  # as the loop performs it
    new = tmp_path / "user_indent.md"
    assert check(new, _create(new, TABS)) is None


def test_a_fact_an_edit_moved_in_is_not_written_twice(tmp_path: Path) -> None:
    # The run edited project_notes.md to hold the deploy fact; before, a Write of it under
    # another name was let through: two memories of one fact.
    notes = memory_text("Release notes", "where notes go", "project", "Notes go in CHANGES.")
    (tmp_path / "project_notes.md").write_text(notes)
    check = _screen(tmp_path)
    new = tmp_path / "project_ship.md"
    assert (
        check(tmp_path / "project_notes.md", _edit(tmp_path / "project_notes.md", DEPLOY)) is None
    )
    (tmp_path / "project_notes.md").write_text(DEPLOY)
    with pytest.raises(ToolError, match=r"project_notes\.md holds this memory already"):
        check(new, _create(new, DEPLOY))


def test_a_file_the_run_created_then_edited_is_compared_as_edited(tmp_path: Path) -> None:
    check = _screen(tmp_path)
    first = tmp_path / "user_tabs.md"
    assert check(first, _create(first, TABS)) is None
    first.write_text(TABS)
    edited = memory_text("Editor", "the user's editor", "user", "The user edits in Helix.")
    assert check(first, _edit(first, edited)) is None
    first.write_text(edited)
    again = tmp_path / "user_indent.md"
    assert check(again, _create(again, TABS)) is None
