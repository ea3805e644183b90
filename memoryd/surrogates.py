"""Lone surrogates in decoded JSON: half of a pair, which no UTF-8 encoder takes.

JSON may escape half of a surrogate pair (`"\\ud83d"`: a string cut inside an emoji, as agents'
transcripts hold, or a model's reply); Python decodes it into the string as it is, and the
first `encode("utf-8")` of that string fails. Each half becomes one U+FFFD here.
"""

from __future__ import annotations

import re
from typing import Any

# After json.loads a surrogate left in a str is a lone half: an escaped pair (`"\ud83d\ude00"`)
# is already one character.
_SURROGATE = re.compile("[\ud800-\udfff]")


def without_lone_surrogates(value: Any) -> Any:
    """`value` (JSON-shaped: str, list, dict, scalars) with each lone surrogate replaced."""
    if isinstance(value, str):
        # One U+FFFD per half (encoding with surrogatepass and decoding with "replace" gives
        # three, one per byte). ASCII text is skipped unscanned.
        return value if value.isascii() else _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [without_lone_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {without_lone_surrogates(k): without_lone_surrogates(v) for k, v in value.items()}
    return value
