"""Prompt-cache breakpoints for the background agents' requests.

The Messages API reads and writes its prompt cache only at blocks marked `cache_control`, at
most four a request; a request without one is billed uncached every time it is sent again
(each turn of an agent's run resends its prompt). Session notes, extraction, MagicDocs and
dream mark their requests here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_BREAKPOINTS = 4  # the Messages API accepts at most four cache_control blocks per request
EPHEMERAL = {"type": "ephemeral"}
# Thinking blocks cannot carry cache_control.
_UNMARKABLE = ("thinking", "redacted_thinking")


def cached_prompt(text: str) -> list[dict[str, Any]]:
    """A one-prompt request's content: the prompt as a block with a breakpoint."""
    return [{"type": "text", "text": text, "cache_control": EPHEMERAL}]


# Fields whose value is data, not blocks: a tool's parameters, a tool call's arguments. A key
# named `cache_control` in them (an HTTP tool's parameter) is no marker, and counted as one it
# took the room of a breakpoint the request could have had.
_DATA_FIELDS = frozenset({"cache_control", "input", "input_schema"})


def count_breakpoints(value: Any) -> int:
    """How many `cache_control` markers a request part already carries."""
    if isinstance(value, dict):
        own = 1 if "cache_control" in value else 0
        return own + sum(count_breakpoints(v) for k, v in value.items() if k not in _DATA_FIELDS)
    if isinstance(value, list):
        return sum(count_breakpoints(v) for v in value)
    return 0


def with_breakpoint(message: dict[str, Any]) -> dict[str, Any]:
    """A copy of `message` with a breakpoint on its last block (its text as one block when it
    is a string); the message itself when that block cannot carry one. The caller's blocks
    are never changed: they are the transcript other agents are given too.

    Empty text blocks at the end are passed over (the breakpoint goes on the block before:
    the same prefix, as they hold nothing): the API refuses a request with one marked (HTTP
    400, "cache_control cannot be set for empty text blocks"), and Claude Code's transcripts
    keep them (a tool call made without a word)."""
    content = message.get("content")
    if isinstance(content, str):
        blocks: list[Any] = [{"type": "text", "text": content}] if content else []
    elif isinstance(content, list):
        blocks = list(content)
    else:
        return message
    index = len(blocks) - 1
    while index >= 0 and _empty_text(blocks[index]):
        index -= 1
    last = blocks[index] if index >= 0 else None
    if not isinstance(last, Mapping) or "cache_control" in last or last.get("type") in _UNMARKABLE:
        return message
    blocks[index] = {**last, "cache_control": EPHEMERAL}
    return {**message, "content": blocks}


def _empty_text(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type") == "text" and block.get("text") == ""
