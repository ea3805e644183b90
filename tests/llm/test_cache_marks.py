"""At most four cache marks reach the Messages API, whatever a client's conversation carried.

The scripted fake refuses a request with more (HTTP 400), as the real API does."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from memoryd.automem.extraction_prompts import NOTHING_MARKER
from memoryd.llm.client import ModelClient
from memoryd.llm.prompt_cache import EPHEMERAL, within_breakpoint_limit
from tests.background.conftest import Workspace, workspace_for
from tests.conftest import DaemonHandle, fake_model_config
from tests.fakes.messages_api import FakeMessagesAPI, cache_marks, text_reply


def _conversation(marked: int) -> list[dict[str, Any]]:
    """A client's turns, its own cache mark on each of the first `marked` user messages."""
    messages: list[dict[str, Any]] = []
    for i in range(marked):
        text = {"type": "text", "text": f"turn {i}", "cache_control": EPHEMERAL}
        messages += [
            {"role": "user", "content": [text]},
            {"role": "assistant", "content": [{"type": "text", "text": f"reply {i}"}]},
        ]
    return messages


def _marked_texts(body: dict[str, Any]) -> list[str]:
    return [
        block.get("text", block.get("name", ""))
        for part in (body.get("tools") or [], body.get("system") or [])
        for block in part
        if "cache_control" in block
    ] + [
        block["text"]
        for m in body["messages"]
        if isinstance(m["content"], list)
        for block in m["content"]
        if "cache_control" in block and block.get("type") == "text"
    ]


async def test_the_fake_refuses_five_marks_as_the_api_does(fake_model: FakeMessagesAPI) -> None:
    import httpx

    body = {"model": "m", "max_tokens": 8, "messages": _conversation(5)}
    async with httpx.AsyncClient() as http:
        reply = await http.post(f"{fake_model.base_url}/v1/messages", json=body)
    assert reply.status_code == 400
    assert "A maximum of 4 blocks with cache_control" in reply.text


async def test_a_request_with_six_marks_is_sent_with_the_last_four(
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.enqueue(text_reply("ok"))
    client = ModelClient(fake_model_config(fake_model))
    system = [{"type": "text", "text": "system", "cache_control": EPHEMERAL}]
    messages = [*_conversation(5), {"role": "user", "content": "go"}]
    given = copy.deepcopy(messages)
    try:
        await client.create(feature="test", max_tokens=16, system=system, messages=messages)
    finally:
        await client.close()
    (request,) = fake_model.message_requests()
    assert cache_marks(request.json) == 4
    # The last ones cover the longest prefixes: the system prompt's and turn 0's are taken off.
    assert _marked_texts(request.json) == ["turn 1", "turn 2", "turn 3", "turn 4"]
    assert messages == given  # the caller's blocks are its own (the transcript other agents get)
    assert system[0]["cache_control"] == EPHEMERAL


@pytest.mark.parametrize(
    ("request_", "kept"),
    [
        # A tool result's own blocks count too, in prompt order with the rest.
        (
            {
                "tools": [{"name": "Read", "cache_control": EPHEMERAL}],
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": "t",
                                "content": [
                                    {"type": "text", "text": f"r{i}", "cache_control": EPHEMERAL}
                                    for i in range(4)
                                ],
                            }
                        ],
                    }
                ],
            },
            4,
        ),
        # A key named cache_control in a tool's parameters is data: four marks, none taken off.
        (
            {
                "tools": [
                    {
                        "name": "Http",
                        "input_schema": {"properties": {"cache_control": {"type": "string"}}},
                    }
                ],
                "system": "plain",
                "messages": _conversation(4),
            },
            4,
        ),
    ],
)
def test_marks_are_counted_and_capped_as_the_api_counts_them(
    request_: dict[str, Any], kept: int
) -> None:
    given = copy.deepcopy(request_)
    capped = within_breakpoint_limit(request_)
    assert cache_marks(capped) == kept
    assert request_ == given
    if cache_marks(given) <= 4:
        assert capped is request_


@pytest.fixture
def ws(daemon_with_model: DaemonHandle, tmp_path: Path) -> Workspace:
    return workspace_for(daemon_with_model, tmp_path)


async def test_extraction_reusing_a_conversation_with_five_marks_is_accepted(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    tools = [{"name": "Read", "description": "read", "input_schema": {"type": "object"}}]
    messages = _conversation(5)
    fake_model.enqueue(text_reply(NOTHING_MARKER))
    await ws.handle.call(
        "after_turn",
        session_id="s1",
        cwd=str(ws.cwd),
        messages=messages,
        tools=tools,
        model="claude-main-model",
    )
    await ws.handle.daemon.services.extraction.wait_idle()
    (request,) = fake_model.message_requests()  # refused, it was retried no more (a 400)
    assert fake_model.pending() == 0, "the extraction request was refused"
    assert cache_marks(request.json) == 4
    assert ws.handle.daemon.model.usage["extraction"].errors == 0
