"""llm/prompt_cache: where a breakpoint may go, as the Messages API takes it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from memoryd.automem.extraction_prompts import reuse_messages
from memoryd.llm.prompt_cache import EPHEMERAL, count_breakpoints, with_breakpoint
from tests.agent.prompt_cache_rules import EmptyTextMarked, PromptCache

EMPTY = {"type": "text", "text": ""}


@pytest.mark.parametrize(
    ("content", "marked"),
    [
        ([{"type": "text", "text": "Noted."}, EMPTY], 0),
        ([{"type": "text", "text": "a"}, EMPTY, EMPTY], 0),
        ([{"type": "tool_use", "id": "t", "name": "Read", "input": {}}, EMPTY], 0),
        ([EMPTY, {"type": "text", "text": "b"}], 1),
    ],
)
def test_an_empty_text_block_at_the_end_is_passed_over(
    content: list[dict[str, Any]], marked: int
) -> None:
    """Claude Code's transcripts keep empty text blocks (a tool call made without a word). The
    breakpoint went on one, and the API refuses that (HTTP 400): every extraction reusing
    such a conversation failed. It goes on the block before now, the same prefix."""
    message = {"role": "assistant", "content": content}
    given = copy.deepcopy(message)
    out = with_breakpoint(message)
    assert message == given
    assert [i for i, b in enumerate(out["content"]) if "cache_control" in b] == [marked]
    assert out["content"][marked] == {**content[marked], "cache_control": EPHEMERAL}


@pytest.mark.parametrize("content", [[EMPTY], [EMPTY, EMPTY], "", []])
def test_nothing_to_mark_leaves_the_message_as_it_is(content: Any) -> None:
    message = {"role": "assistant", "content": content}
    assert with_breakpoint(message) is message


def test_extraction_reusing_a_conversation_ending_in_an_empty_block_is_accepted() -> None:
    system = "You are a coding agent."
    tools = [{"name": "Read", "description": "read", "input_schema": {"type": "object"}}]
    messages = [
        {"role": "user", "content": "We deploy on Fridays only. " * 300},
        {"role": "assistant", "content": [{"type": "text", "text": "Noted."}, EMPTY]},
    ]
    sent = reuse_messages(messages, system, tools, "extract memories")
    usage = PromptCache().usage(
        {"model": "m", "system": system, "tools": tools, "messages": sent}
    )  # raises EmptyTextMarked as the API refuses it
    assert usage["cache_creation_input_tokens"] > 0
    assert sent[1]["content"] == [
        {"type": "text", "text": "Noted.", "cache_control": EPHEMERAL},
        EMPTY,
    ]


def test_the_rules_refuse_a_marked_empty_text_block() -> None:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": [{**EMPTY, "cache_control": EPHEMERAL}]}],
    }
    with pytest.raises(EmptyTextMarked):
        PromptCache().usage(body)


def test_a_cache_control_in_a_tools_parameters_or_a_calls_arguments_is_no_breakpoint() -> None:
    """Only blocks carry markers. An HTTP tool's `cache_control` parameter and a call's
    argument so named were counted as breakpoints: the writers reusing that conversation
    thought the four were taken and left their prompt and turns unmarked."""
    tools = [
        {
            "name": "Fetch",
            "description": "fetch a URL",
            "input_schema": {"type": "object", "properties": {"cache_control": {"type": "string"}}},
            "cache_control": EPHEMERAL,
        }
    ]
    messages = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "get it", "cache_control": EPHEMERAL}],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "Fetch",
                    "input": {"cache_control": "no-store"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [{"type": "text", "text": "page", "cache_control": EPHEMERAL}],
                }
            ],
        },
    ]
    assert count_breakpoints(tools) == 1
    assert count_breakpoints(messages) == 2  # the tool result's inner block is one
    assert count_breakpoints([tools, messages]) == 3
