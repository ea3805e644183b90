"""Reading what a model answered: the JSON object in a reply's text.

A reply asked for here is a few hundred tokens (`max_tokens` 256), but a broken or hostile
endpoint may send megabytes (up to the client's MAX_REPLY_BYTES) of anything: the reading
is linear in the text, and no nesting depth raises.
"""

from __future__ import annotations

import json
from typing import Any


def json_object(text: str) -> dict[str, Any] | None:
    """The outermost `{...}` of `text`, from its first `{` to its last `}`, as a dict (models
    wrap JSON in prose or fences); None when there is none or it does not parse. Found by
    `find`: the regex it was (`\\{.*\\}`) went back from the end for each `{` of a reply with
    no `}` after it (40,000 braces took 0.44 s, a 5 MB reply hours: recall's on the loop)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return None
    return _as_object(text[start : end + 1])


def _as_object(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # not JSON; nested deeper than Python recurses
        return None
    return data if isinstance(data, dict) else None
