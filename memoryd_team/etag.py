"""Entity-tag headers (RFC 9110 §8.8.3, §13.1.1–2), parsed without surprises (pure).

The server's tags are strong: `"<sha256 hex>"` over the whole repo state (see
`memoryd_team.storage.plan.etag_for`). If-Match uses the strong comparison, so a weak tag
(`W/"…"`) never matches; If-None-Match uses the weak one. A bare unquoted value — what a
careless client may send — is read as if it had been quoted.
"""

from __future__ import annotations

import re

from memoryd_team.storage.base import IfMatch

_TAG = re.compile(r'(W/)?("[^"]*")')
_OWS = " \t"


def parse_if_match(header: str | None) -> IfMatch | None:
    """None when the header is absent or blank; weak tags are dropped (they cannot match)."""
    parsed = _parse(header)
    if parsed is None:
        return None
    any_, tags = parsed
    return IfMatch(frozenset(tag for weak, tag in tags if not weak), any_)


def if_none_match_hits(header: str | None, current: str) -> bool:
    """True when the client's cached state is the current one (→ 304)."""
    parsed = _parse(header)
    if parsed is None:
        return False
    any_, tags = parsed
    return any_ or any(tag == current for _, tag in tags)


def _parse(header: str | None) -> tuple[bool, list[tuple[bool, str]]] | None:
    if header is None or not header.strip():
        return None
    value = header.strip()
    if value == "*":
        return True, []
    tags = _tag_list(value)
    if not tags:
        # Not a list of quoted tags: take the whole value as one opaque, unquoted tag.
        tags = [(False, f'"{value.strip(chr(34))}"')]
    return False, tags


def _tag_list(value: str) -> list[tuple[bool, str]] | None:
    """(weak, tag) per element of a `#entity-tag` list; None when an element is something
    else. Empty elements (`"a",, "b"`, a leading or trailing comma) are skipped: RFC 9110
    §5.6.1.2 says a recipient must accept them."""
    tags: list[tuple[bool, str]] = []
    position = 0
    while True:
        while position < len(value) and value[position] in _OWS + ",":
            position += 1
        if position == len(value):
            return tags
        match = _TAG.match(value, position)
        if match is None:
            return None
        tags.append((match.group(1) is not None, match.group(2)))
        position = match.end()
        while position < len(value) and value[position] in _OWS:
            position += 1
        if position < len(value) and value[position] != ",":
            return None  # `"a" "b"`, `"a"x`: not a list
