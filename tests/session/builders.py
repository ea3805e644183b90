"""Small transcript builders for the session-memory tests."""

from __future__ import annotations

import itertools
from typing import Any

_ids = itertools.count(1)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def tool_call(name: str = "Read", text: str | None = None, **tool_input: Any) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if text:
        content.append({"type": "text", "text": text})
    content.append(
        {"type": "tool_use", "id": f"toolu_{next(_ids)}", "name": name, "input": tool_input}
    )
    return {"role": "assistant", "content": content}


def tool_result(call: dict[str, Any], body: str) -> dict[str, Any]:
    tool_id = call["content"][-1]["id"]
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": body}],
    }


def words(tokens: int) -> str:
    """About `tokens` tokens of ASCII text (4 characters per token)."""
    return ("abc " * tokens)[: tokens * 4]


def exchange(tokens: int, *, tools: int = 1) -> list[dict[str, Any]]:
    """A user request, `tools` tool calls with results, and a closing assistant reply."""
    share = max(1, tokens // (tools + 2))
    out = [user(words(share))]
    for _ in range(tools):
        call = tool_call(file_path="/src/a.py")
        out += [call, tool_result(call, words(share))]
    out.append(assistant(words(share)))
    return out


def conversation(
    total_tokens: int, *, per_exchange: int = 2_000, tools: int = 1
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for _ in range(max(1, total_tokens // per_exchange)):
        out += exchange(per_exchange, tools=tools)
    return out
