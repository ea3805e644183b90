"""The session notes stay small enough for an update request to carry them.

Found by the fourth hunt: a draft the agent filled with the conversation pasted back (300,000
characters, ~75,000 tokens) was kept (the bound was 400,000 characters), and every later
update sent those notes next to up to 120,000 tokens of transcript, over a 200,000-token
context.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from memoryd.llm.tokens import estimate_text
from memoryd.session import service as service_module
from memoryd.session import state
from memoryd.session.service import MAX_NOTES_TOKENS
from memoryd.session.template import builtin_template
from tests.conftest import DaemonHandle
from tests.fakes.messages_api import text_reply, tool_use_reply
from tests.session.builders import assistant, conversation
from tests.session.conftest import SessionModel
from tests.session.test_service import (
    SID,
    TITLE_LINE,
    draft_of,
    edit_title,
    idle,
    summary_path,
)


async def _turn(handle: DaemonHandle, project_dir: Path) -> None:
    result = await handle.call(
        "after_turn",
        session_id=SID,
        cwd=str(project_dir),
        messages=[*conversation(12_000), assistant("done")],
    )
    assert result["scheduled"]["session_memory"] is True
    await idle(handle, project_dir)


async def test_a_draft_with_the_conversation_pasted_in_is_not_kept(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path
) -> None:
    summary = summary_path(daemon_with_model, project_dir)
    pasted = ("we changed the parser config and ran the tests again " * 6_000)[:300_000]
    session_model.enqueue(
        tool_use_reply(
            [
                (
                    "Edit",
                    {
                        "file_path": str(draft_of(summary)),
                        "old_string": TITLE_LINE,
                        "new_string": f"{TITLE_LINE}\n{pasted}",
                    },
                )
            ]
        ),
        text_reply("updated"),
    )
    await _turn(daemon_with_model, project_dir)
    assert summary.read_text() == builtin_template()
    record, _ = state.load(summary.parent.parent.parent.name, SID)
    assert record.last_error == (
        f"the agent left the notes empty or over {MAX_NOTES_TOKENS:,} tokens; kept the old ones"
    )
    assert record.summarized_messages is None  # the transcript is summarised again later
    assert daemon_with_model.daemon.worker_errors.get("session_memory", 0) == 1


async def test_notes_an_older_daemon_let_grow_are_cut_and_updated_again(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path
) -> None:
    # Found by a bug hunt: notes an older daemon kept at 40,000-100,000 tokens failed
    # every update of the session (`last_error` asked to trim them), so nothing said since
    # reached them. Now each section is cut as compact cuts it, the whole notes kept beside.
    summary = summary_path(daemon_with_model, project_dir)
    summary.parent.mkdir(parents=True)
    worklog = "".join(f"- step {i}: did a thing, then another one\n" for i in range(6_000))
    whole = f"# Session Title\n{TITLE_LINE}\nFix the parser\n# Worklog\n{worklog}"  # ~60k tokens
    summary.write_text(whole)
    session_model.enqueue(edit_title(summary, "Fresh title"), text_reply("updated"))
    await _turn(daemon_with_model, project_dir)
    assert len(session_model.requests) == 2
    sent = json.dumps(session_model.requests[0].json)
    assert "step 0:" in sent
    assert "step 5999:" not in sent
    notes = summary.read_text()
    aside = summary.with_name("summary.full.md")
    assert aside.read_text() == whole  # nothing lost
    assert stat.S_IMODE(aside.stat().st_mode) == 0o600
    assert "Fresh title" in notes
    assert "Fix the parser" in notes
    assert f"the full notes are in {aside}" in notes
    assert estimate_text(notes) < MAX_NOTES_TOKENS
    record, _ = state.load(summary.parent.parent.parent.name, SID)
    assert record.last_error is None
    assert record.updates == 1
    # Cut under compact's bounds: compact shows them as they are, naming the whole file.
    result = await daemon_with_model.call(
        "compact", session_id=SID, cwd=str(project_dir), messages=conversation(20_000)
    )
    assert result["used_session_memory"] is True
    assert result["cut_sections"] == []
    assert str(aside) in result["summary"]


async def test_notes_over_the_bound_edited_while_they_are_cut_keep_the_edit(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path
) -> None:
    summary = summary_path(daemon_with_model, project_dir)
    summary.parent.mkdir(parents=True)
    summary.write_text("# Worklog\n" + "- did a thing, then another one\n" * 6_000)
    edited = "# Worklog\n- trimmed by hand\n"
    real = service_module._replace_if_same

    def save_first(path: Path, expected: str, text: str) -> bool:
        path.write_text(edited)  # the user's save lands just before the cut is written
        return real(path, expected, text)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(service_module, "_replace_if_same", save_first)
        await _turn(daemon_with_model, project_dir)
    assert summary.read_text() == edited
    assert not summary.with_name("summary.full.md").exists()
    assert session_model.requests == []
    record, _ = state.load(summary.parent.parent.parent.name, SID)
    assert record.last_error == "the notes were edited during the update; kept the edit"
