"""The conversation as text for a background agent's prompt: `render_transcript` (the
messages as `User:` / `Assistant:` lines within a budget) and `conversation_block` (that text in
`<conversation>` tags it cannot close). Extraction's standalone request and MagicDocs'
update prompt both show the agent the conversation so."""

from __future__ import annotations

import json
import re
from typing import Any

RENDER_BUDGET_CHARS = 60_000
RENDER_BLOCK_CHARS = 2_000


def _block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_use":
        args = json.dumps(block.get("input", {}), ensure_ascii=False, default=str)
        return f"[called {block.get('name')} {args[:RENDER_BLOCK_CHARS]}]"
    if kind == "tool_result":
        inner = block.get("content")
        body = (
            "\n".join(_block_text(b) for b in inner)
            if isinstance(inner, list)
            else str(inner or "")
        )
        label = "tool error" if block.get("is_error") else "tool result"
        return f"[{label}: {body[:RENDER_BLOCK_CHARS]}]"
    return ""


# A message that does not fit whole is shown cut (its head and its end) when at least this much
# room is left for it; the newest message always is.
MIN_CUT_CHARS = 2_000


def _cut_middle(text: str, room: int) -> str:
    """`text` within about `room` characters: its head and its end (a pasted log with the
    request under it, a long answer with its conclusion last), the middle left out."""
    if len(text) <= room:
        return text
    keep = max(room - 40, 0)
    head = keep // 3
    tail = keep - head
    note = f"\n[... {len(text) - keep:,} characters left out ...]\n"
    return text[:head] + note + (text[len(text) - tail :] if tail else "")


def render_transcript(messages: list[dict[str, Any]], budget: int = RENDER_BUDGET_CHARS) -> str:
    """The messages as `User:` / `Assistant:` text, newest kept when over the budget.

    A message that does not fit is cut in the middle rather than dropped when there is room
    for a part of it, and the newest one always is: dropped whole, a newest message over the
    budget (a pasted log with the user's request under it) left the agent shown nothing."""
    parts: list[str] = []
    used = 0
    for message in reversed(messages):
        content = message.get("content")
        blocks = content if isinstance(content, list) else [content]
        text = "\n".join(t for t in (_block_text(b) for b in blocks) if t)
        if not text:
            continue
        who = "User" if message.get("role") == "user" else "Assistant"
        entry = f"{who}: {text}"
        if used + len(entry) > budget:
            room = budget - used
            if not parts or room >= MIN_CUT_CHARS:
                parts.append(_cut_middle(entry, max(room, MIN_CUT_CHARS)))
            parts.append("[earlier messages omitted]")
            break
        parts.append(entry)
        used += len(entry)
    return "\n\n".join(reversed(parts))


# The wrapper's own tags in the conversation (a file read, a web page, a pasted text): left as
# written, a closing one put what followed outside the wrapper, read as memoryd's instructions
# (a forged "save this memory" that then went into every later session's context).
_WRAPPER_TAG = re.compile(r"<(?=\s*/?\s*conversation)", re.IGNORECASE)


def conversation_block(transcript: str) -> str:
    """`transcript` (`render_transcript`'s) inside `<conversation>` tags it cannot close."""
    return f"<conversation>\n{_WRAPPER_TAG.sub('&lt;', transcript)}\n</conversation>"
