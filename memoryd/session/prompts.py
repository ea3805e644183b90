"""What the summary-updating agent is told, and the transcript it is shown (pure)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from memoryd.llm.prompt_cache import MAX_BREAKPOINTS, count_breakpoints, with_breakpoint
from memoryd.llm.tokens import CHARS_PER_TOKEN, estimate_block, estimate_message, estimate_text
from memoryd.session.compaction import head_within, plan_window

# Past this size only the most recent part of the transcript is shown to the updating agent,
# so a very long session never produces a request over the model's context window.
UPDATE_INPUT_TOKENS = 120_000
# Of a transcript over UPDATE_INPUT_TOKENS, a message over this many tokens is shown with its
# blocks cut to their share of it, each by its head and tail: one tool result of 1 MB (~262,000
# tokens), or the results of parallel calls, ended the window of recent messages, so the agent
# was shown nothing before it, not even the user's request, and wrote the notes from the last
# message alone.
MAX_SHOWN_MESSAGE_TOKENS = 20_000
MIN_SHOWN_BLOCK_TOKENS = 1_000
MIN_SHOWN_STRING_TOKENS = 100
CUT_NOTE = "[... ~{tokens:,} tokens of this {what} left out ...]"
BLOCKS_CUT_NOTE = "[... {blocks:,} blocks (~{tokens:,} tokens) of this {what} left out ...]"
PAIRS_CUT_NOTE = "[{blocks:,} {what} left out with their {partners}]"
# A tool call's input still over its share once its long strings are cut (thousands of short
# ones) is shown as its JSON text, cut, under this key.
CUT_INPUT_KEY = "input_cut_to_fit"

KNOWN_BLOCKS = frozenset(
    {"text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking"}
)

UPDATE_INSTRUCTIONS = """\
You are now keeping the session notes for the conversation above. This is a bookkeeping \
step, not a request from the user: do not answer or continue the conversation itself.

The notes file is {path}. Its current content:

<current-notes>
{notes}
</current-notes>

Update the notes so that someone who sees only this file could pick the work up exactly \
where it stands now. Rules:
- Change the file only with the Edit tool, and only this one file. Do not read or write \
anything else.
- Keep every section heading and the italic line under it exactly as they are; write \
beneath the italic line. Leave a section without notes as it is.
- "Current State" must describe the latest state: what is in progress, what is left, the \
next step. Rewrite it rather than append to it.
- Be specific and dense: file paths, function names, exact commands, exact error messages, \
numbers. No filler, no repetition between sections.
- Keep each section well under ~2,000 tokens; condense older detail as it grows. The \
Worklog gets one terse line per step.
- Never copy secrets (keys, tokens, passwords) into the notes.
- Do not mention these instructions in the notes.
When the notes are up to date, stop without further tool calls.
"""


def update_prompt(path: str, notes: str) -> str:
    return UPDATE_INSTRUCTIONS.format(path=path, notes=notes.rstrip())


# In place of a message with no content: the API refuses empty messages and text blocks
# that are empty or only white space ("text content blocks must be non-empty"), so one such
# message in the transcript failed every update of the session with HTTP 400.
EMPTY_MESSAGE = "[empty message]"


def _blank_text(block: Any) -> bool:
    return (
        isinstance(block, Mapping)
        and block.get("type") == "text"
        and not (isinstance(block.get("text"), str) and block["text"].strip())
    )


def _clean_block(block: Any) -> Any:
    if isinstance(block, Mapping) and block.get("type") in KNOWN_BLOCKS:
        if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
            inner = [_clean_block(b) for b in block["content"] if not _blank_text(b)]
            return {**block, "content": inner}
        return block
    kind = block.get("type") if isinstance(block, Mapping) else type(block).__name__
    return {"type": "text", "text": f"[a content block of type {kind!r} was left out]"}


def _clean(message: Mapping[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, list):
        blocks = [_clean_block(b) for b in content if not _blank_text(b)]
        return {"role": message.get("role"), "content": blocks or EMPTY_MESSAGE}
    if isinstance(content, str) and content.strip():
        return {"role": message.get("role"), "content": content}
    return {"role": message.get("role"), "content": EMPTY_MESSAGE}


def _uses(message: Mapping[str, Any]) -> list[str]:
    content = message.get("content")
    if message.get("role") != "assistant" or not isinstance(content, list):
        return []
    return [
        b["id"]
        for b in content
        if isinstance(b, Mapping) and b.get("type") == "tool_use" and isinstance(b.get("id"), str)
    ]


def _as_list(content: Any) -> list[Any]:
    if isinstance(content, list):
        return list(content)
    return [{"type": "text", "text": content}] if isinstance(content, str) and content else []


def _placeholder(tool_id: str) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": tool_id,
        "content": "[no result in the transcript]",
    }


def repair_tool_pairs(convo: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Make every tool call answered by the next message and every result answer a call.

    The API rejects a request otherwise. A result whose call is not in the message before it
    becomes a text note; a call without a result gets a placeholder result. Messages that
    already pair up are passed through untouched (the prompt cache keeps hitting).
    """
    out: list[dict[str, Any]] = []
    for message in convo:
        wanted = _uses(out[-1]) if out else []
        if message.get("role") == "user":
            content = _as_list(message.get("content"))
            answered = set()
            # The results first: a message answering calls must begin with them ("Did not
            # find 2 tool_result block(s) at the beginning"), a note for an unknown call in
            # their midst failed the update.
            results: list[Any] = []
            rest: list[Any] = []
            for block in content:
                if isinstance(block, Mapping) and block.get("type") == "tool_result":
                    tool_id = block.get("tool_use_id")
                    if tool_id in wanted and tool_id not in answered:
                        answered.add(tool_id)
                        results.append(block)
                        continue
                    rest.append(
                        {"type": "text", "text": f"[a tool result for an unknown call {tool_id!r}]"}
                    )
                    continue
                rest.append(block)
            fixed = results + rest
            missing = [_placeholder(t) for t in wanted if t not in answered]
            if missing or fixed != content:
                message = {"role": "user", "content": missing + fixed}
        elif wanted:
            out.append({"role": "user", "content": [_placeholder(t) for t in wanted]})
        out.append(message)
    if out and _uses(out[-1]):
        out.append({"role": "user", "content": [_placeholder(t) for t in _uses(out[-1])]})
    return out


def _cut_text(text: str, what: str, budget: int) -> str:
    """`text` within ~`budget` tokens: its head (two thirds) and its tail (where a log or an
    output usually ends with the error or the total), a note between them."""
    if estimate_text(text) <= budget:
        return text
    budget -= 20  # the note
    head = head_within(text, budget * 2 // 3)
    tail_budget = budget - estimate_text(head)
    tail = head_within(text[-tail_budget * CHARS_PER_TOKEN :][::-1], tail_budget)[::-1]
    left_out = estimate_text(text) - estimate_text(head) - estimate_text(tail)
    return f"{head}\n{CUT_NOTE.format(tokens=left_out, what=what)}\n{tail}"


def _cut_strings(value: Any, budget: int) -> Any:
    """A tool call's input with each long string in it cut (a `Write` of a whole file)."""
    if isinstance(value, str):
        return _cut_text(value, "text", budget)
    if isinstance(value, Mapping):
        return {key: _cut_strings(item, budget) for key, item in value.items()}
    if isinstance(value, list):
        return [_cut_strings(item, budget) for item in value]
    return value


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


def _string_cap(sizes: list[int], budget: int) -> int:
    """The largest size to cut every string to for all of them to add up to `budget`."""
    remaining, left = budget, len(sizes)
    for size in sorted(sizes):
        if size * left > remaining:
            return remaining // left
        remaining, left = remaining - size, left - 1
    return budget


def _cut_input(value: Any, budget: int) -> Any:
    """A tool call's input within ~`budget` tokens: its long strings cut to their share (a
    `Write` of a whole file, an `Edit`'s two texts), or, when they are too many for a share
    worth showing (thousands of short ones) or none at all (a list of numbers), the whole of it
    as cut JSON text."""
    cap = _string_cap([estimate_text(text) for text in _strings(value)], budget)
    if cap >= MIN_SHOWN_STRING_TOKENS:
        value = _cut_strings(value, cap)
    text = json.dumps(value, ensure_ascii=False)
    if not _over(estimate_text(text), budget):
        return value
    # Shown inside JSON, its quotes escaped: cut to the share of the budget left for them.
    shown = budget * len(text) // len(json.dumps(text, ensure_ascii=False))
    return {CUT_INPUT_KEY: _cut_text(text, "tool call input", shown)}


def _over(tokens: int, budget: int) -> bool:
    """Whether cut blocks of `tokens` in all are over `budget`: their estimates overshoot it
    a little (the notes, the JSON around a cut string)."""
    return tokens > budget + budget // 10


def _cut_block(block: Any, budget: int) -> Any:
    """`block` within ~`budget` tokens where it can be cut (a thinking block cannot: its
    signature covers its text)."""
    if not isinstance(block, Mapping) or estimate_block(block) <= budget:
        return block
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return {**block, "text": _cut_text(block["text"], "text", budget)}
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, str):
            return {**block, "content": _cut_text(content, "tool result", budget)}
        if isinstance(content, list) and content:
            return {**block, "content": _cut_blocks(content, budget, "tool result")}
        return block
    if kind == "tool_use":
        return {**block, "input": _cut_input(block.get("input"), budget)}
    if kind == "document":
        source = block.get("source")
        if (
            isinstance(source, Mapping)
            and source.get("type") == "text"
            and isinstance(source.get("data"), str)
        ):
            data = _cut_text(source["data"], "document", budget)
            return {**block, "source": {**source, "data": data}}
        return {
            "type": "text",
            "text": f"[a document of ~{estimate_block(block):,} tokens was left out]",
        }
    return block


def _with_note(blocks: list[Any], note: dict[str, Any], at_least: int = 0) -> list[Any]:
    """`blocks` with `note` put in at `at_least` or after their last tool result, whichever
    is later: a message answering calls must begin with its results (the API refuses it
    otherwise)."""
    results = (index + 1 for index, block in enumerate(blocks) if _is_result(block))
    at = max([at_least, *results])
    return [*blocks[:at], note, *blocks[at:]]


def _is_result(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type") == "tool_result"


def _count_within(sizes: Sequence[int], budget: int) -> int:
    """How many of the leading `sizes` add up to at most `budget`."""
    total = 0
    for count, size in enumerate(sizes):
        total += size
        if total > budget:
            return count
    return len(sizes)


def _cut_blocks(blocks: list[Any], budget: int, what: str) -> list[Any]:
    """`blocks` within ~`budget` tokens: each cut to its share of it, then, when there are too
    many for that (hundreds of short ones), the leading and the trailing ones, a note between."""
    share = max(budget // len(blocks), MIN_SHOWN_BLOCK_TOKENS)
    blocks = [_cut_block(block, share) for block in blocks]
    sizes = [estimate_block(block) for block in blocks]
    if not _over(sum(sizes), budget):
        return blocks
    head = _count_within(sizes, budget * 2 // 3)
    tail = _count_within(sizes[head:][::-1], budget - sum(sizes[:head]))
    left_out = blocks[head : len(blocks) - tail]
    kept = blocks[:head] + blocks[len(blocks) - tail :]
    tokens = sum(sizes[head : len(blocks) - tail])
    note = {
        "type": "text",
        "text": BLOCKS_CUT_NOTE.format(blocks=len(left_out), tokens=tokens, what=what),
    }
    return _with_note(kept, note, head)


def _tool_ids(blocks: Sequence[Any]) -> set[str]:
    """The ids of the calls `blocks` make or answer."""
    ids = set()
    for block in blocks:
        if isinstance(block, Mapping):
            tool_id = block.get("id" if block.get("type") == "tool_use" else "tool_use_id")
            if block.get("type") in ("tool_use", "tool_result") and isinstance(tool_id, str):
                ids.add(tool_id)
    return ids


def _cut_message(message: Mapping[str, Any]) -> tuple[Mapping[str, Any], set[str]]:
    """`message` cut to ~MAX_SHOWN_MESSAGE_TOKENS, and the ids of the calls and results it no
    longer holds (their partners in other messages go too)."""
    content = message.get("content")
    if isinstance(content, str):
        text = _cut_text(content, "message", MAX_SHOWN_MESSAGE_TOKENS)
        return {**message, "content": text}, set()
    if not isinstance(content, list) or not content:
        return message, set()
    cut = _cut_blocks(content, MAX_SHOWN_MESSAGE_TOKENS, "message")
    return {**message, "content": cut}, _tool_ids(content) - _tool_ids(cut)


def _without_tools(message: Mapping[str, Any], ids: set[str]) -> Mapping[str, Any]:
    """`message` without the calls and results of `ids`, a note in their place."""
    content = message.get("content")
    if not isinstance(content, list) or not _tool_ids(content) & ids:
        return message
    kept = [block for block in content if not _tool_ids([block]) & ids]
    calls = message.get("role") == "assistant"
    note = {
        "type": "text",
        "text": PAIRS_CUT_NOTE.format(
            blocks=len(content) - len(kept),
            what="tool calls" if calls else "tool results",
            partners="results" if calls else "calls",
        ),
    }
    return {**message, "content": _with_note(kept, note)}


def _with_long_messages_cut(
    messages: Sequence[Mapping[str, Any]], per_message: Sequence[int]
) -> tuple[list[Mapping[str, Any]], list[int]]:
    """The transcript and its estimates with each long message cut, from the end back to
    where UPDATE_INPUT_TOKENS is spent (the agent is shown no more)."""
    shown, sizes = list(messages), list(per_message)
    total = 0
    left_out: set[str] = set()
    for index in range(len(shown) - 1, -1, -1):
        if sizes[index] > MAX_SHOWN_MESSAGE_TOKENS:
            shown[index], dropped = _cut_message(shown[index])
            left_out |= dropped
            sizes[index] = estimate_message(shown[index])
        total += sizes[index]
        if total > UPDATE_INPUT_TOKENS:
            break
    if left_out:
        # A call shown without its result (or the reverse) would be repaired with a
        # placeholder claiming there was none.
        for index, message in enumerate(shown):
            paired = _without_tools(message, left_out)
            if paired is not message:
                shown[index], sizes[index] = paired, estimate_message(paired)
    return shown, sizes


def agent_messages(
    messages: Sequence[Mapping[str, Any]],
    per_message: Sequence[int],
    prompt: str,
    *,
    breakpoints_used: int = 0,
) -> list[dict[str, Any]]:
    """The transcript (or its recent part) plus the update request, valid for the API.

    Block types the API would reject are replaced by a short note, tool calls and results
    are paired up (`repair_tool_pairs`), and the request goes last, as a user message. Of a
    transcript over UPDATE_INPUT_TOKENS, the recent part is shown, its long messages cut. The
    transcript's last block carries a cache breakpoint (unless the request would then have
    more than the API's four; `breakpoints_used`: those the system prompt and tools carry):
    the API reads and writes its cache only at breakpoints, and without one the transcript
    was billed uncached on every update and on every further turn of it.
    """
    start = 0
    if sum(per_message) > UPDATE_INPUT_TOKENS:
        messages, per_message = _with_long_messages_cut(messages, per_message)
        start = plan_window(
            messages,
            per_message,
            None,
            min_tokens=UPDATE_INPUT_TOKENS,
            min_text=0,
            max_tokens=UPDATE_INPUT_TOKENS,
        ).start
    convo = [_clean(m) for m in messages[start:]]
    if start > 0 or (convo and convo[0].get("role") != "user"):
        convo.insert(
            0, {"role": "user", "content": "[earlier parts of this conversation are omitted]"}
        )
    convo = repair_tool_pairs(convo)
    if convo and breakpoints_used + count_breakpoints(convo) < MAX_BREAKPOINTS:
        convo[-1] = with_breakpoint(convo[-1])
    request = {"type": "text", "text": prompt}
    if convo and convo[-1].get("role") == "user":
        # Same role twice in a row is merged into one message rather than sent as two.
        last = convo[-1]
        convo[-1] = {"role": "user", "content": [*_as_list(last.get("content")), request]}
    else:
        convo.append({"role": "user", "content": [request]})
    return convo
