"""Memory extraction after `after_turn`, against the scripted fake Messages API."""

from __future__ import annotations

import asyncio
import json
import os
import time
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from memoryd.automem.extraction import main_agent_wrote_memory
from memoryd.automem.extraction_prompts import NOTHING_MARKER
from tests.background.conftest import Workspace, memory_text, transcript, workspace_for
from tests.conftest import (
    DaemonHandle,
    daemon_config,
    fake_model_config,
    start_daemon,
    stop_daemon,
)
from tests.fakes.messages_api import (
    FakeMessagesAPI,
    error_reply,
    message,
    slow,
    text_reply,
    tool_use_reply,
)

CONVO = transcript(
    ("Please stop mocking the database in tests, we got burned last quarter.", "Understood.")
)


async def _after_turn(ws: Workspace, messages: list[dict[str, Any]], **extra: Any) -> Any:
    return await ws.handle.call(
        "after_turn", session_id="s1", cwd=str(ws.cwd), messages=messages, **extra
    )


async def _idle(ws: Workspace) -> None:
    await ws.handle.daemon.services.extraction.wait_idle()


async def _subscribe(ws: Workspace, *events: str) -> Any:
    client = await ws.handle.client()
    await client.call("subscribe", {"events": list(events)})
    return client


def _drain(client: Any) -> list[dict[str, Any]]:
    out = []
    while not client.notifications.empty():
        note = client.notifications.get_nowait()
        out.append({"event": note["method"], **note["params"]})
    return out


async def test_writes_a_new_memory_and_its_index_line(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    target = ws.memory_dir / "feedback_real_database.md"
    body = "Integration tests hit a real database.\n**Why:** mocks hid a broken migration.\n**How to apply:** no DB mocks."
    fake_model.enqueue(
        tool_use_reply(
            [
                (
                    "Write",
                    {
                        "file_path": str(target),
                        "content": memory_text(
                            "Real database in tests", "tests must hit a real DB", "feedback", body
                        ),
                    },
                )
            ]
        ),
        text_reply("Saved feedback_real_database.md"),
    )
    client = await _subscribe(ws, "memory/saved", "worker/error")
    reply = await _after_turn(ws, CONVO)
    assert reply["scheduled"]["extraction"] is True
    await _idle(ws)
    await asyncio.sleep(0.05)
    assert "Integration tests hit a real database." in target.read_text()
    index = (ws.memory_dir / "MEMORY.md").read_text()
    assert "(feedback_real_database.md)" in index
    assert "Real database in tests" in index
    notes = _drain(client)
    assert {"event": "memory/saved", "path": str(target), "project": str(ws.project.root)} in notes
    assert not [n for n in notes if n["event"] == "worker/error"]
    # The request carried the manifest section, the taxonomy and the never-save list.
    (first, _) = fake_model.message_requests()
    prompt = first.json["messages"][-1]["content"][-1]["text"]
    assert "Please stop mocking the database" in prompt
    assert "## Never save" in prompt
    assert "`feedback`" in prompt
    assert str(ws.memory_dir) in prompt
    # Each new memory is to carry the session's date, for questions about a time.
    assert f"the line `Session date: {date.today().isoformat()}`" in prompt
    assert first.json["system"].startswith("You are the memory extraction agent")
    await client.close()


async def test_updates_an_existing_memory_and_keeps_history(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    existing = await ws.am.write_memory(
        ws.project,
        type="user",
        name="Role",
        description="the user's role",
        body="The user is a backend engineer.",
    )
    fake_model.enqueue(
        tool_use_reply(
            [
                ("Read", {"file_path": str(existing.path)}),
                (
                    "Edit",
                    {
                        "file_path": str(existing.path),
                        "old_string": "a backend engineer.",
                        "new_string": "a backend engineer who now leads the data team.",
                    },
                ),
            ]
        ),
        text_reply(f"Updated {existing.path.name}"),
    )
    await _after_turn(ws, transcript(("I lead the data team now.", "Congrats!")))
    await _idle(ws)
    assert "leads the data team" in existing.path.read_text()
    prompt = fake_model.message_requests()[0].json["messages"][-1]["content"][-1]["text"]
    assert f"- {existing.path.name} [user]" in prompt  # the manifest line
    _, versions = ws.am.versions(ws.project, str(existing.path))
    assert versions, "the old content was kept in history before the edit"
    assert (ws.memory_dir / "MEMORY.md").read_text().count(existing.path.name) == 1


async def test_escapes_from_the_memory_dir_are_denied(
    ws: Workspace, fake_model: FakeMessagesAPI, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    ws.memory_dir.mkdir(parents=True, exist_ok=True)
    (ws.memory_dir / "link").symlink_to(outside)
    fake_model.enqueue(
        tool_use_reply(
            [
                ("Write", {"file_path": str(ws.memory_dir / "../../.bashrc"), "content": "x"}),
                ("Write", {"file_path": "../../.bashrc", "content": "x"}),
                ("Write", {"file_path": str(ws.memory_dir / "link" / "a.md"), "content": "x"}),
                ("Write", {"file_path": "/etc/passwd", "content": "x"}),
                ("Write", {"file_path": str(ws.cwd / "CLAUDE.md"), "content": "x"}),
            ]
        ),
        text_reply("Saved."),
    )
    client = await _subscribe(ws, "worker/error", "memory/saved")
    await _after_turn(ws, CONVO)
    await _idle(ws)
    await asyncio.sleep(0.05)
    assert list(outside.iterdir()) == []
    assert not (ws.cwd / "CLAUDE.md").exists()
    assert not (ws.memory_dir.parent.parent / ".bashrc").exists()
    assert sorted(p.name for p in ws.memory_dir.iterdir()) == ["link"]
    notes = _drain(client)
    assert not [n for n in notes if n["event"] == "memory/saved"]
    errors = [n["message"] for n in notes if n["event"] == "worker/error"]
    assert sum("denied Write" in m for m in errors) == 5
    assert any("wrote nothing" in m for m in errors)
    status = await ws.handle.call("status")
    assert status["worker_errors"]["extraction"] == 6
    assert status["counters"]["extraction.denied"] == 5
    await client.close()


async def test_a_model_that_never_stops_is_stopped_at_five_turns(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    fake_model.handler = lambda _req: tool_use_reply([("Bash", {"command": "ls"})])
    client = await _subscribe(ws, "worker/error")
    await _after_turn(ws, CONVO)
    await _idle(ws)
    await asyncio.sleep(0.05)
    assert len(fake_model.message_requests()) == 5
    messages = [n["message"] for n in _drain(client)]
    assert any("turn limit (5)" in m for m in messages)
    status = await ws.handle.call("status")
    assert status["features"]["extraction"]["last_run"]["stop_reason"] == "max_turns"
    await client.close()


async def test_nothing_to_save_is_quiet_but_silence_is_loud(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    fake_model.enqueue(text_reply(NOTHING_MARKER), text_reply("I saved it."))
    client = await _subscribe(ws, "worker/error")
    await _after_turn(ws, CONVO)
    await _idle(ws)
    await asyncio.sleep(0.05)
    assert _drain(client) == []
    await _after_turn(ws, [*CONVO, *transcript(("more", "ok"))])
    await _idle(ws)
    await asyncio.sleep(0.05)
    (note,) = _drain(client)
    assert "did not say there was nothing to save" in note["message"]
    await client.close()


async def test_main_agent_wrote_memory_so_no_extraction(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    messages = [
        {"role": "user", "content": "remember that I prefer tabs"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "Write",
                    "input": {"file_path": str(ws.memory_dir / "user_tabs.md"), "content": "x"},
                }
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Saved."}]},
    ]
    reply = await _after_turn(ws, messages)
    assert reply["scheduled"]["extraction"] is False
    await _idle(ws)
    assert fake_model.message_requests() == []


async def test_memory_files_changed_since_the_last_turn_skip_extraction(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    fake_model.enqueue(text_reply(NOTHING_MARKER))
    assert (await _after_turn(ws, CONVO))["scheduled"]["extraction"] is True
    await _idle(ws)
    await asyncio.sleep(0.01)
    # The main agent (through some client) saved a memory between the two turns.
    ws.memory_dir.mkdir(parents=True, exist_ok=True)
    (ws.memory_dir / "user_x.md").write_text(memory_text("x", "y", "user", "z"))
    later = [*CONVO, *transcript(("next", "done"))]
    await _after_turn(ws, later)  # queued; the worker's disk check then skips it
    await _idle(ws)
    assert len(fake_model.message_requests()) == 1
    status = (await ws.handle.call("status"))["features"]["extraction"]
    assert status["skipped_main_agent"] == 1
    assert status["runs"] == 1
    # Our own writes never count as the main agent's.
    fake_model.enqueue(
        tool_use_reply(
            [
                (
                    "Write",
                    {
                        "file_path": str(ws.memory_dir / "user_y.md"),
                        "content": memory_text("y", "y", "user", "y"),
                    },
                )
            ]
        ),
        text_reply("saved user_y.md"),
    )
    await _after_turn(ws, [*later, *transcript(("again", "ok"))])
    await _idle(ws)
    fake_model.enqueue(text_reply(NOTHING_MARKER))
    await _after_turn(ws, [*later, *transcript(("again", "ok"), ("more", "ok"))])
    await _idle(ws)
    assert len(fake_model.message_requests()) == 4


async def test_a_memory_file_dated_in_the_future_does_not_skip_every_turn(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    # Found by a bug hunt: a file whose mtime is a year ahead (a clock that ran ahead, a
    # restored backup) was "changed since the last turn" on every turn for a year, and each
    # turn's extraction was skipped as the main agent's.
    ws.memory_dir.mkdir(parents=True, exist_ok=True)
    ahead = ws.memory_dir / "user_x.md"
    ahead.write_text(memory_text("x", "y", "user", "z"))
    next_year = time.time() + 365 * 86400
    os.utime(ahead, (next_year, next_year))
    messages = list(CONVO)
    for turn in range(3):
        fake_model.enqueue(text_reply(NOTHING_MARKER))
        messages += transcript((f"I use vim for everything ({turn})", "Noted."))
        await _after_turn(ws, messages)
        await _idle(ws)
    status = (await ws.handle.call("status"))["features"]["extraction"]
    assert status["skipped_main_agent"] == 0
    assert status["runs"] == 3


def test_main_agent_wrote_memory_looks_only_at_this_turn(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    write = {
        "role": "assistant",
        "content": [
            {
                "type": "tool_use",
                "id": "t",
                "name": "Edit",
                "input": {"file_path": str(memory / "a.md")},
            }
        ],
    }
    earlier = [{"role": "user", "content": "a"}, write, {"role": "user", "content": "b"}]
    assert main_agent_wrote_memory([{"role": "user", "content": "a"}, write], memory)
    assert not main_agent_wrote_memory(earlier, memory)
    elsewhere = {
        "role": "assistant",
        "content": [
            {
                "type": "tool_use",
                "id": "t",
                "name": "Write",
                "input": {"file_path": str(tmp_path / "x.md")},
            }
        ],
    }
    assert not main_agent_wrote_memory([{"role": "user", "content": "a"}, elsewhere], memory)


async def test_quick_after_turns_are_coalesced_into_one_follow_up(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    fake_model.enqueue(slow(0.5, text_reply(NOTHING_MARKER)))
    fake_model.handler = lambda _req: text_reply(NOTHING_MARKER)
    second = [*CONVO, *transcript(("second", "ok"))]
    third = [*second, *transcript(("third", "ok"))]
    assert (await _after_turn(ws, CONVO))["scheduled"]["extraction"] is True
    while not fake_model.message_requests():
        await asyncio.sleep(0.01)
    # Both arrive while the first run is still waiting for the model.
    replies = await asyncio.gather(_after_turn(ws, second), _after_turn(ws, third))
    assert all(r["scheduled"]["extraction"] for r in replies)
    await _idle(ws)
    requests = fake_model.message_requests()
    assert len(requests) == 2  # the first run, then one coalesced run for both triggers
    assert "third" in requests[1].json["messages"][-1]["content"][-1]["text"]
    status = (await ws.handle.call("status"))["features"]["extraction"]
    assert status["coalesced"] == 1
    assert status["runs"] == 2


async def test_prompt_cache_reuse_sends_the_main_prefix_byte_for_byte(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    system = [
        {"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Environment: linux, ünïcode ✓"},
    ]
    tools = [
        {
            "name": "Read",
            "description": "read a file",
            "input_schema": {
                "type": "object",
                "properties": {"file_path": {"type": "string"}},
                "required": ["file_path"],
            },
        },
        {
            "name": "WebFetch",
            "description": "fetch",
            "input_schema": {"type": "object", "properties": {"url": {"type": "string"}}},
        },
    ]
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<claude_md>rules</claude_md>"},
                {"type": "text", "text": "Use pnpm, never npm."},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_a",
                    "name": "Read",
                    "input": {"file_path": "/x/package.json"},
                }
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "{}"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Noted: pnpm."}]},
    ]
    fake_model.enqueue(text_reply(NOTHING_MARKER, cache_read_input_tokens=900))
    await _after_turn(ws, messages, system=system, tools=tools, model="claude-main-model")
    await _idle(ws)
    (request,) = fake_model.message_requests()
    sent = request.json

    def dumps(value: Any) -> bytes:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()

    assert sent["model"] == "claude-main-model"
    assert dumps(sent["system"]) == dumps(system)
    assert dumps(sent["tools"]) == dumps(tools)
    # The raw request body carries the same bytes, in the same order.
    assert dumps(system) in request.raw
    assert dumps(tools) in request.raw
    for got, want in zip(sent["messages"][:3], messages[:3], strict=True):
        assert dumps(got) == dumps(want)
    assert dumps(messages[:3])[:-1] in request.raw  # the earlier messages, contiguous
    last = sent["messages"][3]
    assert last["content"][-1].pop("cache_control") == {"type": "ephemeral"}
    assert dumps(last) == dumps(messages[3])
    instruction = sent["messages"][4]
    assert instruction["role"] == "user"
    assert "background memory extraction" in instruction["content"][0]["text"]
    assert len(sent["messages"]) == 5
    usage = (await ws.handle.call("status"))["model"]["usage"]["extraction"]
    assert usage["cache_read_input_tokens"] == 900


async def test_no_model_means_no_extraction_and_status_says_why(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    ws = workspace_for(daemon, tmp_path)
    reply = await _after_turn(ws, CONVO)
    assert reply["scheduled"]["extraction"] is False
    feature = (await daemon.call("status"))["features"]["extraction"]
    assert feature["enabled"] is False
    assert "ANTHROPIC_API_KEY" in feature["reason"]


async def test_an_overloaded_storm_backs_off_then_is_reported(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    fake_model.handler = lambda _req: error_reply(529, "overloaded_error", "Overloaded")
    client = await _subscribe(ws, "worker/error")
    assert (await _after_turn(ws, CONVO))["scheduled"]["extraction"] is True
    await _idle(ws)
    await asyncio.sleep(0.05)
    assert len(fake_model.message_requests()) == 4  # the first try and 3 backed-off retries
    (note,) = _drain(client)
    assert note["worker"] == "extraction"
    assert "529" in note["message"]
    status = await ws.handle.call("status")
    assert status["worker_errors"]["extraction"] == 1
    assert status["counters"]["extraction.model_errors"] == 1
    assert status["model"]["usage"]["extraction"]["retries"] == 3
    assert status["features"]["extraction"]["failed"] == 1
    assert status["features"]["extraction"]["last_run"]["stop_reason"] == "error"
    await client.close()


async def test_a_turn_whose_extraction_failed_is_offered_again(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    fake_model.handler = lambda _req: error_reply(529, "overloaded_error", "Overloaded")
    await _after_turn(ws, CONVO)
    await _idle(ws)
    assert len(fake_model.message_requests()) == 4  # failed through every retry
    fake_model.handler = lambda _req: text_reply(NOTHING_MARKER)
    later = CONVO + transcript(("Now fix the typo in the README.", "Fixed."))
    await _after_turn(ws, later)
    await _idle(ws)
    # The next extraction is shown the failed turn too (before: only the messages after it,
    # so what the user said in the failed turn was never looked at).
    body = json.dumps(fake_model.message_requests()[-1].json)
    assert "stop mocking the database" in body
    assert "last 4 messages" in body
    # A run that worked moves the cursor on as before.
    await _after_turn(ws, [*later, *transcript(("Thanks.", "You are welcome."))])
    await _idle(ws)
    body = json.dumps(fake_model.message_requests()[-1].json)
    assert "stop mocking the database" not in body


@pytest.mark.parametrize("writes_first", [True, False])
async def test_a_refused_run_or_one_that_wrote_is_not_offered_again(
    ws: Workspace, fake_model: FakeMessagesAPI, writes_first: bool
) -> None:
    # Found by a review: every failed run was offered again, also one that had saved a memory
    # (saved twice next time) and a refusal (refused again on every later turn, for ever).
    target = ws.memory_dir / "feedback_real_database.md"
    refusal = message([{"type": "text", "text": "I won't continue."}], stop_reason="refusal")
    if writes_first:
        text = memory_text(
            "Real database in tests", "tests must hit a real DB", "feedback", "No DB mocks."
        )
        fake_model.enqueue(
            tool_use_reply([("Write", {"file_path": str(target), "content": text})]), refusal
        )
    else:
        fake_model.enqueue(refusal)
    await _after_turn(ws, CONVO)
    await _idle(ws)
    assert target.exists() is writes_first
    fake_model.handler = lambda _req: text_reply(NOTHING_MARKER)
    later = CONVO + transcript(("Now fix the typo in the README.", "Fixed."))
    await _after_turn(ws, later)
    await _idle(ws)
    body = json.dumps(fake_model.message_requests()[-1].json)
    assert "stop mocking the database" not in body


async def test_reuse_without_a_system_prompt_sends_none(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    tools = [{"name": "Read", "input_schema": {"type": "object"}}]
    fake_model.enqueue(text_reply(NOTHING_MARKER))
    await _after_turn(ws, CONVO, tools=tools, model="claude-main-model")
    await _idle(ws)
    (request,) = fake_model.message_requests()
    assert "system" not in request.json
    assert request.json["tools"] == tools
    assert request.json["model"] == "claude-main-model"
    assert request.json["messages"][0] == CONVO[0]


async def test_shutdown_lets_a_running_extraction_save_its_memory(
    short_tmp: Path, tmp_path: Path, fake_model: FakeMessagesAPI
) -> None:
    # after_turn said the extraction was scheduled; a shutdown (SIGTERM, `memctl restart`)
    # while it waited on the model cancelled it, and the memory was never saved.
    handle = await start_daemon(daemon_config(short_tmp, model=fake_model_config(fake_model)))
    try:
        ws = workspace_for(handle, tmp_path)
        target = ws.memory_dir / "feedback_real_database.md"
        text = memory_text("Real database in tests", "tests hit a real DB", "feedback", "No mocks.")
        fake_model.enqueue(
            slow(1.0, tool_use_reply([("Write", {"file_path": str(target), "content": text})])),
            text_reply("Saved feedback_real_database.md"),
        )
        assert (await _after_turn(ws, CONVO))["scheduled"]["extraction"] is True
        while not fake_model.message_requests():
            await asyncio.sleep(0.01)
    finally:
        await stop_daemon(handle)
    assert target.read_text() == text
    assert "(feedback_real_database.md)" in (ws.memory_dir / "MEMORY.md").read_text()


async def test_an_index_that_cannot_take_the_new_line_still_ends_the_run_well(
    ws: Workspace, fake_model: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A MEMORY.md near its cap: the rebuild after the run raised TooLarge out of it, so the
    # memory written was never announced nor noted as memoryd's own, and the session's place
    # was not saved. Now the memory is announced and the index problem is a worker error.
    from memoryd.automem import index as index_mod

    ws.memory_dir.mkdir(parents=True, exist_ok=True)
    for i in range(9):
        (ws.memory_dir / f"project_{i}.md").write_text(
            memory_text(f"fact {i}", f"{i} " + "word " * 40, "project", "b")
        )
    await ws.handle.call("memory.reconcile", cwd=str(ws.cwd))
    size = len((ws.memory_dir / "MEMORY.md").read_bytes())
    monkeypatch.setattr(index_mod, "MAX_INDEX_READ_BYTES", size + 10)  # room for no new line
    target = ws.memory_dir / "feedback_real_database.md"
    content = memory_text("Real database in tests", "tests must hit a real DB", "feedback", "b")
    fake_model.enqueue(
        tool_use_reply([("Write", {"file_path": str(target), "content": content})]),
        text_reply("Saved feedback_real_database.md"),
    )
    client = await _subscribe(ws, "memory/saved", "worker/error")
    await _after_turn(ws, CONVO)
    await _idle(ws)
    await asyncio.sleep(0.05)
    assert target.exists()
    notes = _drain(client)
    assert {"event": "memory/saved", "path": str(target), "project": str(ws.project.root)} in notes
    errors = [n for n in notes if n["event"] == "worker/error"]
    assert errors
    assert "the index was not rebuilt" in json.dumps(errors)
    await client.close()


def _tool_results(request: Any) -> list[str]:
    """The text of each tool result the request sends back to the model."""
    blocks = request.json["messages"][-1]["content"]
    return [str(b["content"]) for b in blocks if b.get("type") == "tool_result"]


async def test_a_memory_the_model_writes_twice_is_saved_once(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    # Before, each Write made a file: two memories of one fact, two index lines, both recalled.
    await ws.handle.call(
        "memory.write",
        cwd=str(ws.cwd),
        type="project",
        name="Deploys go through make ship",
        description="how the project is deployed",
        body="Deploy with `make ship`, never by hand.",
    )
    db = memory_text("Real database in tests", "tests hit a real DB", "feedback", "No mocks.")
    again = memory_text(
        "Deploys go through make ship",
        "how the project is deployed",
        "project",
        "Deploy with `make ship`, never by hand!",
    )
    other = memory_text("Staging is on Fridays", "when staging deploys", "project", "Fridays.")
    fake_model.enqueue(
        tool_use_reply(
            [
                ("Write", {"file_path": str(ws.memory_dir / "feedback_db.md"), "content": db}),
                ("Write", {"file_path": str(ws.memory_dir / "feedback_db_2.md"), "content": db}),
                ("Write", {"file_path": str(ws.memory_dir / "project_ship.md"), "content": again}),
                ("Write", {"file_path": str(ws.memory_dir / "project_fri.md"), "content": other}),
                # the same name in team/ is another place: the team's own memory
                (
                    "Write",
                    {"file_path": str(ws.memory_dir / "team" / "feedback_db.md"), "content": db},
                ),
            ]
        ),
        text_reply("Saved."),
    )
    await _after_turn(ws, CONVO)
    await _idle(ws)
    names = sorted(p.name for p in ws.memory_dir.iterdir())
    assert names == [
        "MEMORY.md",
        "feedback_db.md",
        "project_deploys_go_through_make_ship.md",
        "project_fri.md",
        "team",
    ]
    assert (ws.memory_dir / "team" / "feedback_db.md").is_file()
    index = (ws.memory_dir / "MEMORY.md").read_text()
    assert index.count("(feedback_db") == 1
    results = _tool_results(fake_model.message_requests()[1])
    assert len(results) == 5
    assert f"{ws.memory_dir / 'feedback_db.md'} holds this memory already" in results[1]
    shipped = ws.memory_dir / "project_deploys_go_through_make_ship.md"
    assert f"{shipped} holds this memory already" in results[2]
    assert "holds this memory already" not in results[0] + results[3] + results[4]


async def test_a_file_name_that_is_not_utf8_in_a_tool_result_does_not_end_the_run(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    # A memory saved on a Latin-1 system: its name's byte went into the Glob result as a lone
    # surrogate, the next request could not be encoded, and the run failed on every turn.
    ws.memory_dir.mkdir(parents=True, exist_ok=True)
    latin1 = os.path.join(os.fsencode(ws.memory_dir), b"user_caf\xe9.md")
    with open(latin1, "w", encoding="utf-8") as handle:
        handle.write(memory_text("Cafe", "the cafe", "user", "Coffee."))
    fake_model.enqueue(
        tool_use_reply([("Glob", {"pattern": "*.md", "path": str(ws.memory_dir)})]),
        text_reply(NOTHING_MARKER),
    )
    client = await _subscribe(ws, "worker/error")
    await _after_turn(ws, CONVO)
    await _idle(ws)
    await asyncio.sleep(0.05)
    assert _drain(client) == []
    status = await ws.handle.call("status")
    assert status["features"]["extraction"]["last_run"]["stop_reason"] == "end_turn"
    (result,) = _tool_results(fake_model.message_requests()[1])
    # the manifest's shown form: a name the policy resolves back to the file
    assert "user_caf%E9.md" in result
    await client.close()


async def test_another_fact_under_a_taken_name_is_not_told_it_is_saved(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    # Before, the refusal said the namesake "holds this memory already": a model took its new
    # fact for saved and dropped it. It hears the namesake holds other content, and saves the
    # fact under a name of its own.
    await ws.handle.call(
        "memory.write",
        cwd=str(ws.cwd),
        type="feedback",
        name="Code review",
        description="review preferences",
        body="The user wants small pull requests, one change each.",
    )
    squash = "Squash a branch into one commit before it is merged."
    fake_model.enqueue(
        tool_use_reply(
            [
                (
                    "Write",
                    {
                        "file_path": str(ws.memory_dir / "feedback_squash.md"),
                        "content": memory_text(
                            "Code review", "review preferences", "feedback", squash
                        ),
                    },
                )
            ]
        ),
        tool_use_reply(
            [
                (
                    "Write",
                    {
                        "file_path": str(ws.memory_dir / "feedback_squash.md"),
                        "content": memory_text(
                            "Squash before merge", "how branches are merged", "feedback", squash
                        ),
                    },
                )
            ]
        ),
        text_reply("Saved."),
    )
    await _after_turn(ws, CONVO)
    await _idle(ws)
    [refusal] = _tool_results(fake_model.message_requests()[1])
    namesake = ws.memory_dir / "feedback_code_review.md"
    assert f"not written: {namesake} is the feedback memory named 'Code review'" in refusal
    assert "with other content" in refusal
    assert "name of its own" in refusal
    assert "holds this memory already" not in refusal
    assert squash in (ws.memory_dir / "feedback_squash.md").read_text()
    assert "small pull requests" in namesake.read_text()
