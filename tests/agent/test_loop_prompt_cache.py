"""run_agent's prompt-cache breakpoints on its own turns, billed by the API's cache rules."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from memoryd.agent.loop import run_agent
from memoryd.agent.policy import AccessPolicy
from memoryd.llm.prompt_cache import EPHEMERAL, cached_prompt
from memoryd.session import prompts as session_prompts
from tests.agent.prompt_cache_rules import PromptCache
from tests.conftest import DaemonHandle
from tests.fakes.messages_api import (
    FakeMessagesAPI,
    cache_marks,
    message,
    text_reply,
    tool_use_reply,
)

SCHEMA = {"type": "object", "properties": {}}


def _big_file(root: Path, name: str, lines: int) -> Path:
    path = root / name
    path.write_text(
        "".join(f"def f_{i}(x):\n    return x * {i}  # padding\n" for i in range(lines))
    )
    return path


def _marked(message_: dict[str, Any]) -> list[int]:
    content = message_.get("content")
    if not isinstance(content, list):
        return []
    return [i for i, b in enumerate(content) if isinstance(b, dict) and "cache_control" in b]


async def test_each_turn_caches_the_tool_results_before_it(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, tmp_path: Path
) -> None:
    """Only the caller's prompt had a breakpoint: a 62 KB Read went again, uncached, with each
    later turn of the run. Now the newest tool results carry one (written to the cache) and
    the ones before keep theirs (read from it): each turn pays its new part only."""
    first = _big_file(tmp_path, "first.py", 1400)  # ~62 KB as Read numbers it
    second = _big_file(tmp_path, "second.py", 300)
    memory = tmp_path / "memory"
    memory.mkdir()
    fake_model.enqueue(
        tool_use_reply([("Read", {"file_path": str(first)})]),
        tool_use_reply([("Read", {"file_path": str(second)})]),
        tool_use_reply([("Write", {"file_path": str(memory / "m.md"), "content": "x"})]),
        text_reply("done"),
    )
    caller = [{"role": "user", "content": cached_prompt("extract memories " * 1500)}]
    given = copy.deepcopy(caller)
    result = await run_agent(
        daemon_with_model.daemon,
        feature="test_agent",
        policy=AccessPolicy(read_roots=(tmp_path,), write_roots=(memory,)),
        system="you extract memories",
        messages=caller,
        max_turns=5,
    )
    assert result.stop_reason == "end_turn", result.error
    assert caller == given  # the caller's messages are never marked in place
    bodies = [r.json for r in fake_model.message_requests()]
    assert len(bodies) == 4
    for body in bodies:
        assert body["messages"][0] == given[0]  # the caller's breakpoint stays
    # Request n marks the newest tool results and the ones before; older marks are moved on.
    own_marks = [[i for i, m in enumerate(b["messages"]) if i > 0 and _marked(m)] for b in bodies]
    assert own_marks == [[], [2], [2, 4], [4, 6]]
    for body in bodies[1:]:
        assert _marked(body["messages"][-1]) == [len(body["messages"][-1]["content"]) - 1]
    cache = PromptCache()
    billed = [cache.usage(b) for b in bodies]
    read_tokens = billed[1]["cache_creation_input_tokens"]
    assert read_tokens > len(first.read_text()) // 5  # the Read was written once, at turn 2
    for usage in billed[1:]:
        assert usage["input_tokens"] == 0
    for usage in billed[2:]:
        assert usage["cache_read_input_tokens"] >= read_tokens
        assert usage["cache_creation_input_tokens"] < read_tokens // 3


@pytest.mark.parametrize(
    ("system_marks", "tool_marks", "message_marks"),
    [(0, 0, 0), (1, 0, 0), (1, 1, 0), (1, 1, 1), (2, 1, 1), (1, 0, 3)],
)
async def test_no_request_carries_more_than_four_breakpoints(
    daemon_with_model: DaemonHandle,
    fake_model: FakeMessagesAPI,
    tmp_path: Path,
    system_marks: int,
    tool_marks: int,
    message_marks: int,
) -> None:
    """The API refuses a request with over four (HTTP 400). The loop's own use what the
    caller's leave, and none of the caller's is taken off."""
    system = [
        {"type": "text", "text": f"system {i}", "cache_control": EPHEMERAL}
        for i in range(system_marks)
    ] or "no marks"
    tools = [
        {"name": name, "description": name, "input_schema": SCHEMA}
        for name in ("Read", "Grep", "Glob")
    ]
    for tool in tools[:tool_marks]:
        tool["cache_control"] = EPHEMERAL
    caller: list[dict[str, Any]] = []
    for i in range(max(message_marks, 1)):
        text = {"type": "text", "text": f"message {i}"}
        if i < message_marks:
            text["cache_control"] = EPHEMERAL
        caller += [
            {"role": "user", "content": [text]},
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
        ]
    caller.append({"role": "user", "content": "now remember"})
    given = copy.deepcopy(caller)
    (tmp_path / "a.txt").write_text("a\n")
    fake_model.enqueue(
        *[tool_use_reply([("Glob", {"pattern": "*.txt", "path": str(tmp_path)})])] * 4,
        text_reply("done"),
    )
    result = await run_agent(
        daemon_with_model.daemon,
        feature="test_agent",
        policy=AccessPolicy(read_roots=(tmp_path,)),
        system=system,
        messages=caller,
        tools=tools,
        max_turns=6,
    )
    assert result.stop_reason == "end_turn", result.error
    callers = system_marks + tool_marks + message_marks
    cache = PromptCache(min_tokens=1)
    for turn, request in enumerate(fake_model.message_requests()):
        body = request.json
        own = min(turn, 2, 4 - callers)
        assert cache_marks(body) == callers + own
        cache.usage(body)  # raises as the API refuses, past four
        assert body["messages"][: len(given)] == given
        assert body["system"] == system
        assert body["tools"] == tools


async def test_session_memory_reusing_a_conversation_with_four_adds_none(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, tmp_path: Path
) -> None:
    """Session memory sends the main conversation's system, tools and messages as they came;
    one already carrying four breakpoints gets no more from the loop, turn after turn."""
    system = [{"type": "text", "text": "You are a coding agent.", "cache_control": EPHEMERAL}]
    tools = [{"name": "Edit", "description": "edit", "input_schema": SCHEMA}]
    transcript = [
        {"role": "user", "content": [{"type": "text", "text": "fix it", "cache_control": EPHEMERAL}]},
        {"role": "assistant", "content": [{"type": "text", "text": "looking"}]},
        {"role": "user", "content": [{"type": "text", "text": "and test", "cache_control": EPHEMERAL}]},
        {"role": "assistant", "content": [{"type": "text", "text": "done", "cache_control": EPHEMERAL}]},
    ]  # fmt: skip
    draft = tmp_path / "summary.md"
    draft.write_text("# Session Title\n")
    messages = session_prompts.agent_messages(
        transcript, [10] * len(transcript), "update the notes", breakpoints_used=1
    )
    fake_model.enqueue(
        tool_use_reply(
            [("Edit", {"file_path": str(draft), "old_string": "Title", "new_string": "Title!"})]
        ),
        tool_use_reply(
            [("Edit", {"file_path": str(draft), "old_string": "Title!", "new_string": "T"})]
        ),
        text_reply("done"),
    )
    result = await run_agent(
        daemon_with_model.daemon,
        feature="test_agent",
        policy=AccessPolicy(read_roots=(), write_files=(draft,), allow_shell=False),
        system=system,
        messages=messages,
        tools=tools,
    )
    assert result.stop_reason == "end_turn", result.error
    bodies = [r.json for r in fake_model.message_requests()]
    assert len(bodies) == 3
    for body in bodies:
        assert cache_marks(body) == 4
        assert body["messages"][: len(messages)] == messages


async def test_cache_markers_in_a_reply_are_not_sent_back(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, tmp_path: Path
) -> None:
    """An endpoint's reply whose blocks carried `cache_control` went back as it came: five
    such blocks made the next request one the API refuses (over four), and the run failed."""
    (tmp_path / "a.txt").write_text("a\n")
    content: list[dict[str, Any]] = [
        {"type": "text", "text": "let me look", "cache_control": EPHEMERAL}
    ]
    for i in range(4):
        content.append(
            {
                "type": "tool_use",
                "id": f"toolu_marked_{i}",
                "name": "Glob",
                "input": {"pattern": "*.txt", "path": str(tmp_path)},
                "cache_control": EPHEMERAL,
            }
        )
    fake_model.enqueue(message(content, stop_reason="tool_use"), text_reply("done"))
    result = await run_agent(
        daemon_with_model.daemon,
        feature="test_agent",
        policy=AccessPolicy(read_roots=(tmp_path,)),
        system="s",
        messages=[{"role": "user", "content": "go"}],
    )
    assert result.stop_reason == "end_turn", result.error
    second = fake_model.message_requests()[1]
    assert cache_marks(second.json) <= 4
    sent_back = second.json["messages"][1]["content"]
    assert not any("cache_control" in block for block in sent_back)
    assert [b.get("id") for b in sent_back[1:]] == [f"toolu_marked_{i}" for i in range(4)]
    assert json.loads(second.raw)["messages"][2]["content"][-1]["cache_control"] == EPHEMERAL


async def test_a_turn_of_many_calls_still_reads_the_turns_before_from_the_cache(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, tmp_path: Path
) -> None:
    """The API looks for a cached prefix at most 20 blocks before a breakpoint. With the
    newest tool results marked alone, a turn of 12 calls (24 blocks) put the previous turn's
    entry out of reach, and the 62 KB Read before it was written to the cache again."""
    big = _big_file(tmp_path, "big.py", 1400)
    (tmp_path / "a.txt").write_text("a\n")
    fake_model.enqueue(
        tool_use_reply([("Read", {"file_path": str(big)})]),
        tool_use_reply([("Glob", {"pattern": "*.txt", "path": str(tmp_path)})] * 12),
        text_reply("done"),
    )
    result = await run_agent(
        daemon_with_model.daemon,
        feature="test_agent",
        policy=AccessPolicy(read_roots=(tmp_path,)),
        system="you extract memories",
        messages=[{"role": "user", "content": cached_prompt("extract memories " * 1500)}],
    )
    assert result.stop_reason == "end_turn", result.error
    cache = PromptCache()
    billed = [cache.usage(r.json) for r in fake_model.message_requests()]
    read_tokens = billed[1]["cache_creation_input_tokens"]
    assert read_tokens > len(big.read_text()) // 5
    assert billed[2]["cache_read_input_tokens"] > read_tokens
    assert billed[2]["cache_creation_input_tokens"] < read_tokens // 3


async def test_a_parameter_named_cache_control_leaves_the_loop_its_room(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, tmp_path: Path
) -> None:
    """A reused tool list whose tools take a `cache_control` parameter (counted as markers,
    four of them) left the run no room: its turns went unmarked, each paid uncached."""
    tools = [
        {
            "name": name,
            "description": name,
            "input_schema": {"type": "object", "properties": {"cache_control": {"type": "string"}}},
        }
        for name in ("Glob", "Fetch", "Post", "Put")
    ]
    (tmp_path / "a.txt").write_text("a\n")
    fake_model.enqueue(
        tool_use_reply([("Glob", {"pattern": "*.txt", "path": str(tmp_path)})]),
        tool_use_reply([("Glob", {"pattern": "*.txt", "path": str(tmp_path)})]),
        text_reply("done"),
    )
    result = await run_agent(
        daemon_with_model.daemon,
        feature="test_agent",
        policy=AccessPolicy(read_roots=(tmp_path,)),
        system="s",
        messages=[{"role": "user", "content": cached_prompt("go")}],
        tools=tools,
    )
    assert result.stop_reason == "end_turn", result.error
    assert [cache_marks(r.json) for r in fake_model.message_requests()] == [1, 2, 3]
