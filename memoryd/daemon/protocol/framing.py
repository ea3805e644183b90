"""One JSON message per `\\n`-terminated line: parse it once, encode replies the same way, and
keep a reply line under the reply cap."""

from __future__ import annotations

import json
from typing import Any

import orjson

from memoryd.daemon.protocol.envelope import PARSE_ERROR, TOO_LARGE, error_object, request_id
from memoryd.surrogates import without_lone_surrogates


class ParseFailure:
    """A line that is not JSON, carrying the error reply it gets."""

    __slots__ = ("reply",)

    def __init__(self, reply: dict[str, Any]) -> None:
        self.reply = reply


def parse_line(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except (UnicodeDecodeError, ValueError) as exc:
        if b"\\ud" not in line.lower():
            return ParseFailure(error_object(PARSE_ERROR, f"parse error: {exc}"))
        error = exc
    # JSON may escape half of a surrogate pair (`"\ud83d"`: a string cut inside an emoji, as
    # agents' transcripts hold); orjson refuses it. Read by the stdlib, that half becomes U+FFFD.
    try:
        return without_lone_surrogates(json.loads(line))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return ParseFailure(error_object(PARSE_ERROR, f"parse error: {error}"))


def encode(payload: Any) -> bytes:
    return encode_one(payload) + b"\n"


def encode_one(payload: Any) -> bytes:
    try:
        return orjson.dumps(payload)
    except TypeError:
        # orjson refuses ints beyond 64 bits, non-str dict keys and lone surrogates (a file
        # name that is not UTF-8, as Python decodes it); the stdlib takes them, and escapes
        # the surrogates (`\udce9`) so the line is still UTF-8 JSON.
        return json.dumps(payload, separators=(",", ":"), default=str).encode()


def encode_reply(reply: Any, message: Any, limit: int) -> tuple[bytes, int]:
    """The reply line, and how many replies (or batch members) were over `limit` bytes and
    replaced by -32004 naming the method and the cap. A batch keeps every member's id: the
    members that fit are answered, the others get the error."""
    if not isinstance(reply, list):
        data = encode_one(reply)
        if len(data) + 1 <= limit:
            return data + b"\n", 0
        method = message.get("method") if isinstance(message, dict) else None
        return encode(_too_large(reply, method, len(data), limit)), 1
    methods: dict[Any, Any] = {}
    if isinstance(message, list):
        methods = {request_id(m): m.get("method") for m in message if isinstance(m, dict)}
    parts: list[bytes] = []
    used = 2  # "[" and "]\n"
    over = 0
    for member in reply:
        data = encode_one(member)
        if used + len(data) + 1 > limit:
            over += 1
            id_ = member.get("id") if isinstance(member, dict) else None
            data = encode_one(_too_large(member, methods.get(id_), len(data), limit))
        parts.append(data)
        used += len(data) + 1
    return b"[" + b",".join(parts) + b"]\n", over


def _too_large(reply: Any, method: Any, size: int, limit: int) -> dict[str, Any]:
    name = method if isinstance(method, str) else "this request"
    return error_object(
        TOO_LARGE,
        f"reply to {name} is {size:,} bytes, over the {limit:,}-byte reply cap; "
        "ask for less (a smaller batch, fewer paths)",
        id_=reply.get("id") if isinstance(reply, dict) else None,
    )
