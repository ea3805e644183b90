"""Token estimates for Anthropic-format messages, without calling a tokenizer.

Counting rules, per content block:
- text, thinking: ASCII at ~4 characters per token; other characters (CJK, emoji, accented
  letters) at ~1 token each, since BPE vocabularies split them far finer than English;
- tool_use: the tool name plus its JSON input; tool_result: its content (text or nested
  blocks) plus a small framing cost;
- image: width x height / 750 after the API's downscaling, read from the PNG, GIF or JPEG
  header of base64 data; the API's cap (1,600) when the size is unknown (URLs, other formats);
- document: its text when it has one, else a fixed cost per ~page of data;
- any other block type is kept and counted by its serialised size.

Estimates drift from the real tokenizer, so `TokenCounter` corrects them with the real
`usage` a client reports: the offset between the provider's count at the last response and
our estimate of the same prefix is remembered and added to later estimates. `TokenCounter`
also caches per-message estimates, so on the next call only new or changed messages are
estimated again.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

CHARS_PER_TOKEN = 4
IMAGE_TOKENS = 1_600
# A base64 PDF page is ~50-100 KB; we charge one image-sized cost per 75 KB of data.
DOCUMENT_BYTES_PER_PAGE = 75_000
MESSAGE_OVERHEAD = 4
BLOCK_OVERHEAD = 2


def estimate_text(text: str) -> int:
    if text.isascii():
        return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN
    ascii_chars = len(text.encode("ascii", "ignore"))
    other = len(text) - ascii_chars
    return (ascii_chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN + other


# One encoder for every call: json.dumps with options builds a new encoder each time.
_ENCODER = json.JSONEncoder(default=str, ensure_ascii=False, separators=(",", ":"))


def _estimate_json(value: Any) -> int:
    return estimate_text(_ENCODER.encode(value))


# The API scales an image down until its long edge is at most 1,568 px and it costs at most
# ~1,600 tokens (width * height / 750).
IMAGE_MAX_EDGE = 1_568
PIXELS_PER_TOKEN = 750
_IMAGE_HEAD_B64 = 87_384  # base64 characters for the first 64 KiB: enough for JPEG headers


def image_size(head: bytes) -> tuple[int, int] | None:
    """(width, height) from the first bytes of a PNG, GIF or JPEG file, else None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n") and len(head) >= 24:
        width, height = struct.unpack(">II", head[16:24])
        return width, height
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        width, height = struct.unpack("<HH", head[6:10])
        return width, height
    if head.startswith(b"\xff\xd8"):
        index = 2
        while index + 9 < len(head):
            if head[index] != 0xFF:
                return None
            marker = head[index + 1]
            length = int.from_bytes(head[index + 2 : index + 4], "big")
            # Start-of-frame markers carry the size; C4/C8/CC are not frames.
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                height, width = struct.unpack(">HH", head[index + 5 : index + 9])
                return width, height
            index += 2 + length
    return None


def image_tokens(width: int, height: int) -> int:
    if width <= 0 or height <= 0:
        return IMAGE_TOKENS
    scale = min(1.0, IMAGE_MAX_EDGE / max(width, height))
    pixels = (width * scale) * (height * scale)
    return max(1, min(IMAGE_TOKENS, math.ceil(pixels / PIXELS_PER_TOKEN)))


def _estimate_image(block: Mapping[str, Any]) -> int:
    source = block.get("source")
    data = source.get("data") if isinstance(source, Mapping) else None
    if not isinstance(data, str):
        return IMAGE_TOKENS
    head_b64 = data[:_IMAGE_HEAD_B64]
    try:
        head = base64.b64decode(head_b64[: len(head_b64) // 4 * 4], validate=False)
    except (binascii.Error, ValueError):
        return IMAGE_TOKENS
    size = image_size(head)
    return IMAGE_TOKENS if size is None else image_tokens(*size)


def _estimate_document(block: Mapping[str, Any]) -> int:
    source = block.get("source")
    if isinstance(source, Mapping):
        if source.get("type") == "text" and isinstance(source.get("data"), str):
            return estimate_text(source["data"])
        if source.get("type") == "content" and isinstance(source.get("content"), list):
            return sum(estimate_block(b) for b in source["content"])
        data = source.get("data")
        if isinstance(data, str):
            pages = max(1, len(data) * 3 // 4 // DOCUMENT_BYTES_PER_PAGE)
            return pages * IMAGE_TOKENS
    return IMAGE_TOKENS


def estimate_block(block: Any) -> int:
    if isinstance(block, str):
        return estimate_text(block)
    if not isinstance(block, Mapping):
        return _estimate_json(block)
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        return BLOCK_OVERHEAD + (estimate_text(text) if isinstance(text, str) else 0)
    if kind == "image":
        return _estimate_image(block)
    if kind == "document":
        return _estimate_document(block)
    if kind == "tool_use":
        name = block.get("name")
        return (
            BLOCK_OVERHEAD
            + (estimate_text(name) if isinstance(name, str) else 0)
            + _estimate_json(block.get("input", {}))
        )
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            return MESSAGE_OVERHEAD + sum(estimate_block(b) for b in content)
        if isinstance(content, str):
            return MESSAGE_OVERHEAD + estimate_text(content)
        return MESSAGE_OVERHEAD + (0 if content is None else _estimate_json(content))
    if kind == "thinking":
        thinking = block.get("thinking")
        return BLOCK_OVERHEAD + (estimate_text(thinking) if isinstance(thinking, str) else 0)
    if kind == "redacted_thinking":
        data = block.get("data")
        return BLOCK_OVERHEAD + (estimate_text(data) if isinstance(data, str) else 0)
    # Unknown block types (server tools, citations, future kinds) are kept and counted by size.
    return _estimate_json(block)


def estimate_message(message: Mapping[str, Any]) -> int:
    content = message.get("content")
    if isinstance(content, list):
        return MESSAGE_OVERHEAD + sum(estimate_block(b) for b in content)
    if content is None:
        return MESSAGE_OVERHEAD
    return MESSAGE_OVERHEAD + estimate_block(content)


def estimate_messages(messages: Sequence[Mapping[str, Any]]) -> int:
    return sum(estimate_message(m) for m in messages)


# -- usage ---------------------------------------------------------------------------------
# The token counts of a Messages API `usage`, `input_tokens` first.
USAGE_FIELDS = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
)


def _count(usage: Mapping[str, Any], name: str) -> int | None:
    value = usage.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def usage_total(usage: Mapping[str, Any] | None) -> int | None:
    """The context size a response's `usage` reports (prompt + cache + output), or None.

    None when `usage` is absent or carries no valid `input_tokens` — an unusable report.
    """
    if not usage:
        return None
    prompt = _count(usage, "input_tokens")
    if prompt is None:
        return None
    total = prompt + sum(_count(usage, name) or 0 for name in USAGE_FIELDS[1:])
    return total if total > 0 else None


def last_assistant_index(messages: Sequence[Mapping[str, Any]]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "assistant":
            return index
    return None


# -- incremental counting ------------------------------------------------------------------
def fingerprint(message: Mapping[str, Any]) -> tuple[Any, ...]:
    """A cheap identity for a message: role plus each block's kind and size (or tool id).

    Touches no text (len() is O(1)), so checking a long transcript against the cache costs
    far less than estimating it. A block edited in place to the same length is not noticed;
    the usage correction absorbs that rare drift.
    """
    content = message.get("content")
    role = message.get("role")
    if isinstance(content, str):
        return (role, len(content))
    if not isinstance(content, list):
        return (role, type(content).__name__)
    parts: list[Any] = [role]
    for block in content:
        if not isinstance(block, Mapping):
            parts.append(type(block).__name__)
            continue
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            parts.append(len(text) if isinstance(text, str) else -1)
        elif kind == "tool_use":
            tool_input = block.get("input")
            size = len(tool_input) if isinstance(tool_input, Mapping | list | str) else -1
            parts.append(("u", block.get("id"), size))
        elif kind == "tool_result":
            inner = block.get("content")
            size = len(inner) if isinstance(inner, str | list) else -1
            parts.append(("r", block.get("tool_use_id"), size))
        else:
            parts.append((kind, len(block)))
    return tuple(parts)


@dataclass
class TokenCounter:
    """Per-session token counting: cached per-message estimates and the usage correction.

    `offset` is (provider's count) - (our estimate) at the last response that reported usage;
    it absorbs the system prompt and tool definitions (which the transcript does not carry)
    and the estimator's error, so thresholds follow the real size.
    """

    offset: int = 0
    _fingerprints: list[tuple[Any, ...]] = field(default_factory=list)
    _tokens: list[int] = field(default_factory=list)

    def per_message(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Estimates for each message, reusing cached ones whose fingerprint is unchanged."""
        fingerprints = self._fingerprints
        tokens = self._tokens
        cached = len(fingerprints)
        new_fps: list[tuple[Any, ...]] = []
        new_tokens: list[int] = []
        for index, message in enumerate(messages):
            fp = fingerprint(message)
            if index < cached and fingerprints[index] == fp:
                new_tokens.append(tokens[index])
            else:
                new_tokens.append(estimate_message(message))
            new_fps.append(fp)
        self._fingerprints = new_fps
        self._tokens = new_tokens
        return new_tokens

    def count(
        self, messages: Sequence[Mapping[str, Any]], usage: Mapping[str, Any] | None = None
    ) -> tuple[int, list[int]]:
        """The corrected conversation size, and the per-message estimates."""
        per = self.per_message(messages)
        estimate = sum(per)
        real = usage_total(usage)
        if real is not None:
            last = last_assistant_index(messages)
            prefix = estimate if last is None else sum(per[: last + 1])
            self.offset = real - prefix
        return max(0, estimate + self.offset), per

    def corrected(self, estimate: int) -> int:
        return max(0, estimate + self.offset)
