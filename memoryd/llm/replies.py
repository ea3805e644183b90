"""Reading what a model answered: the JSON object in a reply's text."""

from __future__ import annotations

import json
import re
from typing import Any

_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def json_object(text: str) -> dict[str, Any] | None:
    """The outermost `{...}` of `text` as a dict (models wrap JSON in prose or fences); None
    when there is none or it does not parse."""
    match = _OBJECT.search(text)
    if match is None:
        return None
    try:
        data = json.loads(match.group(0))
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None
