"""The stdio wire of `memoryd-mcp`: each line the client sends is looked at before the MCP SDK
parses it, and a line the SDK would drop unanswered is answered here.

The SDK answers nothing for a message it cannot parse, so the client waited for ever on it:
- half a surrogate pair escaped (`"\\ud83d"` alone, a string cut inside an emoji by the client or
  the model) is valid JSON text, but the SDK's parser (pydantic) refuses the whole message: each
  such escape becomes `\\ufffd`, so the request is answered (its text with U+FFFD where the half
  was, as Python's own UTF-8 decoding does for bytes it cannot read);
- a line that is not JSON is answered with a JSON-RPC parse error (-32700), and a JSON-RPC batch
  (which MCP no longer has, since 2025-06-18) or a message that is not a valid JSON-RPC request,
  notification or response with invalid request (-32600): a batch with one error per request in
  it, a message with its `id` when it has one, `null` otherwise (JSON-RPC 2.0, section 5.1); a
  request whose `id` MCP does not allow (null, 1.5, true), which the SDK reads as a
  notification, is one of those. A response nothing can be said about, or a blank line, is
  dropped, as JSON-RPC wants.
Each verdict is the SDK's own (`is_message`, its JSON-RPC message type), so what it takes passes.

A request sent before the handshake (any but `ping`) gets the SDK's "Invalid request
parameters", which says nothing of why; until the SDK has answered an `initialize`, that answer
to such a request says the server is not initialized and to send `initialize` first.

Both ends are pipes: a thread reads the client's stdin and writes on what the SDK should see,
another carries the SDK's replies to the client's stdout a whole line at a time, so an error
written here never lands inside one of the SDK's replies.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

# A line longer than the daemon's cap is not read into memory: the daemon would refuse it, and
# a client that never ends its line would otherwise fill the memory.
from memoryd_client.client import MAX_LINE_BYTES

# An escaped backslash first (so `\\\\ud83d` stays the six characters it is), then a whole pair,
# then half of one.
_ESCAPES = re.compile(
    rb"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    rb"|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
)
_LONE_LENGTH = 6  # `\uXXXX`
_SDK_LINES = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
PARSE_ERROR, INVALID_REQUEST = -32700, -32600
# The SDK's answer to a request before `initialize` (its "pinned compat" shape), and ours.
_SDK_NOT_INITIALIZED = {"code": -32602, "message": "Invalid request parameters", "data": ""}
NOT_INITIALIZED = "Server not initialized: send initialize first and wait for its reply"
_EARLY_REQUESTS_KEPT = 1000  # methods remembered by id before the handshake (a bound)
# Written on the replies' pipe once the SDK is done: its JSON output never holds a NUL byte.
_END = b"\x00memoryd-mcp: end\n"


def repair_line(line: bytes) -> bytes:
    """`line` with each escape of half a surrogate pair replaced by `\\ufffd`."""
    if b"\\u" not in line:
        return line
    return _ESCAPES.sub(lambda m: b"\\ufffd" if len(m.group()) == _LONE_LENGTH else m.group(), line)


def error_reply(line: bytes, is_message: Callable[[bytes], bool]) -> bytes | None:
    """What to answer for `line` instead of handing it to the SDK: None to hand it on, else the
    error reply to write (empty: nothing to answer, and nothing to hand on)."""
    if not line.strip():
        return b""
    if is_message(line):
        return None
    try:
        message = json.loads(line.decode("utf-8", errors="replace"))
    except ValueError as exc:
        return _encode(_error(None, PARSE_ERROR, f"Parse error: {exc}"))
    except RecursionError:  # valid JSON nested deeper than Python reads: the SDK cannot either
        return _encode(_error(None, PARSE_ERROR, "Parse error: nested too deep"))
    if isinstance(message, list):
        if not message:
            return _encode(_error(None, INVALID_REQUEST, "Invalid Request: an empty batch"))
        why = "Invalid Request: batches are not supported; send each message on a line of its own"
        errors = [_error(_id(m), INVALID_REQUEST, why) for m in message if _wants_reply(m)]
        return _encode(errors) if errors else b""
    if not _wants_reply(message):
        return b""
    why = "Invalid Request: not a JSON-RPC 2.0 request, notification or response MCP accepts"
    return _encode(_error(_id(message), INVALID_REQUEST, why))


def _wants_reply(message: Any) -> bool:
    """False for a notification (no `id`) and for a response (no `method`): JSON-RPC answers
    neither. Anything else that is wrong is answered, with `id` null when it has none."""
    if not isinstance(message, dict):
        return True
    if "method" in message:
        return "id" in message or not isinstance(message["method"], str)
    return not ("result" in message or "error" in message)


def _id(message: Any) -> str | int | float | None:
    """The `id` to answer with: the message's string or number as written (1.5 too, which MCP
    refuses but the client waits on), else null."""
    value = message.get("id") if isinstance(message, dict) else None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _error(request_id: str | int | float | None, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _encode(reply: Any) -> bytes:
    return json.dumps(reply, separators=(",", ":")).encode() + b"\n"


class Handshake:
    """The requests handed to the SDK until it has answered an `initialize`, by id, so that its
    answer to one sent too early is reworded (`NOT_INITIALIZED`). After the handshake it
    reads nothing more."""

    def __init__(self) -> None:
        self.done = False
        self._lock = threading.Lock()  # requests and replies are two threads
        self._methods: dict[str, str] = {}

    def sent(self, line: bytes) -> None:
        """`line`, a message the SDK takes, is being handed on."""
        if self.done:
            return
        message = _json_object(line)
        method = message.get("method")
        if "id" in message and isinstance(method, str):
            with self._lock:
                if len(self._methods) >= _EARLY_REQUESTS_KEPT:
                    self._methods.pop(next(iter(self._methods)))
                self._methods[_key(message["id"])] = method

    def reply(self, line: bytes) -> bytes:
        """`line`, from the SDK, as the client should read it."""
        if self.done:
            return line
        message = _json_object(line)
        if "id" not in message:
            return line
        with self._lock:
            method = self._methods.pop(_key(message["id"]), None)
            if method == "initialize" and "result" in message:
                self.done = True
                self._methods.clear()
        if method in (None, "initialize", "ping") or message.get("error") != _SDK_NOT_INITIALIZED:
            return line
        message["error"] = {"code": _SDK_NOT_INITIALIZED["code"], "message": NOT_INITIALIZED}
        return _encode(message)


def _json_object(line: bytes) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return {}
    return message if isinstance(message, dict) else {}


def _key(request_id: Any) -> str:
    """An id as a key: 1 and "1" are two ids."""
    return json.dumps(request_id)


class StdioWire:
    """Pipes on fd 0 and fd 1 between the client and the SDK (see the module's docstring)."""

    def __init__(self, is_message: Callable[[bytes], bool]) -> None:
        self._is_message = is_message
        self._lock = threading.Lock()  # one writer of the client's stdout at a time
        self._done = threading.Event()
        self._handshake = Handshake()
        client_in, self._client_out = os.dup(0), os.dup(1)
        sdk_in, to_sdk = os.pipe()
        from_sdk, self._sdk_out = os.pipe()
        os.dup2(sdk_in, 0)
        os.dup2(self._sdk_out, 1)
        os.close(sdk_in)
        # The end of the client's stdin closes `to_sdk`, so the server still ends when the
        # client closes it.
        threading.Thread(target=self._requests, args=(client_in, to_sdk), daemon=True).start()
        threading.Thread(target=self._replies, args=(from_sdk,), daemon=True).start()

    def finish(self, timeout: float = 5.0) -> None:
        """Wait (at most `timeout`) until every reply the SDK wrote has reached the client."""
        # Not blocking: with a client that stopped reading, the pipe may be full for good.
        os.set_blocking(self._sdk_out, False)
        with contextlib.suppress(OSError):
            os.write(self._sdk_out, _END)
            self._done.wait(timeout)

    def _requests(self, source: int, sink: int) -> None:
        # BrokenPipeError: the server ended first.
        with (
            open(source, "rb") as lines,
            open(sink, "wb", buffering=0) as out,
            contextlib.suppress(BrokenPipeError),
        ):
            for line in read_lines(lines):
                if line is None:
                    why = f"Invalid Request: a message over {MAX_LINE_BYTES:,} bytes"
                    self._send(_encode(_error(None, INVALID_REQUEST, why)))
                    continue
                for part in sdk_lines(line):
                    part = repair_line(part)
                    try:
                        reply = error_reply(part, self._is_message)
                    except Exception as exc:
                        # A verdict that fails (an SDK unlike the one tested) must not end this
                        # thread, or every later request went unread: the SDK decides, as before.
                        os.write(2, f"memoryd-mcp: line passed on unchecked ({exc!r})\n".encode())
                        reply = None
                    if reply is None:
                        self._handshake.sent(part)
                        out.write(part)
                    elif reply:
                        self._send(reply)

    def _replies(self, source: int) -> None:
        with open(source, "rb") as replies:
            for line in replies:
                if line == _END:
                    break
                self._send(self._handshake.reply(line))
        self._done.set()

    def _send(self, data: bytes) -> None:
        with self._lock:
            try:
                while data:
                    data = data[os.write(self._client_out, data) :]
            except OSError:  # the client closed its stdout: what it would read is dropped
                pass


def sdk_lines(line: bytes) -> list[bytes]:
    """`line` cut where the SDK cuts it: it reads in universal newlines mode, so a lone `\r`
    ends a line too (a verdict on the whole would not be the SDK's on its parts)."""
    return _SDK_LINES.findall(line) if b"\r" in line else [line]


def read_lines(stream: BinaryIO, max_bytes: int = MAX_LINE_BYTES) -> Iterator[bytes | None]:
    """Each line of `stream`; None for a line over `max_bytes`, which is read past, never kept."""
    while line := stream.readline(max_bytes):
        if len(line) < max_bytes or line.endswith(b"\n"):
            yield line
            continue
        while (rest := stream.readline(max_bytes)) and not rest.endswith(b"\n"):
            pass
        yield None
