"""The Messages API's prompt-cache rules, applied to recorded requests (tests and bench).

What the API documents, as far as a request's own bytes decide it:
- the prompt is read in the order tools, system, messages; each tool definition, system block
  and message content block (a string content: one block) is one block (a mark nested in a
  block, e.g. in a tool result's content, is not modelled);
- at most four blocks carry `cache_control` (more: HTTP 400), and no empty text block does
  (HTTP 400 as well);
- a breakpoint at block b reads the longest prefix ending at b, or at one of the 20 block
  boundaries before it, that an earlier request wrote; the prefix up to each breakpoint past
  that is written (`cache_creation_input_tokens`), if it is at least `min_tokens` long;
- the prefix is the content itself: the `cache_control` markers are not part of it;
- what follows the last breakpoint is billed as `input_tokens`.
Tokens are estimated as a block's JSON length / 4. Entries never expire here (a run's turns
are seconds apart, well inside the five minutes of the API).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
MIN_CACHEABLE_TOKENS = 1024  # Sonnet's and Opus's minimum


class TooManyBreakpoints(ValueError):
    """What the API refuses with HTTP 400."""


class EmptyTextMarked(ValueError):
    """HTTP 400 too: "cache_control cannot be set for empty text blocks"."""


@dataclass(frozen=True)
class Block:
    key: bytes  # this block's content as the prefix hash sees it
    tokens: int
    marked: bool


def _strip_marker(block: Any) -> tuple[Any, bool]:
    if isinstance(block, dict) and "cache_control" in block:
        return {k: v for k, v in block.items() if k != "cache_control"}, True
    return block, False


def _block(where: str, content: Any) -> Block:
    bare, marked = _strip_marker(content)
    if marked and isinstance(bare, dict) and bare.get("type") == "text" and bare.get("text") == "":
        raise EmptyTextMarked(f"{where}: cache_control cannot be set for empty text blocks")
    text = json.dumps(bare, sort_keys=True, ensure_ascii=False)
    return Block(f"{where}|{text}".encode(), max(len(text) // 4, 1), marked)


def blocks(body: dict[str, Any]) -> list[Block]:
    """The request's blocks in the order the cache reads them."""
    out = [_block("tool", tool) for tool in body.get("tools") or []]
    system = body.get("system")
    if isinstance(system, str):
        out.append(_block("system", {"type": "text", "text": system}))
    elif isinstance(system, list):
        out.extend(_block("system", b) for b in system)
    for index, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        where = f"message {index} {message.get('role')}"
        if isinstance(content, str):
            out.append(_block(where, {"type": "text", "text": content}))
        else:
            out.extend(_block(where, b) for b in content or [])
    return out


@dataclass
class PromptCache:
    """The cache one API key's requests share; `usage` bills a request as the API would."""

    min_tokens: int = MIN_CACHEABLE_TOKENS
    entries: set[bytes] = field(default_factory=set)

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        parts = blocks(body)
        marks = [i for i, b in enumerate(parts) if b.marked]
        if len(marks) > MAX_BREAKPOINTS:
            raise TooManyBreakpoints(
                f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {len(marks)}."
            )
        digest = hashlib.sha256(str(body.get("model")).encode())
        keys: list[bytes] = []
        totals: list[int] = []  # tokens of the prefix ending at each block
        running = 0
        for part in parts:
            digest.update(part.key)
            keys.append(digest.copy().digest())
            running += part.tokens
            totals.append(running)
        read_end = -1
        for mark in marks:
            for j in range(mark, max(mark - LOOKBACK_BLOCKS, -1), -1):
                if keys[j] in self.entries:
                    read_end = max(read_end, j)
                    break
        written_end = read_end
        for mark in marks:
            if mark > read_end and totals[mark] >= self.min_tokens:
                self.entries.add(keys[mark])
                written_end = max(written_end, mark)
        read = totals[read_end] if read_end >= 0 else 0
        created = (totals[written_end] if written_end >= 0 else 0) - read
        return {
            "input_tokens": running - read - created,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": created,
        }
