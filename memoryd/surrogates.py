"""Lone surrogates in decoded JSON: half of a pair, which no UTF-8 encoder takes.

JSON may escape half of a surrogate pair (`"\\ud83d"`: a string cut inside an emoji, as agents'
transcripts hold, or a model's reply); Python decodes it into the string as it is, and the
first `encode("utf-8")` of that string fails. Each half becomes one U+FFFD here.
"""

from __future__ import annotations

import codecs
from typing import Any

# After json.loads a surrogate left in a str is a lone half: an escaped pair (`"\ud83d\ude00"`)
# is already one character; what UTF-8 cannot encode in a str is such a half.
_ONE_EACH = "memoryd.lone_surrogate"


def _one_each(exc: UnicodeError) -> tuple[bytes, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    # As bytes: the UTF-8 encoder takes a replacement str only when it is ASCII.
    return "\ufffd".encode() * (exc.end - exc.start), exc.end


codecs.register_error(_ONE_EACH, _one_each)


def without_lone_surrogates(value: Any) -> Any:
    """`value` (JSON-shaped: str, list, dict, scalars) with each lone surrogate replaced."""
    if isinstance(value, str):
        # One U+FFFD per half (encoding with surrogatepass and decoding with "replace" gives
        # three, one per byte). ASCII text is skipped unscanned; the rest is encoded, not
        # matched by a regex (50 MB: ~80 ms, against ~0.45 s on the event loop).
        if value.isascii():
            return value
        return value.encode("utf-8", _ONE_EACH).decode("utf-8")
    if isinstance(value, list):
        return [without_lone_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {without_lone_surrogates(k): without_lone_surrogates(v) for k, v in value.items()}
    return value
