"""run_agent against the scripted fake Messages API, through the daemon's real ModelClient."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from memoryd.agent.loop import MAX_TOOL_CALLS_PER_REPLY, ExtraTool, run_agent
from memoryd.agent.policy import AccessPolicy
from tests.conftest import DaemonHandle
from tests.fakes.messages_api import (
    FakeMessagesAPI,
    error_reply,
    message,
    slow,
    text_reply,
    tool_use_reply,
)

USER = [{"role": "user", "content": "remember things"}]


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    project = tmp_path / "project"
    memory = tmp_path / "memory"
    project.mkdir()
    memory.mkdir()
    (project / "README.md").write_text("hello project\n")
    return project, memory


async def _errors(handle: DaemonHandle) -> Any:
    client = await handle.client()
    await client.call("subscribe", {"events": ["worker/error"]})
    return client


async def _run_in_memory(handle: DaemonHandle, memory: Path, **extra: Any) -> Any:
    """run_agent free to read and write `memory` only, as the memory writers run it."""
    return await run_agent(
        handle.daemon,
        feature="test_agent",
        policy=AccessPolicy(read_roots=(memory,), write_roots=(memory,)),
        system="s",
        messages=USER,
        write_lock=asyncio.Lock(),
        **extra,
    )


def _drain(client: Any) -> list[dict[str, Any]]:
    out = []
    while not client.notifications.empty():
        out.append(client.notifications.get_nowait()["params"])
    return out


async def test_reads_then_writes_and_calls_the_hooks(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, dirs: tuple[Path, Path]
) -> None:
    project, memory = dirs
    target = memory / "user_role.md"
    target.write_text("old")
    fake_model.enqueue(
        tool_use_reply([("Read", {"file_path": str(project / "README.md")})]),
        tool_use_reply([("Write", {"file_path": str(target), "content": "new"})]),
        text_reply("saved one memory", input_tokens=7, output_tokens=3),
    )
    events: list[tuple[str, Path, str]] = []

    async def before(path: Path) -> None:
        events.append(("before", path, path.read_text()))

    async def after(path: Path) -> None:
        events.append(("after", path, path.read_text()))

    result = await run_agent(
        daemon_with_model.daemon,
        feature="test_agent",
        policy=AccessPolicy(read_roots=(project,), write_roots=(memory,)),
        system="you are a test",
        messages=USER,
        before_write=before,
        on_write=after,
        write_lock=asyncio.Lock(),
    )
    assert result.stop_reason == "end_turn"
    assert result.turns == 3
    assert result.tool_calls == 2
    assert result.written == [target]
    assert result.final_text == "saved one memory"
    assert result.usage["input_tokens"] == 100 + 100 + 7
    assert events == [("before", target, "old"), ("after", target, "new")]
    requests = fake_model.message_requests()
    # The tool result of the Read went back to the model, numbered like Claude Code's Read.
    second = requests[1].json["messages"]
    assert second[-1]["content"][0]["content"] == "     1\thello project"
    assert second[-1]["content"][0]["tool_use_id"] == second[-2]["content"][0]["id"]
    assert requests[0].json["system"] == "you are a test"
    assert [t["name"] for t in requests[0].json["tools"]] == [
        "Read", "Grep", "Glob", "Bash", "Edit", "MultiEdit", "Write",
    ]  # fmt: skip
    usage = daemon_with_model.daemon.model.status()["usage"]["test_agent"]
    assert usage["calls"] == 3


async def test_writes_outside_the_memory_dir_are_denied(
    daemon_with_model: DaemonHandle,
    fake_model: FakeMessagesAPI,
    dirs: tuple[Path, Path],
    tmp_path: Path,
) -> None:
    project, memory = dirs
    outside = tmp_path / "outside"
    outside.mkdir()
    (memory / "escape").symlink_to(outside)
    home_rc = tmp_path / ".bashrc"
    fake_model.enqueue(
        tool_use_reply(
            [
                ("Write", {"file_path": str(memory / ".." / ".bashrc"), "content": "evil"}),
                ("Write", {"file_path": str(memory / "escape" / "x.md"), "content": "evil"}),
                ("Write", {"file_path": "/etc/passwd", "content": "evil"}),
                ("Edit", {"file_path": "/etc/passwd", "old_string": "root", "new_string": "x"}),
                ("Write", {"file_path": "../../.bashrc", "content": "evil"}),
            ]
        ),
        text_reply("done"),
    )
    client = await _errors(daemon_with_model)
    result = await run_agent(
        daemon_with_model.daemon,
        feature="test_agent",
        policy=AccessPolicy(read_roots=(project,), write_roots=(memory,)),
        system=None,
        messages=USER,
    )
    await asyncio.sleep(0.05)
    assert result.written == []
    assert len(result.denied) == 5
    assert not home_rc.exists()
    assert list(outside.iterdir()) == []
    assert not (tmp_path / ".bashrc").exists()
    results = fake_model.message_requests()[1].json["messages"][-1]["content"]
    assert all(r["is_error"] and r["content"].startswith("Permission denied") for r in results)
    notes = _drain(client)
    assert len(notes) == 5
    assert all(n["worker"] == "test_agent" and "denied" in n["message"] for n in notes)
    assert daemon_with_model.daemon.counters["test_agent.denied"] == 5
    assert daemon_with_model.daemon.worker_errors["test_agent"] == 5
    await client.close()


async def test_dangerous_shell_commands_are_denied(
    daemon_with_model: DaemonHandle,
    fake_model: FakeMessagesAPI,
    dirs: tuple[Path, Path],
) -> None:
    project, memory = dirs
    keep = memory / "keep.md"
    keep.write_text("keep")
    commands = [
        f"rm -rf {memory}",
        f"cat {keep} > {project / 'y'}",
        f"ls; rm {keep}",
        "cat $(echo /etc/passwd)",
        f"find {memory} -delete",
        "cat /etc/passwd",
    ]
    fake_model.enqueue(
        tool_use_reply([("Bash", {"command": c}) for c in commands]), text_reply("ok")
    )
    result = await run_agent(
        daemon_with_model.daemon,
        feature="test_agent",
        policy=AccessPolicy(read_roots=(project,), write_roots=(memory,)),
        system=None,
        messages=USER,
    )
    assert len(result.denied) == len(commands)
    assert keep.read_text() == "keep"
    assert not (project / "y").exists()


async def test_a_model_that_never_stops_is_stopped_at_the_turn_limit(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, dirs: tuple[Path, Path]
) -> None:
    project, memory = dirs
    fake_model.handler = lambda _req: tool_use_reply([("Glob", {"pattern": "*.md"})])
    client = await _errors(daemon_with_model)
    result = await run_agent(
        daemon_with_model.daemon,
        feature="test_agent",
        policy=AccessPolicy(read_roots=(project,), write_roots=(memory,)),
        system=None,
        messages=USER,
        max_turns=5,
    )
    await asyncio.sleep(0.05)
    assert result.stop_reason == "max_turns"
    assert result.turns == 5
    assert len(fake_model.message_requests()) == 5
    assert any("turn limit" in n["message"] for n in _drain(client))
    await client.close()


@pytest.mark.parametrize("stop_reason", ["max_tokens", "model_context_window_exceeded"])
async def test_a_tool_call_cut_off_by_max_tokens_is_not_run(
    daemon_with_model: DaemonHandle,
    fake_model: FakeMessagesAPI,
    dirs: tuple[Path, Path],
    stop_reason: str,
) -> None:
    project, memory = dirs
    target = memory / "deploy.md"
    target.write_text("1. build\n2. test\n3. tag\n")
    done = memory / "done.md"
    fake_model.enqueue(
        # The reply ran out of tokens while the model wrote the second Write: its content is
        # cut mid-way. Before, it replaced the memory with "1. bu".
        message(
            [
                {"type": "text", "text": "Saving."},
                {
                    "type": "tool_use",
                    "id": "toolu_done",
                    "name": "Write",
                    "input": {"file_path": str(done), "content": "complete\n"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_cut",
                    "name": "Write",
                    "input": {"file_path": str(target), "content": "1. bu"},
                },
            ],
            stop_reason=stop_reason,
        ),
        text_reply("gave up"),
    )
    result = await run_agent(
        daemon_with_model.daemon,
        feature="test_agent",
        policy=AccessPolicy(read_roots=(project,), write_roots=(memory,)),
        system=None,
        messages=USER,
    )
    assert target.read_text() == "1. build\n2. test\n3. tag\n"
    assert done.read_text() == "complete\n"  # the call before it was whole: it ran
    assert result.written == [done]
    assert result.tool_calls == 2
    assert result.attempted_writes == 2
    results = fake_model.message_requests()[1].json["messages"][-1]["content"]
    assert [r["tool_use_id"] for r in results] == ["toolu_done", "toolu_cut"]
    assert "is_error" not in results[0]
    assert results[1]["is_error"] is True
    assert "cut off" in results[1]["content"]


async def test_calls_the_api_would_not_take_back_are_sent_back_fixed(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, dirs: tuple[Path, Path]
) -> None:
    # A broken provider's reply: an input that is no object, one id twice, a call without an
    # id. Sent back as they came, the API refuses the next request (HTTP 400) and the run
    # failed; the duplicate id also left two results for one call.
    project, _ = dirs
    readme = str(project / "README.md")

    def call(call_id: str | None, tool_input: Any) -> dict[str, Any]:
        block = {"type": "tool_use", "name": "Read", "input": tool_input}
        if call_id is not None:
            block["id"] = call_id
        return block

    fake_model.enqueue(
        message(
            [
                call("toolu_a", "not an object"),
                call("toolu_same", {"file_path": readme}),
                call("toolu_same", {"file_path": readme}),
                call(None, {"file_path": readme}),
            ],
            stop_reason="tool_use",
        ),
        message([call("toolu_same", {"file_path": readme})], stop_reason="tool_use"),
        text_reply("done"),
    )
    result = await run_agent(
        daemon_with_model.daemon,
        feature="test_agent",
        policy=AccessPolicy(read_roots=(project,)),
        system=None,
        messages=USER,
    )
    assert result.stop_reason == "end_turn"
    assert result.tool_calls == 5
    sent = fake_model.message_requests()[2].json["messages"]
    calls = [b for m in sent if m["role"] == "assistant" for b in m["content"]]
    results = [b for m in sent[1:] if m["role"] == "user" for b in m["content"]]
    ids = [b["id"] for b in calls]
    assert len(set(ids)) == 5
    assert ids[:2] == ["toolu_a", "toolu_same"]
    assert all(isinstance(b["input"], dict) for b in calls)
    assert calls[0]["input"] == {}
    assert [r["tool_use_id"] for r in results] == ids
    assert [r.get("is_error", False) for r in results] == [True, False, False, False, False]


async def test_an_overloaded_storm_backs_off_then_reports(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, dirs: tuple[Path, Path]
) -> None:
    project, _ = dirs
    fake_model.handler = lambda _req: error_reply(529, "overloaded_error", "Overloaded")
    client = await _errors(daemon_with_model)
    result = await run_agent(
        daemon_with_model.daemon,
        feature="test_agent",
        policy=AccessPolicy(read_roots=(project,)),
        system=None,
        messages=USER,
    )
    await asyncio.sleep(0.05)
    assert result.stop_reason == "error"
    assert result.error is not None
    assert "529" in result.error
    assert len(fake_model.message_requests()) == 4  # 1 + 3 retries (fake_model_config)
    assert daemon_with_model.daemon.model.usage["test_agent"].retries == 3
    (note,) = _drain(client)
    assert "model call failed" in note["message"]
    assert note["status"] == 529
    await client.close()


async def test_unknown_tools_are_refused_and_extra_tools_run(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, dirs: tuple[Path, Path]
) -> None:
    project, _ = dirs
    seen: list[dict[str, Any]] = []

    async def retire(tool_input: dict[str, Any]) -> str:
        seen.append(tool_input)
        return "retired"

    extra = ExtraTool({"name": "Retire", "input_schema": {"type": "object"}}, retire)
    fake_model.enqueue(
        tool_use_reply([("WebFetch", {"url": "http://x"}), ("Retire", {"file": "a.md"})]),
        text_reply("ok"),
    )
    result = await run_agent(
        daemon_with_model.daemon,
        feature="test_agent",
        policy=AccessPolicy(read_roots=(project,)),
        system=None,
        messages=USER,
        extra_tools={"Retire": extra},
    )
    assert seen == [{"file": "a.md"}]
    assert result.denied == [
        "WebFetch: the tool 'WebFetch' is not available to this background agent"
    ]
    tools = fake_model.message_requests()[0].json["tools"]
    assert tools[-1]["name"] == "Retire"


async def test_at_most_fifty_tool_calls_of_one_reply_run(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, dirs: tuple[Path, Path]
) -> None:
    project, _ = dirs
    fake_model.enqueue(
        tool_use_reply([("WebFetch", {"url": f"http://x/{i}"}) for i in range(2_000)]),
        text_reply("ok"),
    )
    client = await _errors(daemon_with_model)
    result = await run_agent(
        daemon_with_model.daemon,
        feature="test_agent",
        policy=AccessPolicy(read_roots=(project,)),
        system=None,
        messages=USER,
    )
    assert result.tool_calls == 2_000
    assert len(result.denied) == MAX_TOOL_CALLS_PER_REPLY  # run, and refused
    results = fake_model.message_requests()[1].json["messages"][-1]["content"]
    assert len(results) == 2_000  # every call has its result
    assert all(r["is_error"] for r in results)
    assert "at most 50 tool calls per reply" in results[-1]["content"]
    await asyncio.sleep(0.05)
    assert len(_drain(client)) == MAX_TOOL_CALLS_PER_REPLY  # not 2,000 worker errors
    await client.close()


async def test_cancel_event_aborts_the_model_call(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, dirs: tuple[Path, Path]
) -> None:
    project, _ = dirs
    fake_model.enqueue(slow(5.0, text_reply("late")))
    cancel = asyncio.Event()
    task = asyncio.create_task(
        run_agent(
            daemon_with_model.daemon,
            feature="test_agent",
            policy=AccessPolicy(read_roots=(project,)),
            system=None,
            messages=USER,
            cancel=cancel,
        )
    )
    while not fake_model.message_requests():
        await asyncio.sleep(0.01)
    cancel.set()
    result = await asyncio.wait_for(task, 2.0)
    assert result.stop_reason == "cancelled"
    assert result.turns == 0


@pytest.mark.parametrize("how", ["in-place", "by-rename"])
@pytest.mark.parametrize("with_seen", [True, False], ids=["seen", "no-seen"])
async def test_an_editors_save_while_the_write_is_screened_is_not_reverted(
    daemon_with_model: DaemonHandle,
    fake_model: FakeMessagesAPI,
    dirs: tuple[Path, Path],
    how: str,
    with_seen: bool,
) -> None:
    # Found by reading (session 21): the Write was planned, then screened for secrets (a scan
    # in a thread, the loop free) and performed with no look at the file since; an editor's
    # save in between was replaced by what was planned from the text before it. The write
    # is made only over the file as planned: changed, it is planned again (an Edit, on the
    # new text) or refused as a stale read (with `seen`: the model reads it again).
    from memoryd.agent.seen import SeenFiles

    _, memory = dirs
    target = memory / "user_role.md"
    target.write_text("line one\n")
    fake_model.enqueue(
        tool_use_reply([("Read", {"file_path": str(target)})]),
        tool_use_reply(
            [("Edit", {"file_path": str(target), "old_string": "one", "new_string": "1"})]
        ),
        text_reply("done"),
    )
    saved: list[int] = []

    def screen(path: Path, op: Any) -> None:
        if not saved:  # the editor saves while the text is being scanned
            saved.append(1)
            text = "line one\nthe editor's line\n"
            if how == "by-rename":
                tmp = target.with_name("user_role.md~")
                tmp.write_text(text)
                tmp.replace(target)
            else:
                target.write_text(text)

    await _run_in_memory(
        daemon_with_model,
        memory,
        screen_write=screen,
        seen=SeenFiles() if with_seen else None,
    )
    assert saved
    text = target.read_text()
    assert "the editor's line" in text
    result = fake_model.message_requests()[2].json["messages"][-1]["content"][0]
    if with_seen:  # a stale read: the model is told to read it again
        assert text == "line one\nthe editor's line\n"
        assert result.get("is_error") is True
        assert "changed since you read it" in result["content"]
    else:  # the Edit is made again on the editor's text
        assert text == "line 1\nthe editor's line\n"


async def test_an_edit_of_a_memory_whose_name_is_not_utf8_is_made(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, dirs: tuple[Path, Path]
) -> None:
    # Found by the session 22 review: Glob shows `user_caf\xe9.md` as `user_caf%E9.md` (59c7c9a)
    # and the policy finds the file by it, but the write's temp name was cut from the name's
    # UTF-8 encoding, which that byte cannot take: UnicodeEncodeError, the edit never made.
    _, memory = dirs
    target = memory / os.fsdecode(b"user_caf\xe9.md")
    target.write_text("line one\n")
    shown = str(memory / "user_caf%E9.md")
    fake_model.enqueue(
        tool_use_reply([("Read", {"file_path": shown})]),
        tool_use_reply([("Edit", {"file_path": shown, "old_string": "one", "new_string": "1"})]),
        text_reply("done"),
    )
    await _run_in_memory(daemon_with_model, memory)
    result = fake_model.message_requests()[2].json["messages"][-1]["content"][0]
    assert not result.get("is_error"), result
    assert target.read_text() == "line 1\n"


async def test_a_write_saved_over_at_every_screen_is_given_up_naming_the_path_as_given(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, linked_memory: Path
) -> None:
    # Review of session 22: an editor saving during each of the 5 screens left the file as
    # it saved it, and the message named the resolved path (the memory dir as reached
    # through the link it is known by, e.g. a linked ~/.claude, was not the path the model
    # gave); that path had no test.
    memory = linked_memory
    target = memory / "user_role.md"
    target.write_text("line one\n")
    fake_model.enqueue(
        tool_use_reply(
            [("Edit", {"file_path": str(target), "old_string": "one", "new_string": "1"})]
        ),
        text_reply("done"),
    )
    screens: list[Path] = []

    def screen(path: Path, op: Any) -> None:
        screens.append(path)
        target.write_text(f"line one\nthe editor's save {len(screens)}\n")

    result = await _run_in_memory(daemon_with_model, memory, screen_write=screen)
    assert screens == [target] * 5
    assert target.read_text() == "line one\nthe editor's save 5\n"
    assert result.written == []
    reply = fake_model.message_requests()[1].json["messages"][-1]["content"][0]
    assert reply.get("is_error") is True
    assert reply["content"] == (
        f"Error: {target} was saved by another program each of the 5 times it was about "
        "to be written; it is left as that program saved it"
    )
