"""How many bytes a string takes once written as a JSON string, without writing it.

Counted as memoryd writes JSON (orjson, or the stdlib with `ensure_ascii=False`): UTF-8,
`"` `\\` and `\\b \\t \\n \\f \\r` as two-byte escapes, other control characters as six-byte
`\\u00XX`, and a lone surrogate (a file name that is not UTF-8, as Python decodes it) as a
six-byte `\\udXXX`, the way `daemon.protocol.framing.encode_one` writes it.
"""

from __future__ import annotations

import re

_TWO_BYTE_ESCAPES = '"\\\x08\t\n\x0c\r'
_SIX_BYTE_ESCAPES = re.compile(r"[\x00-\x07\x0b\x0e-\x1f]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def json_string_bytes(text: str) -> int:
    """The bytes `text` takes as a JSON string, its two quotes aside."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        # surrogatepass writes each lone surrogate as 3 bytes; its escape takes 6.
        lone = len(_LONE_SURROGATE.findall(text))
        size = len(text.encode("utf-8", "surrogatepass")) + 3 * lone
    size += sum(text.count(ch) for ch in _TWO_BYTE_ESCAPES)
    if _SIX_BYTE_ESCAPES.search(text) is not None:
        size += 5 * len(_SIX_BYTE_ESCAPES.findall(text))
    return size
