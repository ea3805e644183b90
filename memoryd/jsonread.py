"""The one way to read JSON text a file holds (settings, approvals, the daemon's state files):
json's own limits read as malformed JSON, not as errors of their own that got past callers.

- Nested deeper than the parser recurses, json raises RecursionError (not a ValueError): each
  reader needed its own `except RecursionError`, and one missed made every request fail.
- A whole number longer than Python converts (4,300 digits) raised a bare ValueError from
  int(), not a JSONDecodeError: a one-number hand edit dropped the whole file, or got past a
  reader catching JSONDecodeError. No file memoryd writes holds a number longer than
  MAX_INT_DIGITS; one that does is read as None (`long_ints="none"`: the reader drops that
  value as it drops any of the wrong type, the rest kept) or refuses the text (`"refuse"`:
  for a reader that writes the file back, which must not write null in its place). A file
  other programs write too (Claude Code's settings) keeps every number Python reads
  (`"keep"`), refusing only past that; or, to read it all the same (`"mark"`), has a longer one
  as a `LongInt`, for the reader to drop the one value holding it: refused, a 5,000-digit
  number in one key of Claude Code's settings had memoryd ignore every setting there."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any, Literal

# Of a whole number in the text, its sign included: 20 holds any 64-bit integer.
MAX_INT_DIGITS = 20


@dataclass(frozen=True)
class LongInt:
    """A whole number longer than Python converts, read with `long_ints="mark"`: its length
    in characters, its sign included."""

    length: int


class JSONLimitError(json.JSONDecodeError):
    """Text json cannot read within its limits: malformed JSON to every caller (a ValueError
    and a JSONDecodeError), said in words, without a position json does not give."""

    def __init__(self, msg: str, doc: str) -> None:
        super().__init__(msg, doc, 0)

    def __str__(self) -> str:
        return self.msg


def loads(text: str | bytes, *, long_ints: Literal["none", "refuse", "keep", "mark"]) -> Any:
    """`text` read as JSON; json.JSONDecodeError (a ValueError) for anything it cannot read,
    nesting past its depth included; bytes decoded as json.loads decodes them (UTF-8, -16 or
    -32; a UnicodeDecodeError, also a ValueError, for bytes that are none of them)."""
    if isinstance(text, bytes):
        doc = text.decode(json.detect_encoding(text), "surrogatepass")
    else:
        doc = text

    def whole_number(digits: str) -> int | LongInt | None:
        if len(digits) <= MAX_INT_DIGITS:
            return int(digits)
        if long_ints == "none":
            return None
        if long_ints in ("keep", "mark"):
            try:
                return int(digits)
            except ValueError:  # past sys.get_int_max_str_digits()
                if long_ints == "mark":
                    return LongInt(len(digits))
        limit = sys.get_int_max_str_digits() if long_ints != "refuse" else MAX_INT_DIGITS
        raise JSONLimitError(
            f"a whole number of {len(digits):,} characters, over the {limit:,} read", doc
        )

    try:
        return json.loads(doc, parse_int=whole_number)
    except RecursionError:
        raise JSONLimitError("nested too deeply", doc) from None
