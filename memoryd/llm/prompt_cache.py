"""Prompt-cache breakpoints for the background agents' requests.

The Messages API reads and writes its prompt cache only at blocks marked `cache_control`, at
most four a request; a request without one is billed uncached every time it is sent again
(each turn of an agent's run resends its prompt). Session notes, extraction, MagicDocs and
dream mark their requests here; every request the model client sends is held to the four
(`within_breakpoint_limit`), whatever a client's conversation carried.
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


# The order the API reads a request's prompt in, and its cache prefixes with it.
_PREFIX_ORDER = ("tools", "system", "messages")


def within_breakpoint_limit(request: dict[str, Any]) -> dict[str, Any]:
    """`request` (`messages.create`'s arguments) with at most MAX_BREAKPOINTS markers, the
    earliest in prompt order taken off past that; `request` itself when it has no more.

    A client's conversation (an `after_turn`'s system, tools and messages, reused as they came
    so its cache hits) may carry five or more, and the API refused every request reusing it
    (HTTP 400). The last markers are kept: each one reads the longest prefix ending at it, so
    the last covers most of the prompt, and the earlier ones are found within it by lookback.
    The caller's blocks are never changed: copies are made along the way to a removed marker."""
    excess = count_breakpoints([request.get(key) for key in _PREFIX_ORDER]) - MAX_BREAKPOINTS
    if excess <= 0:
        return request
    capped = dict(request)
    for key in _PREFIX_ORDER:
        if key in capped and excess > 0:
            capped[key], excess = _unmark_first(capped[key], excess)
    return capped


def _unmark_first(value: Any, excess: int) -> tuple[Any, int]:
    """`value` with its first `excess` markers (in count_breakpoints' order) taken off, and how
    many are still to take off after it."""
    if isinstance(value, dict) and "cache_control" in value and excess > 0:
        value = {k: v for k, v in value.items() if k != "cache_control"}
        excess -= 1
    if isinstance(value, dict):
        children: list[tuple[Any, Any]] = [
            (k, v) for k, v in value.items() if k not in _DATA_FIELDS
        ]
    elif isinstance(value, list):
        children = list(enumerate(value))
    else:
        return value, excess
    changed: Any = None
    for key, item in children:
        if excess <= 0:
            break
        new, excess = _unmark_first(item, excess)
        if new is not item:
            changed = changed if changed is not None else type(value)(value)
            changed[key] = new
    return (value if changed is None else changed), excess


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
