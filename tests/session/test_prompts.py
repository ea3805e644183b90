from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from memoryd.llm.tokens import estimate_message
from memoryd.session.prompts import (
    UPDATE_INPUT_TOKENS,
    agent_messages,
    repair_tool_pairs,
    update_prompt,
)
from tests.session.builders import assistant, conversation, tool_call, tool_result, user, words


def per(messages: list[dict[str, Any]]) -> list[int]:
    return [estimate_message(m) for m in messages]


def check_api_shape(convo: list[dict[str, Any]]) -> None:
    """What the Messages API insists on: user first, calls answered by the next message
    (consecutive messages of one role are allowed: the API merges them)."""
    assert convo[0]["role"] == "user"
    for index, message in enumerate(convo):
        content = message["content"]
        if message["role"] == "assistant" and isinstance(content, list):
            calls = [b["id"] for b in content if b["type"] == "tool_use"]
            if calls:
                answer = convo[index + 1]["content"]
                results = [b["tool_use_id"] for b in answer if b["type"] == "tool_result"]
                assert sorted(results) == sorted(calls)
        if message["role"] == "user" and isinstance(content, list):
            previous = convo[index - 1]["content"] if index else []
            made = {b["id"] for b in previous if isinstance(b, dict) and b["type"] == "tool_use"}
            for block in content:
                if block["type"] == "tool_result":
                    assert block["tool_use_id"] in made


def test_prompt_names_the_file_and_carries_the_notes() -> None:
    prompt = update_prompt("/x/.summary.draft.md", "# Current State\nwip\n")
    assert "/x/.summary.draft.md" in prompt
    assert "# Current State\nwip\n</current-notes>" in prompt
    assert "Edit" in prompt


def _without_breakpoints(convo: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            **m,
            "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]
            if isinstance(m["content"], list)
            else m["content"],
        }
        for m in convo
    ]


def test_a_clean_transcript_is_sent_as_is_then_the_request() -> None:
    messages = [*conversation(6_000), assistant("done")]
    before = copy.deepcopy(messages)
    convo = agent_messages(messages, per(messages), "UPDATE")
    assert convo[: len(messages) - 1] == messages[:-1]
    assert _without_breakpoints(convo[: len(messages)]) == messages
    assert convo[-1] == {"role": "user", "content": [{"type": "text", "text": "UPDATE"}]}
    assert messages == before  # the caller's transcript (extraction's too) is not changed
    check_api_shape(convo)


def test_the_transcripts_last_block_carries_a_cache_breakpoint() -> None:
    """The API reads and writes its cache only at breakpoints: without one the transcript
    was billed uncached on every update and every further turn of it."""
    messages = [*conversation(6_000), assistant("done")]
    convo = agent_messages(messages, per(messages), "UPDATE")
    assert json.dumps(convo).count("cache_control") == 1
    assert convo[len(messages) - 1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    # After a user message (a tool result), on its last block, before the request.
    call = tool_call(file_path="/a")
    ending = [user("go"), call, tool_result(call, "content")]
    convo = agent_messages(ending, per(ending), "UPDATE")
    assert convo[-1]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in convo[-1]["content"][-1]
    # A string content becomes a text block that can carry it.
    convo = agent_messages([user("hello there")], [10], "UPDATE")
    assert convo[0]["content"][0] == {
        "type": "text",
        "text": "hello there",
        "cache_control": {"type": "ephemeral"},
    }
    # Never more than the API's four in a request.
    assert "cache_control" not in json.dumps(
        agent_messages(messages, per(messages), "UPDATE", breakpoints_used=4)
    )


def test_a_transcript_ending_in_a_tool_result_gets_the_request_in_the_same_message() -> None:
    call = tool_call(file_path="/a")
    messages = [user("go"), call, tool_result(call, "content")]
    convo = agent_messages(messages, per(messages), "UPDATE")
    assert len(convo) == 3
    assert convo[-1]["content"][-1] == {"type": "text", "text": "UPDATE"}
    assert convo[-1]["content"][0]["type"] == "tool_result"
    check_api_shape(convo)


def test_a_trailing_call_without_result_gets_a_placeholder() -> None:
    messages = [user("go"), tool_call(file_path="/a")]
    convo = agent_messages(messages, per(messages), "UPDATE")
    check_api_shape(convo)
    assert convo[-1]["content"][0]["content"] == "[no result in the transcript]"


def test_orphan_results_and_unanswered_calls_are_repaired() -> None:
    call = tool_call(file_path="/a")
    orphan = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "ghost", "content": "x"}],
    }
    messages = [user("go"), call, assistant("moved on"), orphan, assistant("ok")]
    convo = repair_tool_pairs([dict(m) for m in messages])
    assert convo[0] == messages[0]
    assert convo[2]["role"] == "user"  # inserted answer for the call
    assert convo[4]["content"][0]["type"] == "text"
    assert "ghost" in convo[4]["content"][0]["text"]
    # A result in the wrong place (its call two messages back) is turned into a note.
    late = [user("go"), call, user("interjection"), tool_result(call, "late")]
    fixed = repair_tool_pairs(late)
    assert fixed[2]["content"][0]["type"] == "tool_result"  # placeholder answers the call
    assert fixed[3]["content"][0]["type"] == "text"


def test_unknown_blocks_are_replaced_by_a_note() -> None:
    messages = [
        user("go"),
        {
            "role": "assistant",
            "content": [{"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}],
        },
        user("next"),
        assistant("ok"),
    ]
    convo = agent_messages(messages, per(messages), "UPDATE")
    assert convo[1]["content"][0]["type"] == "text"
    assert "server_tool_use" in convo[1]["content"][0]["text"]
    check_api_shape(convo)


def test_a_huge_transcript_is_cut_to_its_recent_part() -> None:
    messages = [*conversation(300_000, per_exchange=3_000, tools=2), assistant(words(10))]
    convo = agent_messages(messages, per(messages), "UPDATE")
    assert convo[0]["content"] == "[earlier parts of this conversation are omitted]"
    assert sum(per(convo[1:-1])) <= UPDATE_INPUT_TOKENS
    assert _without_breakpoints([convo[-2]]) == [messages[-1]]
    check_api_shape(convo)


def test_empty_messages_and_blank_text_blocks_are_not_sent() -> None:
    # Found by a bug hunt: the API refuses a message with no content and a text block that is
    # empty or only white space; one in the transcript failed every update of the session.
    call = tool_call(file_path="/a.py")
    transcript: list[dict[str, Any]] = [
        user("fix it"),
        {"role": "assistant", "content": []},
        user("   "),
        {"role": "assistant", "content": [{"type": "text", "text": ""}, *call["content"]]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": call["content"][-1]["id"],
                    "content": [{"type": "text", "text": "\n"}, {"type": "text", "text": "ok"}],
                },
                {"type": "text"},
            ],
        },
        assistant("done"),
    ]
    convo = agent_messages(transcript, per(transcript), update_prompt("/n.md", "# Notes"))
    check_api_shape(convo)

    def blank(content: Any) -> bool:
        """Empty, or holding an empty text block (also inside a tool result)."""
        if isinstance(content, str):
            return not content.strip()
        for block in content:
            if block["type"] == "text" and not str(block.get("text", "")).strip():
                return True
            inner = block.get("content") if block["type"] == "tool_result" else None
            if isinstance(inner, list) and inner and blank(inner):
                return True
        return not content

    assert not any(blank(m["content"]) for m in convo)
    texts = json.dumps(convo)
    assert "fix it" in texts
    assert '"ok"' in texts
    assert texts.count("[empty message]") == 2


def _huge_tool_results() -> dict[str, dict[str, Any]]:
    """The one message of each kind that is over the agent's whole budget on its own."""
    read = tool_call(file_path="/build.log")
    write = tool_call("Write", file_path="/big.json", content="HEAD " + words(300_000) + " TAIL")
    return {
        "ascii result": tool_result(read, "HEAD " + words(262_000) + " TAIL-ERROR"),
        "cjk result": tool_result(read, "HEAD " + "日志" * 70_000 + " TAIL-ERROR"),
        "result blocks": {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": read["content"][-1]["id"],
                    "content": [{"type": "text", "text": "HEAD " + words(200_000) + " TAIL"}],
                }
            ],
        },
        "pasted text": user("HEAD " + words(150_000) + " TAIL"),
        "write call": write,
        "text document": {
            "role": "user",
            "content": [
                {
                    "type": "document",
                    "source": {
                        "type": "text",
                        "media_type": "text/plain",
                        "data": "HEAD " + words(140_000) + " TAIL",
                    },
                }
            ],
        },
        "pdf document": {
            "role": "user",
            "content": [
                {
                    "type": "document",
                    "source": {
                        "type": "base64",
                        "media_type": "application/pdf",
                        "data": "JVBERi0" + "A" * 8_000_000,
                    },
                }
            ],
        },
    }


@pytest.mark.parametrize("kind", list(_huge_tool_results()))
def test_a_block_over_the_budget_is_shown_cut_with_what_came_before(kind: str) -> None:
    # Found by a bug hunt: a 1 MB tool result (~262,000 tokens) ended the window of recent
    # messages at once, so the agent was shown only '[earlier parts ... omitted]' and the last
    # reply, never the user's request nor the call, and wrote the notes from that.
    huge = _huge_tool_results()[kind]
    call = tool_call(file_path="/build.log")
    before = [user("UNIQUE-REQUEST: why does the CI fail?")]
    if kind.endswith("result") or kind == "result blocks":
        call["content"][-1]["id"] = huge["content"][0]["tool_use_id"]
        before.append(call)
    transcript = [*before, huge, assistant("FINAL-ANSWER: the linker step fails.")]
    convo = agent_messages(transcript, per(transcript), "UPDATE")
    sent = json.dumps(convo, ensure_ascii=False)
    assert "UNIQUE-REQUEST" in sent
    assert "FINAL-ANSWER" in sent
    if kind != "pdf document":  # a PDF's data is left out whole
        assert "HEAD" in sent
        assert "TAIL" in sent
    assert "left out" in sent
    assert sum(per(convo[:-1])) <= UPDATE_INPUT_TOKENS
    check_api_shape(convo)


def test_a_transcript_within_the_budget_is_not_cut() -> None:
    # The cut is only for a transcript over the budget: under it, what the main conversation
    # sent is sent unchanged (its prompt cache hits).
    call = tool_call(file_path="/a.log")
    transcript = [user("go"), call, tool_result(call, words(60_000)), assistant("done")]
    convo = agent_messages(transcript, per(transcript), "UPDATE")
    assert _without_breakpoints(convo[:3]) == transcript[:3]


def test_the_results_of_parallel_calls_are_cut_to_their_share() -> None:
    # Found by a bug hunt: eight parallel reads of ~19,000 tokens each, one message of
    # ~152,000 tokens with no block over the cut, still ended the window at once.
    calls = [tool_call(file_path=f"/src/{i}.py") for i in range(8)]
    asked = {"role": "assistant", "content": [c["content"][-1] for c in calls]}
    results = {
        "role": "user",
        "content": [
            tool_result(c, f"HEAD{i} " + words(19_000) + f" TAIL{i}")["content"][0]
            for i, c in enumerate(calls)
        ],
    }
    transcript = [user("UNIQUE-REQUEST: read the sources"), asked, results, assistant("read")]
    convo = agent_messages(transcript, per(transcript), "UPDATE")
    sent = json.dumps(convo)
    assert "UNIQUE-REQUEST" in sent
    assert all(f"HEAD{i}" in sent and f"TAIL{i}" in sent for i in range(8))
    assert sum(per(convo[:-1])) <= UPDATE_INPUT_TOKENS
    check_api_shape(convo)


def _results_lead(convo: list[dict[str, Any]]) -> bool:
    """A user message's tool results come before anything else in it (the API: "messages
    following tool_use blocks must begin with ... tool_result blocks")."""
    for message in convo:
        if message["role"] == "user" and isinstance(message["content"], list):
            kinds = [b["type"] == "tool_result" for b in message["content"]]
            if kinds != sorted(kinds, reverse=True):
                return False
    return True


@pytest.mark.parametrize("kind", ["text", "results"])
def test_a_message_of_many_small_blocks_is_cut_as_a_whole(kind: str) -> None:
    # Found by a bug hunt: 150 blocks of ~1,000 tokens each, none over its share (the 1,000
    # floor), left one message of ~150,000 tokens that still ended the window at once.
    calls = [tool_call(file_path=f"/src/{i}.py") for i in range(150)]
    asked = {"role": "assistant", "content": [c["content"][-1] for c in calls]}
    if kind == "results":
        blocks = [
            tool_result(c, f"PART{i} " + words(990))["content"][0] for i, c in enumerate(calls)
        ]
        transcript = [user("UNIQUE-REQUEST: read them"), asked, {"role": "user", "content": blocks}]
    else:
        blocks = [{"type": "text", "text": f"PART{i} " + words(990)} for i in range(150)]
        transcript = [user("UNIQUE-REQUEST: notes follow"), {"role": "user", "content": blocks}]
    transcript.append(assistant("read"))
    convo = agent_messages(transcript, per(transcript), "UPDATE")
    sent = json.dumps(convo)
    assert "UNIQUE-REQUEST" in sent
    assert "PART0 " in sent
    assert "PART149 " in sent
    assert "PART75 " not in sent
    assert "blocks (~" in sent
    assert sum(per(convo[:-1])) <= UPDATE_INPUT_TOKENS
    check_api_shape(convo)
    assert _results_lead(convo)
    if kind == "results":
        # The calls whose results were left out went with them, not answered by placeholders.
        assert "no result in the transcript" not in sent
        assert "tool calls left out with their results" in sent


_EDITS = [{"old": f"line {i} old text", "new": f"line {i} new text"} for i in range(20_000)]


@pytest.mark.parametrize(
    ("tool_input", "first", "last"),
    [
        # A MultiEdit-like call of 40,000 short strings (~260,000 tokens): each was under the
        # cut, so the call was shown whole and ended the window.
        ({"edits": _EDITS}, "line 0 old text", "line 19999 new text"),
        ({"values": list(range(100_000))}, "[0, 1, 2", "99998, 99999]"),  # no string to cut
    ],
)
def test_a_tool_call_of_many_short_values_is_cut_as_a_whole(
    tool_input: dict[str, Any], first: str, last: str
) -> None:
    call = tool_call("MultiEdit", file_path="/src/big.py", **tool_input)
    transcript = [user("UNIQUE-REQUEST: rename"), call, tool_result(call, "ok"), assistant("done")]
    convo = agent_messages(transcript, per(transcript), "UPDATE")
    sent = json.dumps(convo)
    assert "UNIQUE-REQUEST" in sent
    assert first in sent
    assert last in sent
    assert "tool call input left out" in sent
    assert sum(per(convo[:-1])) <= UPDATE_INPUT_TOKENS
    check_api_shape(convo)


def test_an_unknown_result_among_known_ones_goes_after_them() -> None:
    # Its note between two results broke "a message answering calls begins with its
    # results": the API refused every update of the session.
    call = tool_call(file_path="/a")
    first = tool_result(call, "a")["content"][0]
    call["content"].append({"type": "tool_use", "id": "toolu_c", "name": "Read", "input": {}})
    results = {
        "role": "user",
        "content": [
            first,
            {"type": "tool_result", "tool_use_id": "toolu_unknown", "content": "b"},
            {"type": "tool_result", "tool_use_id": "toolu_c", "content": "c"},
        ],
    }
    convo = repair_tool_pairs([user("go"), call, results])
    assert _results_lead(convo)
    assert "toolu_unknown" in json.dumps(convo[2])
    check_api_shape(convo)
