"""after_turn and compact through a real daemon, with the scripted fake model."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from memoryd.automem.extraction import cursor_after, session_place
from memoryd.llm.tokens import estimate_messages
from memoryd.session import state
from memoryd.session.compaction import BOUNDARY_TAG
from memoryd.session.service import Session
from memoryd.session.template import builtin_template
from memoryd_client import AsyncClient, RpcError
from tests.conftest import DaemonHandle, daemon_config, fake_model_config, start_daemon, stop_daemon
from tests.fakes.messages_api import (
    FakeMessagesAPI,
    error_reply,
    message,
    slow,
    text_reply,
    tool_use_reply,
)
from tests.fakes.swapped_files import fifo_readers_freed
from tests.session.builders import assistant, conversation, tool_call, tool_result, user, words
from tests.session.conftest import SessionModel
from tests.session.test_compaction import assert_pairs_intact

SID = "sess-1"
TITLE_LINE = "_A short, specific title for this session (5-10 words)._"


def summary_path(handle: DaemonHandle, cwd: Path, session_id: str = SID) -> Path:
    project = handle.daemon.services.projects.resolve(cwd)
    return handle.daemon.services.session_memory.summary_path(project, session_id)


def draft_of(summary: Path) -> Path:
    return summary.with_name(".summary.draft.md")


def edit_title(summary: Path, title: str) -> Any:
    return tool_use_reply(
        [
            (
                "Edit",
                {
                    "file_path": str(draft_of(summary)),
                    "old_string": TITLE_LINE,
                    "new_string": f"{TITLE_LINE}\n{title}",
                },
            )
        ]
    )


def earlier_notes(summary: Path) -> str:
    """Write notes an earlier update left (the template with a title) and return them."""
    summary.parent.mkdir(parents=True)
    notes = builtin_template().replace(TITLE_LINE, f"{TITLE_LINE}\nEarlier title")
    summary.write_text(notes)
    return notes


async def subscribed(handle: DaemonHandle, *events: str) -> AsyncClient:
    client = await handle.client()
    await client.call("subscribe", {"events": list(events)})
    return client


async def wait_for_event(client: AsyncClient, method: str) -> dict[str, Any]:
    while True:
        # A background writer's run (model calls, file edits) took over 10 s on a loaded
        # machine: the wait is for the event, not a bound on how fast it comes.
        note = await client.next_notification(60)
        if note["method"] == method:
            params: dict[str, Any] = note["params"]
            return params


def session_of(handle: DaemonHandle, cwd: Path, session_id: str = SID) -> Session:
    return handle.daemon.services.session_memory.session(
        handle.daemon.services.projects.resolve(cwd), session_id
    )


async def idle(handle: DaemonHandle, cwd: Path, session_id: str = SID) -> None:
    session = session_of(handle, cwd, session_id)
    if session.running is not None:
        await asyncio.wait_for(asyncio.shield(session.running), 10)


# -- after_turn: input checks -------------------------------------------------------------
@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        ("not a list", "messages"),
        (
            [{"role": "user", "content": "hi"}, {"role": "system", "content": "x"}],
            "messages[1].role",
        ),
        ([{"content": "hi"}], "messages[0].role"),
        ([{"role": "user", "content": 5}], "messages[0].content"),
        ([{"role": "user", "content": ["bare string block"]}], "messages[0].content[0]"),
        ([{"role": "user", "content": [{"text": "no type"}]}], "messages[0].content[0]"),
        ([["not", "an", "object"]], "messages"),
    ],
)
async def test_after_turn_rejects_malformed_messages(
    daemon: DaemonHandle, project_dir: Path, messages: Any, fragment: str
) -> None:
    with pytest.raises(RpcError) as info:
        await daemon.call("after_turn", session_id=SID, cwd=str(project_dir), messages=messages)
    assert info.value.code == -32602
    assert fragment in info.value.message


@pytest.mark.parametrize("session_id", ["a/b", "..", "x..y", "", "../etc", "abc\n", "memory\n"])
@pytest.mark.parametrize("method", ["after_turn", "compact"])
async def test_bad_session_ids_are_refused(
    daemon: DaemonHandle, project_dir: Path, session_id: str, method: str
) -> None:
    with pytest.raises(RpcError) as info:
        await daemon.call(method, session_id=session_id, cwd=str(project_dir), messages=[])
    assert info.value.code == -32602
    assert "session_id" in info.value.message


async def test_compact_rejects_malformed_messages(daemon: DaemonHandle, project_dir: Path) -> None:
    with pytest.raises(RpcError) as info:
        await daemon.call(
            "compact",
            session_id=SID,
            cwd=str(project_dir),
            messages=[{"role": "tool", "content": ""}],
        )
    assert info.value.code == -32602
    assert "messages[0].role" in info.value.message


async def test_bad_usage_is_refused(daemon: DaemonHandle, project_dir: Path) -> None:
    with pytest.raises(RpcError) as info:
        await daemon.call(
            "after_turn",
            session_id=SID,
            cwd=str(project_dir),
            messages=[],
            usage={"input_tokens": -3},
        )
    assert info.value.code == -32602
    assert "usage.input_tokens" in info.value.message


async def test_empty_transcript(daemon: DaemonHandle, project_dir: Path) -> None:
    result = await daemon.call("after_turn", session_id=SID, cwd=str(project_dir), messages=[])
    assert result["tokens"] == 0
    assert result["scheduled"]["session_memory"] is False
    compacted = await daemon.call("compact", session_id=SID, cwd=str(project_dir), messages=[])
    assert compacted == {
        "messages": [],
        "used_session_memory": False,
        "reason": "empty_transcript",
        "summary_path": str(summary_path(daemon, project_dir)),
        "waited": "idle",  # was left out: docs/protocol.md lists it in every reply
    }


async def test_unknown_blocks_and_orphan_results_are_kept_and_counted(
    daemon: DaemonHandle, project_dir: Path
) -> None:
    base = [user("hello"), assistant("hi")]
    odd = [
        *base,
        {"role": "assistant", "content": [{"type": "future_block", "payload": "p" * 4000}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "missing", "content": "x"}],
        },
    ]
    plain = await daemon.call(
        "after_turn", session_id="s-plain", cwd=str(project_dir), messages=base
    )
    result = await daemon.call("after_turn", session_id="s-odd", cwd=str(project_dir), messages=odd)
    assert result["tokens"] >= plain["tokens"] + 1000


async def test_usage_corrects_the_reported_size(daemon: DaemonHandle, project_dir: Path) -> None:
    messages = [user(words(2000)), assistant(words(500))]
    estimate = estimate_messages(messages)
    first = await daemon.call("after_turn", session_id=SID, cwd=str(project_dir), messages=messages)
    assert first["tokens"] == estimate
    usage = {"input_tokens": 6000, "output_tokens": 510, "service_tier": "standard"}
    second = await daemon.call(
        "after_turn", session_id=SID, cwd=str(project_dir), messages=messages, usage=usage
    )
    assert second["tokens"] == 6510
    grown = [*messages, user(words(100))]
    third = await daemon.call("after_turn", session_id=SID, cwd=str(project_dir), messages=grown)
    assert third["tokens"] == 6510 + estimate_messages(grown[-1:])


async def test_without_a_model_nothing_is_scheduled(
    daemon: DaemonHandle, project_dir: Path
) -> None:
    messages = [*conversation(12_000), assistant("done")]
    result = await daemon.call(
        "after_turn", session_id=SID, cwd=str(project_dir), messages=messages
    )
    assert result["scheduled"]["session_memory"] is False
    status = await daemon.call("status")
    assert status["features"]["session_memory"]["enabled"] is False
    assert "ANTHROPIC_API_KEY" in status["features"]["session_memory"]["reason"]


async def test_read_paths_become_touched_paths(daemon: DaemonHandle, project_dir: Path) -> None:

    await daemon.call(
        "after_turn",
        session_id=SID,
        cwd=str(project_dir),
        messages=[user("hi")],
        read_paths=[str(project_dir / "src" / "a.py"), "rel/b.py"],
    )
    touched = daemon.daemon.services.session_paths.get(project_dir, SID)
    assert touched == {str(project_dir / "src" / "a.py"), str(project_dir / "rel" / "b.py")}


# -- the summary update --------------------------------------------------------------------
async def test_update_edits_the_summary_through_the_agent(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path
) -> None:
    handle = daemon_with_model
    summary = summary_path(handle, project_dir)
    session_model.enqueue(edit_title(summary, "Fix the config parser"), text_reply("notes updated"))
    client = await subscribed(handle, "session/summary_updated")
    messages = [*conversation(12_000), assistant("all done")]
    system = [{"type": "text", "text": "You are a coding agent."}]
    result = await handle.call(
        "after_turn",
        session_id=SID,
        cwd=str(project_dir),
        messages=messages,
        system=system,
        model="claude-main",
    )
    assert result["scheduled"]["session_memory"] is True
    note = await wait_for_event(client, "session/summary_updated")
    assert note == {"session_id": SID, "path": str(summary)}

    text = summary.read_text()
    assert text == builtin_template().replace(TITLE_LINE, f"{TITLE_LINE}\nFix the config parser")
    assert stat.S_IMODE(summary.stat().st_mode) == 0o600
    assert stat.S_IMODE(summary.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(summary.parent.parent.stat().st_mode) == 0o700
    assert not draft_of(summary).exists()

    first = session_model.requests[0].json
    assert first["system"] == system  # the main conversation's prefix, for the prompt cache
    assert first["model"] == "claude-main"
    # The transcript as sent, its last block with the cache breakpoint.
    assert first["messages"][: len(messages) - 1] == messages[:-1]
    assert first["messages"][len(messages) - 1]["content"] == [
        {"type": "text", "text": "all done", "cache_control": {"type": "ephemeral"}}
    ]
    prompt = first["messages"][-1]["content"][-1]["text"]
    assert str(draft_of(summary)) in prompt
    assert TITLE_LINE in prompt
    assert {t["name"] for t in first["tools"]} <= {
        "Read",
        "Grep",
        "Glob",
        "Edit",
        "MultiEdit",
        "Write",
    }

    record, _ = state.load(summary.parent.parent.parent.name, SID)
    assert record.updates == 1
    assert record.summarized_messages == len(messages)
    assert record.thresholds.initialized
    await client.close()


async def test_the_agent_may_write_nothing_but_its_summary(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path, tmp_path: Path
) -> None:
    handle = daemon_with_model
    summary = summary_path(handle, project_dir)
    other = project_dir / "CLAUDE.md"
    session_model.enqueue(
        tool_use_reply([("Write", {"file_path": str(other), "content": "pwned"})]),
        tool_use_reply(
            [("Write", {"file_path": str(summary), "content": "overwrite the real file directly"})]
        ),
        tool_use_reply([("Bash", {"command": "ls /"})]),
        text_reply("gave up"),
    )
    client = await subscribed(handle, "worker/error", "session/summary_updated")
    messages = [*conversation(12_000), assistant("done")]
    result = await handle.call(
        "after_turn", session_id=SID, cwd=str(project_dir), messages=messages
    )
    assert result["scheduled"]["session_memory"] is True
    await idle(handle, project_dir)
    await client.call("status")  # its reply comes after every notification already sent
    errors = []
    while not client.notifications.empty():
        errors.append(client.notifications.get_nowait())
    assert not other.exists()
    assert summary.read_text() == builtin_template()
    denied = [
        e["params"]["message"]
        for e in errors
        if e["method"] == "worker/error" and e["params"]["worker"] == "session_memory"
    ]
    assert len(denied) == 4
    assert all("denied" in m for m in denied[:3])
    # The agent wrote nothing: the notes do not hold the transcript, nor count as if.
    assert "none of the agent's 2 write(s) went through" in denied[3]
    assert session_of(handle, project_dir).record.summarized_messages is None
    assert not any(e["method"] == "session/summary_updated" for e in errors)
    await client.close()


async def test_a_failed_update_keeps_the_previous_summary(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path
) -> None:
    handle = daemon_with_model
    summary = summary_path(handle, project_dir)
    previous = earlier_notes(summary)
    session_model.enqueue(
        edit_title(summary, "half-done"), error_reply(400, "invalid_request_error", "bad")
    )
    messages = [*conversation(12_000), assistant("done")]
    await handle.call("after_turn", session_id=SID, cwd=str(project_dir), messages=messages)
    await idle(handle, project_dir)
    assert summary.read_text() == previous
    assert not draft_of(summary).exists()
    record = session_of(handle, project_dir).record
    assert record.last_error is not None
    assert record.updates == 0


async def test_a_refused_update_is_a_failed_one(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path
) -> None:
    handle = daemon_with_model
    summary = summary_path(handle, project_dir)
    previous = earlier_notes(summary)
    # Half an edit, then the model declines (stop_reason "refusal"): before, the update counted
    # as done — the notes "covered" every message, so `compact` dropped what they never held.
    refusal = message(
        [
            {
                "type": "tool_use",
                "id": "toolu_r",
                "name": "Edit",
                "input": {"file_path": str(draft_of(summary)), "old_string": TITLE_LINE},
            }
        ],
        stop_reason="refusal",
    )
    session_model.enqueue(edit_title(summary, "half-done"), refusal)
    client = await subscribed(handle, "worker/error")
    messages = [*conversation(12_000), assistant("done")]
    await handle.call("after_turn", session_id=SID, cwd=str(project_dir), messages=messages)
    await idle(handle, project_dir)
    assert summary.read_text() == previous
    record = session_of(handle, project_dir).record
    assert record.last_error is not None
    assert "refusal" in record.last_error
    assert record.updates == 0
    assert record.summarized_messages is None
    note = await wait_for_event(client, "worker/error")
    while note["worker"] != "session_memory":  # extraction's own complaint comes too
        note = await wait_for_event(client, "worker/error")
    assert "declined" in note["message"]
    assert len(session_model.requests) == 2  # nothing more asked after the refusal
    await client.close()


async def test_an_update_killed_midway_keeps_the_previous_summary(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path
) -> None:
    handle = daemon_with_model
    summary = summary_path(handle, project_dir)
    session_model.enqueue(edit_title(summary, "half-done"), slow(30, text_reply("late")))
    messages = [*conversation(12_000), assistant("done")]
    await handle.call("after_turn", session_id=SID, cwd=str(project_dir), messages=messages)
    session = session_of(handle, project_dir)
    while len(session_model.requests) < 2:  # the draft has been edited
        await asyncio.sleep(0.02)
    assert "half-done" in draft_of(summary).read_text()
    assert session.running is not None
    session.running.cancel()
    await asyncio.gather(session.running, return_exceptions=True)
    assert summary.read_text() == builtin_template()
    assert not draft_of(summary).exists()


async def test_updates_are_sequential_and_coalesced(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path
) -> None:
    handle = daemon_with_model
    summary = summary_path(handle, project_dir)
    session_model.enqueue(slow(0.5, text_reply("no change")), text_reply("no change"))
    messages = [*conversation(12_000), assistant("done")]
    cwd = str(project_dir)
    session = session_of(handle, project_dir)
    updates_seen: list[int] = []  # finished updates, as each model request arrives
    session_model.on_request = lambda: updates_seen.append(session.record.updates)
    first = await handle.call("after_turn", session_id=SID, cwd=cwd, messages=messages)
    more = [*messages, *conversation(6_000), assistant("more")]
    second = await handle.call("after_turn", session_id=SID, cwd=cwd, messages=more)
    most = [*more, *conversation(6_000), assistant("most")]
    third = await handle.call("after_turn", session_id=SID, cwd=cwd, messages=most)
    assert first["scheduled"]["session_memory"]
    assert second["scheduled"]["session_memory"]
    assert third["scheduled"]["session_memory"]
    await idle(handle, project_dir)
    requests = session_model.requests
    assert len(requests) == 2  # the running update, then one follow-up with the latest turn
    assert updates_seen == [0, 1]  # sequential: the follow-up began after the first finished
    assert len(requests[1].json["messages"]) == len(most) + 1
    assert summary.exists()


# -- compact -------------------------------------------------------------------------------
async def test_compact_for_a_session_never_seen(daemon: DaemonHandle, project_dir: Path) -> None:
    messages = conversation(20_000)
    result = await daemon.call(
        "compact", session_id="never", cwd=str(project_dir), messages=messages
    )
    assert result["used_session_memory"] is False
    assert result["reason"] == "no_summary"
    assert result["messages"] == messages


async def test_compact_with_a_template_only_summary(
    daemon: DaemonHandle, project_dir: Path
) -> None:
    summary = summary_path(daemon, project_dir)
    summary.parent.mkdir(parents=True)
    summary.write_text(builtin_template())
    messages = conversation(20_000)
    result = await daemon.call("compact", session_id=SID, cwd=str(project_dir), messages=messages)
    assert result["used_session_memory"] is False
    assert result["reason"] == "empty_summary"
    assert result["messages"] == messages


async def test_compact_with_a_summary(daemon: DaemonHandle, project_dir: Path) -> None:
    summary = summary_path(daemon, project_dir)
    summary.parent.mkdir(parents=True)
    long_worklog = "\n".join(f"- step {i} " + "w" * 70 for i in range(300))
    summary.write_text(
        builtin_template()
        .replace(TITLE_LINE, f"{TITLE_LINE}\nFix the parser")
        .replace(
            "# Worklog\n_Terse step-by-step log of what was done, oldest first._",
            f"# Worklog\n{long_worklog}",
        )
    )
    messages = conversation(150_000, per_exchange=3_000, tools=2)
    result = await daemon.call("compact", session_id=SID, cwd=str(project_dir), messages=messages)
    assert result["used_session_memory"] is True
    assert result["reason"] is None
    out = result["messages"]
    assert out[0]["content"][0]["text"].startswith(BOUNDARY_TAG)
    text = out[1]["content"][0]["text"]
    assert "Fix the parser" in text
    assert "section cut for length" in text
    assert result["cut_sections"] == ["Worklog"]
    assert result["summary"] in text
    assert result["summary"].startswith("# Session Title")
    kept = out[2:]
    assert kept == messages[-len(kept) :]
    assert result["kept_messages"] == len(kept)
    assert 10_000 <= estimate_messages(kept) <= 40_000
    assert_pairs_intact(kept)
    assert result["tokens_after"] < result["tokens_before"]

    # The thresholds now measure growth from the compacted transcript.
    record, _ = state.load(summary.parent.parent.parent.name, SID)
    assert record.compactions == 1
    assert record.thresholds.initialized
    assert record.thresholds.messages_at_last_update == 2
    assert record.thresholds.tokens_at_last_update == result["tokens_after"]


async def test_compact_calls_of_one_transcript_at_once_are_one_compaction(
    daemon: DaemonHandle, project_dir: Path
) -> None:
    summary = summary_path(daemon, project_dir)
    summary.parent.mkdir(parents=True)
    summary.write_text("# Session Title\nFix the parser\n")
    messages = conversation(150_000, per_exchange=3_000, tools=2)
    extraction = daemon.daemon.services.extraction
    place = session_place(daemon.daemon.services.projects.resolve(project_dir), SID)
    extraction._cursor[place] = cursor_after(messages)  # all of it offered to extraction
    other = await daemon.client()
    params = {"session_id": SID, "cwd": str(project_dir), "messages": messages}
    first, second = await asyncio.gather(
        daemon.call("compact", **params), other.call("compact", params)
    )
    await other.close()
    # The second ran after the first: it read the first's count of summarised messages
    # (2, of the compacted list) against this one and kept 78 messages, not 21.
    assert first["used_session_memory"] is True
    assert second == first
    session = session_of(daemon, project_dir)
    assert session.record.compactions == 1
    # Extraction's cursor moved once: it is at the end of the compacted list.
    cursor = extraction._cursor.get(place)
    assert cursor is not None
    assert cursor.count == len(first["messages"])
    # Sent again later, the same; after a turn, a new compaction.
    again = await daemon.call("compact", **params)
    assert again == first
    assert session.record.compactions == 1
    await daemon.call("after_turn", **{**params, "messages": first["messages"]})
    await daemon.call("compact", **params)
    assert session.record.compactions == 2


async def test_touched_paths_survive_compaction(daemon: DaemonHandle, project_dir: Path) -> None:

    summary = summary_path(daemon, project_dir)
    summary.parent.mkdir(parents=True)
    summary.write_text("# Session Title\nWork on src\n")
    touched = str(project_dir / "src" / "deep" / "mod.py")
    await daemon.call(
        "after_turn",
        session_id=SID,
        cwd=str(project_dir),
        messages=[user("hi")],
        read_paths=[touched],
    )
    result = await daemon.call(
        "compact", session_id=SID, cwd=str(project_dir), messages=conversation(30_000)
    )
    assert result["used_session_memory"] is True
    assert touched in daemon.daemon.services.session_paths.get(project_dir, SID)


async def test_compact_waits_for_the_update_in_flight(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path
) -> None:
    handle = daemon_with_model
    summary = summary_path(handle, project_dir)
    session_model.enqueue(slow(0.5, edit_title(summary, "Fresh title")), text_reply("done"))
    messages = [*conversation(12_000), assistant("done")]
    params = {"session_id": SID, "cwd": str(project_dir), "messages": messages}
    await handle.call("after_turn", **params)
    result = await handle.call("compact", **params)
    assert result["waited"] == "waited"
    assert result["used_session_memory"] is True
    assert "Fresh title" in result["messages"][1]["content"][0]["text"]
    # Repeated, the same compaction, with what the repeat waited for: before session 21 the
    # first call's reply whole, "waited" though no update was in flight.
    again = await handle.call("compact", **params)
    assert again == {**result, "waited": "idle"}


def _string_chars(value: object) -> int:
    """The characters of every string `value` holds (through dicts, lists, tuples, fields)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_string_chars(k) + _string_chars(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return sum(_string_chars(v) for v in value)
    if hasattr(value, "__dataclass_fields__"):
        return sum(_string_chars(getattr(value, name)) for name in value.__dataclass_fields__)
    return 0


async def test_a_compaction_kept_for_a_repeat_does_not_hold_the_whole_notes(
    daemon: DaemonHandle, project_dir: Path
) -> None:
    # Before, each session kept the notes as read (up to 4 MiB) to compare a repeat with;
    # what the reply holds (the notes cut to ~24,000 tokens) is all that is kept now.
    summary = summary_path(daemon, project_dir)
    summary.parent.mkdir(parents=True)
    long_notes = "# Session Title\nBig\n# Worklog\n" + "".join(
        f"- step {i}: {words(20)}\n" for i in range(25_000)
    )
    summary.write_text(long_notes)
    params = {"session_id": SID, "cwd": str(project_dir), "messages": conversation(30_000)}
    first = await daemon.call("compact", **params)
    assert first["used_session_memory"] is True
    session = session_of(daemon, project_dir)
    assert len(long_notes) > 2_000_000
    assert _string_chars(session.compacted) < 4 * _string_chars(first["summary"]) < 1_000_000
    assert await daemon.call("compact", **params) == first  # the repeat still knows it
    summary.write_text(long_notes.replace("step 7:", "step seven:"))
    again = await daemon.call("compact", **params)
    assert session.record.compactions == 2  # notes changed: compacted again
    assert again["used_session_memory"] is True


async def test_waiting_is_bounded_and_a_stale_update_is_not_waited_for(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path
) -> None:
    handle = daemon_with_model
    session_model.enqueue(slow(30, text_reply("late")))
    messages = [*conversation(12_000), assistant("done")]
    await handle.call("after_turn", session_id=SID, cwd=str(project_dir), messages=messages)
    service = handle.daemon.services.session_memory
    session = service.session(handle.daemon.services.projects.resolve(project_dir), SID)
    while session.update_started is None:
        await asyncio.sleep(0.01)
    assert await service.wait_idle(session, wait_s=0.05) == "timeout"
    session.update_started = time.monotonic() - 61
    result = await handle.call("compact", session_id=SID, cwd=str(project_dir), messages=messages)
    assert result["waited"] == "dead"
    assert result["reason"] == "empty_summary"  # the template, never updated
    assert session.running is not None
    session.running.cancel()
    await asyncio.gather(session.running, return_exceptions=True)


async def test_compact_a_five_million_token_transcript(short_tmp: Path, project_dir: Path) -> None:
    # 5M tokens is ~25 MB of JSON, under the default 64 MiB line cap (set here as well, as a
    # user with such transcripts would run it).
    daemon = await start_daemon(daemon_config(short_tmp, line_limit=64 * 1024 * 1024))
    try:
        summary = summary_path(daemon, project_dir)
        summary.parent.mkdir(parents=True)
        summary.write_text("# Current State\nmigrating the database\n")
        call = tool_call(file_path="/huge")
        messages = [user("start"), call, tool_result(call, words(4_990_000)), *conversation(30_000)]
        turn = await daemon.call(
            "after_turn", session_id=SID, cwd=str(project_dir), messages=messages
        )
        assert turn["tokens"] > 5_000_000
        result = await daemon.call(
            "compact", session_id=SID, cwd=str(project_dir), messages=messages
        )
        assert result["used_session_memory"] is True
        assert estimate_messages(result["messages"]) < 45_000
    finally:
        await stop_daemon(daemon)


async def test_compact_of_a_transcript_too_long_to_echo_answers_its_reason(
    short_tmp: Path, project_dir: Path
) -> None:
    # Found by a bug hunt: with no summary, compact echoed the whole transcript; over the
    # 16 MiB reply cap that was -32004 "ask for less", and the reason never came back.
    daemon = await start_daemon(daemon_config(short_tmp, line_limit=64 * 1024 * 1024))
    try:
        call = tool_call(file_path="/huge")
        messages = [
            user("start"),
            call,
            tool_result(call, words(4_500_000)),
            assistant("ok"),
        ]  # ~17 MiB
        result = await daemon.call(
            "compact", session_id="long", cwd=str(project_dir), messages=messages
        )
        assert result["used_session_memory"] is False
        assert result["reason"] == "no_summary"
        assert result["messages_omitted"] is True  # the client's own list stands
        assert "messages" not in result
        short = await daemon.call(
            "compact", session_id="s", cwd=str(project_dir), messages=[user("hi")]
        )
        assert short["messages"] == [user("hi")]
        assert "messages_omitted" not in short
        # Half a surrogate pair (a string cut inside an emoji) has the request read by the
        # stdlib, which keeps an integer beyond 64 bits; orjson refuses the two, and compact
        # measured such a transcript as 0 bytes and echoed it: -32004, the reason lost.
        call = tool_call(file_path="/huge", offset=10**30)
        messages = [user("cut \ud83d"), call, tool_result(call, words(4_500_000)), assistant("ok")]
        result = await daemon.call(
            "compact", session_id="long", cwd=str(project_dir), messages=messages
        )
        assert result["reason"] == "no_summary"
        assert result["messages_omitted"] is True
    finally:
        await stop_daemon(daemon)


# -- restart safety ------------------------------------------------------------------------
async def test_thresholds_and_summary_survive_a_restart(
    short_tmp: Path, fake_model: FakeMessagesAPI, session_model: SessionModel, project_dir: Path
) -> None:
    config = daemon_config(short_tmp, model=fake_model_config(fake_model))
    messages = [*conversation(12_000), assistant("done")]
    first = await start_daemon(config)
    try:
        summary = summary_path(first, project_dir)
        session_model.enqueue(edit_title(summary, "Before restart"), text_reply("ok"))
        result = await first.call(
            "after_turn", session_id=SID, cwd=str(project_dir), messages=messages
        )
        assert result["scheduled"]["session_memory"]
        await idle(first, project_dir)
    finally:
        await stop_daemon(first)

    second = await start_daemon(config)
    try:
        cwd = str(project_dir)
        # 1k more tokens: under the 5k growth the restored state requires.
        grown = [*messages, user(words(1_000)), assistant("ok")]
        result = await second.call("after_turn", session_id=SID, cwd=cwd, messages=grown)
        assert result["scheduled"]["session_memory"] is False
        assert len(session_model.requests) == 2
        compacted = await second.call("compact", session_id=SID, cwd=cwd, messages=grown)
        assert compacted["used_session_memory"] is True
        assert "Before restart" in compacted["messages"][1]["content"][0]["text"]
    finally:
        await stop_daemon(second)


# -- instruction files across compaction -------------------------------------------------------
async def test_conditional_and_nested_rules_stay_active_after_compact(
    daemon: DaemonHandle, project_dir: Path
) -> None:
    rules = project_dir / ".claude" / "rules"
    rules.mkdir(parents=True)
    (project_dir / "CLAUDE.md").write_text("Root instructions.\n")
    (rules / "api.md").write_text("---\npaths: src/api/**\n---\nAPI RULE: validate input.\n")
    nested = project_dir / "sub" / "pkg"
    nested.mkdir(parents=True)
    (nested / "CLAUDE.md").write_text("NESTED RULE: keep pkg pure.\n")
    api_file = project_dir / "src" / "api" / "handlers.py"
    api_file.parent.mkdir(parents=True)
    api_file.write_text("x = 1\n")
    (nested / "mod.py").write_text("y = 2\n")
    cwd = str(project_dir)

    before = await daemon.call("get_context", cwd=cwd, session_id=SID)
    assert "API RULE" not in before["claude_md"]
    assert "NESTED RULE" not in before["claude_md"]

    messages = conversation(30_000)
    await daemon.call(
        "after_turn",
        session_id=SID,
        cwd=cwd,
        messages=messages,
        read_paths=[str(api_file), str(nested / "mod.py")],
    )
    active = await daemon.call("get_context", cwd=cwd, session_id=SID)
    assert "API RULE" in active["claude_md"]
    assert "NESTED RULE" in active["claude_md"]

    summary = summary_path(daemon, project_dir)
    summary.parent.mkdir(parents=True)
    summary.write_text("# Current State\nediting the API handlers\n")
    (project_dir / "CLAUDE.md").write_text("Root instructions, edited.\n")
    compacted = await daemon.call("compact", session_id=SID, cwd=cwd, messages=messages)
    assert compacted["used_session_memory"] is True

    # After compaction the client asks again, with no touched paths of its own.
    after = await daemon.call("get_context", cwd=cwd, session_id=SID)
    assert after["cached"] is False
    assert "API RULE" in after["claude_md"]
    assert "NESTED RULE" in after["claude_md"]
    assert "edited" in after["claude_md"]


async def test_summary_is_created_from_the_user_template(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path
) -> None:
    from memoryd.session.template import user_template_path

    template = user_template_path()
    template.parent.mkdir(parents=True)
    template.write_text("# Goal\n_what we are after_\n\n# Progress\n_where we are_\n")
    session_model.enqueue(text_reply("nothing to note yet"))
    messages = [*conversation(12_000), assistant("done")]
    await daemon_with_model.call(
        "after_turn", session_id=SID, cwd=str(project_dir), messages=messages
    )
    await idle(daemon_with_model, project_dir)
    summary = summary_path(daemon_with_model, project_dir)
    assert summary.read_text() == template.read_text()
    assert "# Goal" in session_model.requests[0].json["messages"][-1]["content"][-1]["text"]


@pytest.mark.parametrize("with_edit", [True, False])
async def test_main_conversation_tools_are_reused_when_they_include_edit(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path, with_edit: bool
) -> None:
    schema = {"type": "object", "properties": {}}
    tools = [{"name": "Read", "description": "read", "input_schema": schema}]
    if with_edit:
        tools.append({"name": "Edit", "description": "edit", "input_schema": schema})
    session_model.enqueue(text_reply("ok"))
    messages = [*conversation(12_000), assistant("done")]
    await daemon_with_model.call(
        "after_turn", session_id=SID, cwd=str(project_dir), messages=messages, tools=tools
    )
    await idle(daemon_with_model, project_dir)
    sent = session_model.requests[0].json["tools"]
    if with_edit:
        assert sent == tools
    else:
        assert "Edit" in {t["name"] for t in sent}


async def test_an_update_overtaken_by_compaction_does_not_record_a_stale_index(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path
) -> None:
    handle = daemon_with_model
    summary = summary_path(handle, project_dir)
    summary.parent.mkdir(parents=True)
    summary.write_text("# Current State\nbefore\n")
    session_model.enqueue(slow(1.0, text_reply("ok")))
    messages = [*conversation(60_000), assistant("done")]
    await handle.call("after_turn", session_id=SID, cwd=str(project_dir), messages=messages)
    service = handle.daemon.services.session_memory
    session = service.session(handle.daemon.services.projects.resolve(project_dir), SID)
    while session.update_started is None:
        await asyncio.sleep(0.01)
    session.update_started = time.monotonic() - 61  # make compact skip the wait
    result = await handle.call("compact", session_id=SID, cwd=str(project_dir), messages=messages)
    assert result["used_session_memory"] is True
    after_compact = session.record.summarized_messages
    await idle(handle, project_dir)
    assert session.record.updates == 1
    assert session.record.summarized_messages == after_compact


async def test_messages_after_the_clients_own_compaction_are_not_taken_as_summarised(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path
) -> None:
    # Found by a bug hunt: the count of messages the notes cover is of the transcript as it
    # was; after the client compacted on its own (Claude Code does), compact read it against
    # the new one and dropped messages the notes never saw (21 of 74 kept, ~11k tokens).
    handle = daemon_with_model
    summary = summary_path(handle, project_dir)
    session_model.enqueue(edit_title(summary, "Old work on the lexer"), text_reply("done"))
    old = [*conversation(150_000, per_exchange=3_000, tools=2), assistant("done")]
    await handle.call("after_turn", session_id=SID, cwd=str(project_dir), messages=old)
    await idle(handle, project_dir)
    session = session_of(handle, project_dir)
    assert session.record.summarized_messages == len(old)
    head = [user("The client's summary of the earlier conversation."), assistant("ok")]
    # Compacted by the client, no turn since: ~36k tokens the notes never saw, all kept.
    new = [*head, *conversation(36_000, per_exchange=3_000, tools=2)]
    result = await handle.call("compact", session_id=SID, cwd=str(project_dir), messages=new)
    assert result["used_session_memory"] is True
    assert result["kept_messages"] == len(new)
    # Compacted by the client, then turns, grown past the old count: all kept as well.
    session.record.summarized_messages = len(old)
    small = [m for _ in range(170) for m in (user(words(50)), assistant(words(50)))]
    grown = [*head, *small]
    await handle.call("after_turn", session_id=SID, cwd=str(project_dir), messages=grown[:40])
    assert len(grown) > len(old)
    result = await handle.call("compact", session_id=SID, cwd=str(project_dir), messages=grown)
    assert result["kept_messages"] == len(grown)
    # memoryd compacted (Claude Code's PreCompact hook) but the client went on with a list
    # of its own, longer than the count taken in memoryd's: all kept as well.
    session.record.summarized_messages = len(old)  # as an update of `old` leaves it
    session.record.summarized_in_compacted = False
    await handle.call("compact", session_id=SID, cwd=str(project_dir), messages=old)
    assert session.record.summarized_in_compacted is True
    await handle.call("after_turn", session_id=SID, cwd=str(project_dir), messages=new)
    await idle(handle, project_dir)  # the update fails: no reply scripted
    result = await handle.call("compact", session_id=SID, cwd=str(project_dir), messages=new)
    assert result["kept_messages"] == len(new)
    record, _ = state.load(session.record.project_key, SID)
    assert record.summarized_in_compacted is True  # the count of that last compaction


async def test_an_oversized_summary_file_is_read_in_part(
    daemon: DaemonHandle, project_dir: Path
) -> None:
    summary = summary_path(daemon, project_dir)
    summary.parent.mkdir(parents=True)
    summary.write_text("# Worklog\n" + ("- did a thing " + "x" * 60 + "\n") * 80_000)  # ~6 MB
    result = await daemon.call(
        "compact", session_id=SID, cwd=str(project_dir), messages=conversation(20_000)
    )
    assert result["used_session_memory"] is True
    assert estimate_messages(result["messages"][1:2]) < 3_000


async def test_an_oversized_summary_of_one_line_is_read_in_part(
    daemon: DaemonHandle, project_dir: Path
) -> None:
    summary = summary_path(daemon, project_dir)
    summary.parent.mkdir(parents=True)
    # No newline in its first 4 MiB, and "é" (two bytes) puts the cut inside a character: it
    # was cut at the last newline, to nothing, and answered "empty_summary".
    summary.write_text("Worked on the parser: " + "é" * 2_300_000, encoding="utf-8")
    result = await daemon.call(
        "compact", session_id=SID, cwd=str(project_dir), messages=conversation(20_000)
    )
    assert result["used_session_memory"] is True
    shown = json.dumps(result["messages"][1], ensure_ascii=False)
    assert "Worked on the parser: éé" in shown
    assert estimate_messages(result["messages"][1:2]) < 30_000


async def test_a_non_utf8_summary_is_reported_not_crashed(
    daemon: DaemonHandle, project_dir: Path
) -> None:
    summary = summary_path(daemon, project_dir)
    summary.parent.mkdir(parents=True)
    summary.write_bytes(b"# Title\n\xff\xfe broken\n")
    messages = conversation(20_000)
    result = await daemon.call("compact", session_id=SID, cwd=str(project_dir), messages=messages)
    assert result["used_session_memory"] is False
    assert result["reason"] == "unreadable_summary"
    assert result["messages"] == messages


async def test_evicted_sessions_keep_their_state(
    daemon: DaemonHandle, project_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryd.session import service as service_mod

    monkeypatch.setattr(service_mod, "MAX_SESSIONS_IN_MEMORY", 2)
    messages = [user(words(1_000)), assistant("ok")]
    usage = {"input_tokens": 4_000, "output_tokens": 10}
    first = await daemon.call(
        "after_turn", session_id="s-a", cwd=str(project_dir), messages=messages, usage=usage
    )
    for sid in ("s-b", "s-c", "s-d"):
        await daemon.call("after_turn", session_id=sid, cwd=str(project_dir), messages=messages)
    memory = daemon.daemon.services.session_memory
    assert memory.status_extra()["sessions"] == 2
    again = await daemon.call(
        "after_turn", session_id="s-a", cwd=str(project_dir), messages=messages
    )
    assert again["tokens"] == first["tokens"] == 4_010


async def test_evicted_sessions_with_nothing_to_keep_leave_no_record(
    daemon: DaemonHandle, project_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record is written when a session's state changes (docs/session-memory.md); eviction
    wrote one for every session, so each session id a client named left a file on disk for
    90 days. Its usage correction is still kept, in memory, for when it comes back."""
    from memoryd.session import service as service_mod
    from memoryd.session.state import sessions_root

    monkeypatch.setattr(service_mod, "MAX_SESSIONS_IN_MEMORY", 2)
    messages = [user(words(1_000)), assistant("ok")]
    usage = {"input_tokens": 4_000, "output_tokens": 10}
    first = await daemon.call(
        "after_turn", session_id="s-0", cwd=str(project_dir), messages=messages, usage=usage
    )
    for i in range(1, 40):
        await daemon.call(
            "after_turn", session_id=f"s-{i}", cwd=str(project_dir), messages=messages
        )
    assert list(sessions_root().rglob("*.json")) == []
    again = await daemon.call(
        "after_turn", session_id="s-0", cwd=str(project_dir), messages=messages
    )
    assert again["tokens"] == first["tokens"] == 4_010


async def test_a_turn_queued_before_a_compaction_does_not_record_a_stale_index(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path
) -> None:
    handle = daemon_with_model
    summary = summary_path(handle, project_dir)
    summary.parent.mkdir(parents=True)
    summary.write_text("# Current State\nbefore\n")
    session_model.enqueue(slow(1.0, text_reply("ok")), text_reply("ok"))
    cwd = str(project_dir)
    first = [*conversation(12_000), assistant("done")]
    await handle.call("after_turn", session_id=SID, cwd=cwd, messages=first)
    service = handle.daemon.services.session_memory
    session = service.session(handle.daemon.services.projects.resolve(project_dir), SID)
    while session.update_started is None:
        await asyncio.sleep(0.01)
    longer = [*first, *conversation(60_000), assistant("more")]
    queued = await handle.call("after_turn", session_id=SID, cwd=cwd, messages=longer)
    assert queued["scheduled"]["session_memory"] is True
    assert session.pending is not None
    session.update_started = time.monotonic() - 61  # make compact skip the wait
    result = await handle.call("compact", session_id=SID, cwd=cwd, messages=longer)
    assert result["used_session_memory"] is True
    after_compact = session.record.summarized_messages
    while session.running is not None and not session.running.done():
        await idle(handle, project_dir)
    assert session.record.updates == 2  # the queued turn ran ...
    # ... but its index counts the transcript the compaction replaced: not recorded.
    assert session.record.summarized_messages == after_compact


async def test_fifos_in_place_of_the_template_or_state_do_not_block_the_daemon(
    daemon_with_model: DaemonHandle, project_dir: Path
) -> None:
    from memoryd.session.template import user_template_path

    handle = daemon_with_model
    template = user_template_path()
    template.parent.mkdir(parents=True)
    os.mkfifo(template)
    summary = summary_path(handle, project_dir)
    summary.parent.mkdir(parents=True)
    summary.write_text("# Current State\nworking on the parser\n")
    messages = conversation(20_000)
    with fifo_readers_freed(template) as freed:
        result = await handle.call(
            "compact", session_id=SID, cwd=str(project_dir), messages=messages
        )
    assert result["used_session_memory"] is True
    assert freed == []  # the daemon (this test's loop) never waited at the FIFO
    template.unlink()

    key = handle.daemon.services.projects.resolve(project_dir).key
    record = state.record_path(key, "s-fifo")
    record.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(record)
    with fifo_readers_freed(record) as freed:
        turn = await handle.call(
            "after_turn", session_id="s-fifo", cwd=str(project_dir), messages=messages
        )
    assert turn["tokens"] > 0
    assert freed == []
    record.unlink(missing_ok=True)


async def test_a_tool_call_whose_input_is_not_an_object_is_counted(
    daemon: DaemonHandle, project_dir: Path
) -> None:
    messages = [
        user("run it"),
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "X", "input": 5}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
        },
    ]
    for method in ("after_turn", "compact"):
        result = await daemon.call(method, session_id=SID, cwd=str(project_dir), messages=messages)
        assert result


async def _an_update_under_way(
    handle: DaemonHandle, session_model: SessionModel, project_dir: Path
) -> Path:
    """Start an update whose agent answers after a second; its notes' path once it asked."""
    summary = summary_path(handle, project_dir)
    session_model.enqueue(slow(1.0, edit_title(summary, "the agent's title")), text_reply("ok"))
    messages = [*conversation(12_000), assistant("done")]
    await handle.call("after_turn", session_id=SID, cwd=str(project_dir), messages=messages)
    while not session_model.requests:
        await asyncio.sleep(0.01)
    return summary


async def test_an_edit_of_the_notes_during_an_update_wins(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path
) -> None:
    handle = daemon_with_model
    summary = await _an_update_under_way(handle, session_model, project_dir)
    mine = builtin_template().replace(TITLE_LINE, f"{TITLE_LINE}\nthe user's own title")
    summary.write_text(mine)
    await idle(handle, project_dir)
    assert summary.read_text() == mine
    record = session_of(handle, project_dir).record
    assert record.last_error is not None
    assert "edited during the update" in record.last_error
    assert record.summarized_messages is None  # the transcript is summarised again later


@pytest.mark.parametrize("removed", ["notes", "folder"])
async def test_notes_removed_during_an_update_stay_removed(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path, removed: str
) -> None:
    # Found by a bug hunt: notes the user deleted while the agent worked were written back
    # with its changes (a secret deleted from them came back), and with their folder removed
    # the update crashed on the agent's copy (a traceback, `last_error` saying nothing).
    handle = daemon_with_model
    summary = await _an_update_under_way(handle, session_model, project_dir)
    if removed == "notes":
        summary.unlink()
    else:
        shutil.rmtree(summary.parent)
    await idle(handle, project_dir)
    assert not summary.exists()
    session = session_of(handle, project_dir)
    assert session.record.last_error == "the notes were removed during the update; left removed"
    assert session.record.updates == 0
    assert session.running is not None
    assert session.running.exception() is None


async def test_notes_that_are_not_utf8_are_moved_aside_and_updates_go_on(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path
) -> None:
    handle = daemon_with_model
    summary = summary_path(handle, project_dir)
    summary.parent.mkdir(parents=True)
    broken = b"# Session Title\ncaf\xe9 notes\n"
    summary.write_bytes(broken)
    session_model.enqueue(edit_title(summary, "Fresh start"), text_reply("ok"))
    messages = [*conversation(12_000), assistant("done")]
    await handle.call("after_turn", session_id=SID, cwd=str(project_dir), messages=messages)
    await idle(handle, project_dir)
    assert (summary.parent / "summary.unreadable.md").read_bytes() == broken
    assert summary.read_text() == builtin_template().replace(
        TITLE_LINE, f"{TITLE_LINE}\nFresh start"
    )


async def test_an_update_puts_a_cache_breakpoint_on_the_transcripts_end(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path
) -> None:
    """The main conversation's prefix is reused for its prompt cache, but the API reads and
    writes its cache only at breakpoints: the update's requests carried none, and the
    transcript was billed uncached on each of them (an Edit, then the reply to its result)."""
    summary = summary_path(daemon_with_model, project_dir)
    session_model.enqueue(edit_title(summary, "Cached"), text_reply("done"))
    schema = {"type": "object", "properties": {}}
    tools = [
        {"name": "Read", "description": "read", "input_schema": schema},
        {"name": "Edit", "description": "edit", "input_schema": schema},
    ]
    messages = [*conversation(12_000), assistant("done")]
    await daemon_with_model.call(
        "after_turn",
        session_id=SID,
        cwd=str(project_dir),
        messages=messages,
        system="You are a coding agent.",
        tools=tools,
        model="claude-fake-large",
    )
    await idle(daemon_with_model, project_dir)
    assert "Cached" in summary.read_text()
    assert len(session_model.requests) == 2
    for turn, request in enumerate(session_model.requests):
        sent = request.json["messages"]
        assert sent[: len(messages) - 1] == messages[:-1]  # the prefix, byte for byte
        last = sent[len(messages) - 1]["content"][-1]
        assert last == {**messages[-1]["content"][-1], "cache_control": {"type": "ephemeral"}}
        # From the second request on, the agent loop's own: on the Edit's result.
        assert request.raw.count(b"cache_control") == 1 + turn
        assert request.json["system"] == "You are a coding agent."
        assert request.json["tools"] == tools


def test_an_edit_saved_while_the_update_is_written_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The update compares the notes with what its agent started from, then writes its own
    (a temp file, its fsync, the rename: milliseconds). A save by the user in that window was
    overwritten with nothing said; now the rename sees it and the edit wins, as it does when
    saved earlier (`test_an_edit_of_the_notes_during_an_update_wins`)."""
    from memoryd import fsutil
    from memoryd.session import service

    summary = tmp_path / "notes" / "summary.md"
    summary.parent.mkdir()
    summary.write_text("# Session Title\nstart\n")
    stage = fsutil.stage_file

    def staged_while_the_user_saves(*args: Any, **kwargs: Any) -> Path:
        staged = stage(*args, **kwargs)
        summary.write_text("# Session Title\nthe user's own edit\n")  # in place, as vim does
        return staged

    monkeypatch.setattr(fsutil, "stage_file", staged_while_the_user_saves)
    assert not service._replace_if_same(summary, "# Session Title\nstart\n", "# agent's\n")
    assert summary.read_text() == "# Session Title\nthe user's own edit\n"
    assert [p.name for p in summary.parent.iterdir()] == ["summary.md"]  # no temp file left


async def test_notes_that_cannot_be_created_say_so_not_that_they_cannot_be_read(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path
) -> None:
    handle = daemon_with_model
    summary = summary_path(handle, project_dir)
    summary.parent.parent.mkdir(parents=True)
    summary.parent.write_text("a file where the session-memory folder goes\n")
    messages = [*conversation(12_000), assistant("done")]
    await handle.call("after_turn", session_id=SID, cwd=str(project_dir), messages=messages)
    await idle(handle, project_dir)
    record = session_of(handle, project_dir).record
    assert record.last_error is not None
    assert record.last_error.startswith(f"cannot create the session notes {summary}")
    assert "from the template" in record.last_error
    assert not session_model.requests  # no agent ran on notes that do not exist


async def test_notes_that_are_a_symbolic_link_are_refused_not_replaced(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path, tmp_path: Path
) -> None:
    # Found by a bug hunt: compact refused the link, but an update read through it and then
    # replaced it with a file, so its target silently stopped getting the notes.
    handle = daemon_with_model
    summary = summary_path(handle, project_dir)
    summary.parent.mkdir(parents=True)
    target = tmp_path / "notes-elsewhere.md"
    target.write_text(builtin_template())
    summary.symlink_to(target)
    session_model.enqueue(edit_title(summary, "through the link"), text_reply("done"))
    messages = [*conversation(12_000), assistant("done")]
    await handle.call("after_turn", session_id=SID, cwd=str(project_dir), messages=messages)
    await idle(handle, project_dir)
    assert summary.is_symlink()
    assert target.read_text() == builtin_template()
    record = session_of(handle, project_dir).record
    assert record.last_error is not None
    assert "symbolic link" in record.last_error
    assert record.updates == 0


async def test_notes_with_crlf_line_endings_are_kept_as_they_are(
    daemon_with_model: DaemonHandle, session_model: SessionModel, project_dir: Path
) -> None:
    # Found by a bug hunt: notes saved with CRLF (a Windows editor) were read back from the
    # agent's copy with universal newlines, so an update that changed nothing rewrote them
    # with LF endings and counted as an update; one that edited them made them LF whole.
    handle = daemon_with_model
    summary = summary_path(handle, project_dir)
    summary.parent.mkdir(parents=True)
    crlf = builtin_template().replace("\n", "\r\n").encode()
    summary.write_bytes(crlf)
    session_model.enqueue(text_reply("the notes are up to date"))
    messages = [*conversation(12_000), assistant("all done")]
    await handle.call("after_turn", session_id=SID, cwd=str(project_dir), messages=messages)
    while not session_model.requests:
        await asyncio.sleep(0.01)
    await idle(handle, project_dir)
    assert summary.read_bytes() == crlf
    assert handle.daemon.counters["session_memory.updates"] == 0

    session_model.enqueue(edit_title(summary, "Port the parser"), text_reply("done"))
    messages += [*conversation(6_000), assistant("done again")]
    await handle.call("after_turn", session_id=SID, cwd=str(project_dir), messages=messages)
    while len(session_model.requests) < 2:
        await asyncio.sleep(0.01)
    await idle(handle, project_dir)
    assert summary.read_bytes() == crlf.replace(
        TITLE_LINE.encode() + b"\r\n", TITLE_LINE.encode() + b"\r\nPort the parser\r\n"
    )
