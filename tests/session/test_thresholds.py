from __future__ import annotations

from memoryd.core.turn import natural_break
from memoryd.session.thresholds import (
    INIT_TOKENS,
    ThresholdState,
    after_compaction,
    count_tool_calls,
    decide,
)
from tests.session.builders import assistant, tool_call, tool_result, user


def calls(n: int, *, end_with_break: bool) -> list[dict[str, object]]:
    out: list[dict[str, object]] = [user("do it")]
    for _ in range(n):
        call = tool_call(file_path="/x")
        out += [call, tool_result(call, "ok")]
    if end_with_break:
        out.append(assistant("done"))
    return out


def test_nothing_happens_before_ten_thousand_tokens() -> None:
    state = ThresholdState()
    decision = decide(state, calls(5, end_with_break=True), INIT_TOKENS - 1)
    assert not decision.update
    assert decision.reason == "below_init"
    assert decision.state == state


def test_first_update_at_ten_thousand_tokens_with_tool_calls() -> None:
    messages = calls(3, end_with_break=False)
    decision = decide(ThresholdState(), messages, INIT_TOKENS)
    assert decision.update
    assert decision.reason == "ok_tool_calls"
    assert decision.state == ThresholdState(True, INIT_TOKENS, len(messages))


def test_first_update_at_a_natural_break() -> None:
    decision = decide(ThresholdState(), calls(0, end_with_break=True), 12_000)
    assert decision.update
    assert decision.reason == "ok_break"


def test_reaching_ten_thousand_initializes_even_without_an_update() -> None:
    decision = decide(ThresholdState(), calls(1, end_with_break=False), 11_000)
    assert not decision.update
    assert decision.reason == "tool_calls"
    assert decision.state.initialized
    # Once initialized, the 10k floor no longer applies (e.g. after a compaction).
    assert decide(decision.state, calls(3, end_with_break=False), 6_000).update


def test_growth_of_five_thousand_is_required() -> None:
    messages = calls(4, end_with_break=True)
    state = ThresholdState(True, 20_000, 0)
    assert not decide(state, messages, 24_999).update
    assert decide(state, messages, 24_999).reason == "token_growth"
    assert decide(state, messages, 25_000).update


def test_tool_calls_are_counted_since_the_last_update() -> None:
    messages = calls(4, end_with_break=False)
    # The last update saw the first two calls (user + 2 * (call, result) = 5 messages).
    state = ThresholdState(True, 10_000, 5)
    decision = decide(state, messages, 16_000)
    assert decision.tool_calls_since == 2
    assert not decision.update  # 2 calls and the last assistant message called a tool
    assert decide(ThresholdState(True, 10_000, 3), messages, 16_000).update  # 3 calls


def test_a_natural_break_replaces_the_tool_call_count() -> None:
    messages = calls(1, end_with_break=True)
    decision = decide(ThresholdState(True, 10_000, 0), messages, 15_000)
    assert decision.update
    assert decision.reason == "ok_break"


def test_a_shrunken_transcript_is_measured_from_its_new_size() -> None:
    # The client compacted on its own: 500 messages and 80k tokens became 7 messages, 9k.
    state = ThresholdState(True, 80_000, 500)
    messages = calls(3, end_with_break=False)
    decision = decide(state, messages, 9_000)
    assert not decision.update
    assert decision.state == ThresholdState(True, 9_000, len(messages))
    # From there, 5k more tokens with 3 new tool calls qualify.
    grown = messages + calls(3, end_with_break=False)[1:]
    assert decide(decision.state, grown, 14_000).update


def test_helpers_on_odd_transcripts() -> None:
    assert not natural_break([])
    assert not natural_break([user("hi")])
    assert natural_break([{"role": "assistant", "content": "plain string"}])
    odd = [{"role": "assistant", "content": ["not a block", {"type": "tool_use"}]}]
    assert count_tool_calls(odd) == 1
    assert not natural_break(odd)


def test_after_compaction_measures_growth_from_the_compacted_size() -> None:
    state = after_compaction(30_000, 2)
    assert state == ThresholdState(True, 30_000, 2)
    assert not decide(state, calls(3, end_with_break=True), 34_000).update
    assert decide(state, calls(3, end_with_break=True), 35_000).update
