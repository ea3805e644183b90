"""Text cut to what a host takes into the model's context, measured in UTF-8 bytes.

Stdlib only: `memoryd-mcp`'s results (`mcp_tools`) and memctl's UserPromptSubmit hook
(`memctl.claude_code`) both share a budget among recalled memories with it. Bytes, not
characters: Japanese or Chinese text takes about a token a character, so a budget counted in
characters let such a result run to three times the tokens of an English one.
"""

from __future__ import annotations


def utf8_size(text: str) -> int:
    """`text`'s UTF-8 bytes (a lone surrogate, which JSON may carry, as three)."""
    return len(text.encode("utf-8", "surrogatepass"))


def shares(sizes: list[int], budget: int) -> list[int]:
    """Each text's share of `budget`, by its size: what a short one leaves goes to the longer
    ones, so a short one is whole."""
    given = [0] * len(sizes)
    left = budget
    by_size = sorted(range(len(sizes)), key=lambda i: sizes[i])
    for done, i in enumerate(by_size):
        given[i] = min(sizes[i], left // (len(sizes) - done))
        left -= given[i]
    return given


def cut(text: str, limit: int) -> str:
    """`text` cut to at most `limit` bytes of UTF-8, never inside a character, after a line
    where one ends in the last half."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    end = limit
    while end > 0 and data[end] & 0xC0 == 0x80:  # a continuation byte: inside a character
        end -= 1
    head = data[:end].decode("utf-8", "surrogatepass")
    newline = head.rfind("\n", len(head) // 2)
    return head[: newline + 1] if newline >= 0 else head
