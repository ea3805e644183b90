"""When the session summary is updated: SPEC.md "Layer 3", as pure functions.

- not before the conversation first reaches 10,000 tokens;
- then only when it grew >= 5,000 tokens since the last update AND (>= 3 tool calls since the
  last update OR the last assistant message called no tool — a natural break).

`ThresholdState` is what must survive a restart; `decide` never mutates it, it returns the
verdict and the state to keep.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from memoryd.core.turn import natural_break

INIT_TOKENS = 10_000
MIN_TOKENS_BETWEEN_UPDATES = 5_000
MIN_TOOL_CALLS_BETWEEN_UPDATES = 3


@dataclass(frozen=True)
class ThresholdState:
    initialized: bool = False  # the conversation has reached INIT_TOKENS once
    tokens_at_last_update: int = 0
    # Messages [0, messages_at_last_update) were in the transcript when the last update started.
    messages_at_last_update: int = 0


@dataclass(frozen=True)
class Decision:
    update: bool
    reason: (
        str  # why (not): "below_init", "token_growth", "tool_calls", "ok_tool_calls", "ok_break"
    )
    tool_calls_since: int
    growth: int
    state: ThresholdState


def count_tool_calls(messages: Sequence[Mapping[str, Any]], start: int = 0) -> int:
    calls = 0
    for message in messages[start:]:
        if message.get("role") != "assistant":
            continue
        content = message.get("content")
        if isinstance(content, list):
            calls += sum(
                1 for b in content if isinstance(b, Mapping) and b.get("type") == "tool_use"
            )
    return calls


def rebase(state: ThresholdState, message_count: int, tokens: int) -> ThresholdState:
    """Measure from the current transcript when it shrank since the last update.

    A client that compacted on its own, or cleared old tool results, hands us a smaller
    transcript: growth and tool calls then count from what it is now, rather than waiting
    for the conversation to regrow past its old size.
    """
    if message_count < state.messages_at_last_update:
        state = replace(state, messages_at_last_update=message_count)
    if tokens < state.tokens_at_last_update:
        state = replace(state, tokens_at_last_update=tokens)
    return state


def decide(state: ThresholdState, messages: Sequence[Mapping[str, Any]], tokens: int) -> Decision:
    """Should the summary be updated now? `tokens` is the conversation's corrected size."""
    if not state.initialized:
        if tokens < INIT_TOKENS:
            return Decision(False, "below_init", 0, tokens, state)
        state = replace(state, initialized=True)
    state = rebase(state, len(messages), tokens)
    start = state.messages_at_last_update
    growth = tokens - state.tokens_at_last_update
    tool_calls = count_tool_calls(messages, start)
    if growth < MIN_TOKENS_BETWEEN_UPDATES:
        return Decision(False, "token_growth", tool_calls, growth, state)
    if tool_calls >= MIN_TOOL_CALLS_BETWEEN_UPDATES:
        reason = "ok_tool_calls"
    elif natural_break(messages):
        reason = "ok_break"
    else:
        return Decision(False, "tool_calls", tool_calls, growth, state)
    updated = ThresholdState(
        initialized=True, tokens_at_last_update=tokens, messages_at_last_update=len(messages)
    )
    return Decision(True, reason, tool_calls, growth, updated)


def after_compaction(tokens: int, summarized_messages: int) -> ThresholdState:
    """The thresholds state for a freshly compacted transcript.

    Growth is measured from the compacted size, and tool calls from the first message the
    summary does not cover, so the next update comes after real new work.
    """
    return ThresholdState(
        initialized=True,
        tokens_at_last_update=tokens,
        messages_at_last_update=summarized_messages,
    )
