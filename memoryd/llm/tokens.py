"""Token estimates for Anthropic-format messages, without calling a tokenizer.

About four characters per token for text and JSON; images at a fixed cost. Estimates are
corrected by the real `usage` a client reports (see `corrected_total`).
"""

from __future__ import annotations

import json
from typing import Any

CHARS_PER_TOKEN = 4
IMAGE_TOKENS = 1_600
MESSAGE_OVERHEAD = 4


def estimate_text(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def estimate_block(block: Any) -> int:
    if isinstance(block, str):
        return estimate_text(block)
    if not isinstance(block, dict):
        return estimate_text(json.dumps(block, default=str))
    kind = block.get("type")
    if kind == "text":
        return estimate_text(str(block.get("text", "")))
    if kind in ("image", "document"):
        return IMAGE_TOKENS
    if kind == "tool_use":
        return estimate_text(str(block.get("name", ""))) + estimate_text(
            json.dumps(block.get("input", {}), default=str)
        )
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            return sum(estimate_block(b) for b in content) + MESSAGE_OVERHEAD
        return estimate_text(str(content or "")) + MESSAGE_OVERHEAD
    if kind in ("thinking", "redacted_thinking"):
        return estimate_text(str(block.get("thinking") or block.get("data") or ""))
    # Unknown block types are kept and counted by their serialised size.
    return estimate_text(json.dumps(block, default=str))


def estimate_message(message: dict[str, Any]) -> int:
    content = message.get("content")
    if isinstance(content, list):
        return MESSAGE_OVERHEAD + sum(estimate_block(b) for b in content)
    return MESSAGE_OVERHEAD + estimate_block(content if content is not None else "")


def estimate_messages(messages: list[dict[str, Any]]) -> int:
    return sum(estimate_message(m) for m in messages)
