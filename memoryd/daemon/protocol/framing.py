"""One JSON message per `\\n`-terminated line: parse it once, encode replies the same way, and
keep a reply line under the reply cap."""

from __future__ import annotations

import asyncio
import json
import math
import re
from typing import Any

import orjson

from memoryd.daemon.limits import PARSE_INLINE_BYTES
from memoryd.daemon.protocol.envelope import (
    PARSE_ERROR,
    TOO_LARGE,
    echoed,
    error_object,
    request_id,
)
from memoryd.surrogates import without_lone_surrogates


class ParseFailure:
    """A line that is not JSON, carrying the error reply it gets."""

    __slots__ = ("reply",)

    def __init__(self, reply: dict[str, Any]) -> None:
        self.reply = reply


class _ForStdlib:
    """A line orjson cannot read as sent, for the stdlib; orjson's error, if it refused it."""

    __slots__ = ("first_error",)

    def __init__(self, first_error: ValueError | None) -> None:
        self.first_error = first_error


def parse_line(line: bytes | bytearray) -> Any:
    """The message a line holds, or a ParseFailure."""
    message = _fast_parse(line)
    if isinstance(message, _ForStdlib):
        return _strict_stdlib_parse(line, message.first_error)
    return message


async def read_message(line: bytes | bytearray) -> Any:
    """`parse_line`, the stdlib's reading of a line over PARSE_INLINE_BYTES in a thread: a 50
    MiB one with half a surrogate pair held every client ~300 ms on the event loop."""
    message = _fast_parse(line)
    if not isinstance(message, _ForStdlib):
        return message
    if len(line) <= PARSE_INLINE_BYTES:
        return _strict_stdlib_parse(line, message.first_error)
    return await asyncio.to_thread(_strict_stdlib_parse, line, message.first_error)


def _fast_parse(line: bytes | bytearray) -> Any:
    """orjson's reading of a line; _ForStdlib when only the stdlib reads it right."""
    try:
        message = orjson.loads(line)
    except (UnicodeDecodeError, ValueError) as exc:
        if _NOT_UTF8 in str(exc):
            # The stdlib's decode says where (in a thread for a long line: decoding 60 MiB
            # again to say it took the event loop 110 ms).
            return _ForStdlib(None)
        # JSON's escape is `\u`, its hex digits either case (a copy of the line lowered,
        # 64 MiB of it, took ~50 ms on the event loop).
        if b"\\ud" not in line and b"\\uD" not in line:
            return ParseFailure(error_object(PARSE_ERROR, f"parse error: {exc}"))
        # JSON may escape half of a surrogate pair (`"\ud83d"`: a string cut inside an emoji,
        # as agents' transcripts hold); orjson refuses it. Read by the stdlib, that half
        # becomes U+FFFD.
        return _ForStdlib(exc)
    if _has_float_id(message):
        # orjson reads an integer beyond 64 bits as a float, and the reply must echo the id
        # exactly; the stdlib keeps integers whole.
        return _ForStdlib(None)
    return message


# What orjson says of bytes that are not UTF-8: "str is not valid UTF-8: surrogates not
# allowed", at line 1 column 1 wherever they are, which sent the client looking for a surrogate.
_NOT_UTF8 = "not valid UTF-8"


def _not_utf8(line: bytes | bytearray, exc: UnicodeDecodeError) -> str:
    """Where `line` stops being UTF-8, and why."""
    bad = bytes(line[exc.start : min(exc.end, exc.start + 4)])
    return f"the line is not UTF-8: byte {exc.start} ({bad.hex(' ')}): {exc.reason}"


def _strict_stdlib_parse(line: bytes | bytearray, first_error: ValueError | None) -> Any:
    """The stdlib's reading of a line, held to what orjson accepts: UTF-8 without a BOM, and
    no NaN or Infinity (which are not JSON, and would be written on into settings files)."""
    try:
        message = json.loads(line.decode(), parse_constant=_not_json, parse_float=_finite_float)
        cleaned = without_lone_surrogates(message)  # recursive: as deep as the line nests
    except UnicodeDecodeError as exc:
        return ParseFailure(error_object(PARSE_ERROR, f"parse error: {_not_utf8(line, exc)}"))
    except (ValueError, RecursionError) as exc:
        return ParseFailure(error_object(PARSE_ERROR, f"parse error: {first_error or exc}"))
    return _with_ids_kept(message, cleaned)


def _with_ids_kept(message: Any, cleaned: Any) -> Any:
    """`cleaned` with each request's id as sent: a reply echoes its id exactly (JSON-RPC 2.0),
    and `encode_one` escapes half a surrogate pair back as it came (`"\\ud83d"`)."""
    pairs = (
        zip(message, cleaned, strict=True) if isinstance(message, list) else [(message, cleaned)]
    )
    for sent, kept in pairs:
        if isinstance(sent, dict) and isinstance(kept, dict) and "id" in sent:
            kept["id"] = sent["id"]
    return cleaned


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} is out of range")
    return value


def _has_float_id(message: Any) -> bool:
    members = message if isinstance(message, list) else [message]
    return any(isinstance(m, dict) and isinstance(m.get("id"), float) for m in members)


def encode(payload: Any) -> bytes:
    return encode_one(payload) + b"\n"


def encode_one(payload: Any) -> bytes:
    try:
        return orjson.dumps(payload)
    except TypeError:
        # orjson refuses ints beyond 64 bits, non-str dict keys and lone surrogates (a file
        # name that is not UTF-8, as Python decodes it); the stdlib takes them. Only the
        # surrogates are escaped (`\udce9`), so the line is still UTF-8 JSON: escaping all
        # non-ASCII made 6 MB of emoji 18 MB, over the reply cap. Non-finite floats are null,
        # as orjson writes them (NaN is not JSON).
        text = json.dumps(_finite(payload), separators=(",", ":"), default=str, ensure_ascii=False)
        return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode()


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


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
    name = echoed(method) if isinstance(method, str) else "this request"
    return error_object(
        TOO_LARGE,
        f"reply to {name} is {size:,} bytes, over the {limit:,}-byte reply cap; "
        "ask for less (a smaller batch, fewer paths)",
        id_=reply.get("id") if isinstance(reply, dict) else None,
    )
