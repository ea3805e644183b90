"""The session notes stay small enough for an update request to carry them.

Found by the fourth hunt: a draft the agent filled with the conversation pasted back (300,000
characters, ~75,000 tokens) was kept (the bound was 400,000 characters), and every later
update sent those notes next to up to 120,000 tokens of transcript, over a 200,000-token
context.
"""

from __future__ import annotations

from pathlib import Path

from memoryd.session import state
from memoryd.session.service import MAX_NOTES_TOKENS
from memoryd.session.template import builtin_template
from tests.conftest import DaemonHandle
from tests.fakes.messages_api import text_reply, tool_use_reply
from tests.session.builders import assistant, conversation
from tests.session.conftest import SessionModel
from tests.session.test_service import SID, TITLE_LINE, draft_of, idle, summary_path


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


async def test_notes_over_the_bound_are_not_sent_to_the_model(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path
) -> None:
    # Trimmed by hand they are updated again; meanwhile compact still uses them (cut).
    summary = summary_path(daemon_with_model, project_dir)
    summary.parent.mkdir(parents=True)
    summary.write_text("# Worklog\n" + "- did a thing, then another one\n" * 6_000)  # ~48k tokens
    await _turn(daemon_with_model, project_dir)
    assert session_model.requests == []
    record, _ = state.load(summary.parent.parent.parent.name, SID)
    assert record.last_error is not None
    assert f"over the {MAX_NOTES_TOKENS:,} an update sends" in record.last_error
    assert "trim them" in record.last_error
    result = await daemon_with_model.call(
        "compact", session_id=SID, cwd=str(project_dir), messages=conversation(20_000)
    )
    assert result["used_session_memory"] is True
