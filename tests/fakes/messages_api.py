"""A scripted fake of the Anthropic Messages API, served over real HTTP on loopback.

Tests point the real `anthropic` SDK (through the daemon's ModelClient, or directly) at
`base_url` and script what each request gets back:

    fake.enqueue(text_reply("hello"))
    fake.enqueue(tool_use_reply([("Write", {"file_path": "...", "content": "..."})]))
    fake.enqueue(error_reply(529, "overloaded_error", "Overloaded"))
    fake.enqueue(slow(2.0, text_reply("late")))
    fake.handler = lambda request: text_reply(...)   # used when the queue is empty

Every request is recorded (`fake.requests`) with its path, headers, raw body and parsed JSON,
so tests can assert on exactly what was sent (prompt-cache prefixes, max_tokens, tools).
A request with more than four `cache_control` marks is refused with HTTP 400, as the real API
refuses it.
The server runs in its own thread and event loop, so sync tests, async tests and daemons in
subprocesses can all use it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

_ids = itertools.count(1)


class _QuickServer(uvicorn.Server):
    """uvicorn's server, stopped at once. uvicorn polls `should_exit` every 0.1 s and its
    shutdown waits 0.1 s more for connections to finish their replies: ~0.2 s of every test's
    teardown, for a fake whose unfinished (scripted slow) replies are dropped anyway."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._wake: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None

    async def main_loop(self) -> None:
        wake = asyncio.Event()
        self._wake = (asyncio.get_running_loop(), wake)
        # A stop() that came before `_wake` was set left `should_exit` set, and no wake-up.
        if not self.should_exit:
            await wake.wait()

    def stop_now(self) -> None:
        self.should_exit = True
        self.force_exit = True
        if self._wake is not None:
            loop, wake = self._wake
            loop.call_soon_threadsafe(wake.set)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
            # uvicorn's shutdown leaves a connection mid-reply open (an endless reply whose
            # client's hang-up this loop had not seen yet): its transport outlived the loop,
            # a ResourceWarning "unclosed transport" at collection. Such replies are dropped.
            connection.transport.abort()
        # abort() calls connection_lost soon, which takes the connection out of the set; the
        # replies' tasks then see the hang-up and end, not cancelled with the loop.
        while self.server_state.connections:
            await asyncio.sleep(0)
        if self.server_state.tasks:
            await asyncio.wait(list(self.server_state.tasks), timeout=5)
        for server in self.servers:
            await server.wait_closed()


@dataclass(frozen=True)
class Reply:
    status: int
    body: dict[str, Any]
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    # The body sent `chunk` bytes every `gap_s` seconds, or (`endless`) a body without end.
    trickle: tuple[int, float] | None = None
    endless: bool = False
    # Held until the test sets it (after `delay_s`): a reply that waits for an event, not a
    # guess of how long the event takes.
    gate: threading.Event | None = None


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    json: Any
    received_at: float


def message(
    content: list[dict[str, Any]],
    *,
    stop_reason: str = "end_turn",
    model: str = "claude-fake",
    input_tokens: int = 100,
    output_tokens: int = 20,
    cache_read_input_tokens: int = 0,
    cache_creation_input_tokens: int = 0,
) -> Reply:
    return Reply(
        200,
        {
            "id": f"msg_fake_{next(_ids)}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "cache_read_input_tokens": cache_read_input_tokens,
                "cache_creation_input_tokens": cache_creation_input_tokens,
            },
        },
    )


def text_reply(text: str, **usage: int) -> Reply:
    return message([{"type": "text", "text": text}], **usage)


def json_reply(data: Any, **usage: int) -> Reply:
    """Structured output: the JSON document as the reply's only text block."""
    return text_reply(json.dumps(data), **usage)


def tool_use_reply(
    calls: list[tuple[str, dict[str, Any]]], text: str | None = None, **usage: int
) -> Reply:
    content: list[dict[str, Any]] = []
    if text:
        content.append({"type": "text", "text": text})
    for name, tool_input in calls:
        content.append(
            {
                "type": "tool_use",
                "id": f"toolu_fake_{next(_ids)}",
                "name": name,
                "input": tool_input,
            }
        )
    return message(content, stop_reason="tool_use", **usage)


def error_reply(status: int, error_type: str, text: str) -> Reply:
    return Reply(status, {"type": "error", "error": {"type": error_type, "message": text}})


def slow(delay_s: float, reply: Reply) -> Reply:
    return Reply(reply.status, reply.body, delay_s, reply.headers)


def gated(gate: threading.Event, reply: Reply) -> Reply:
    """`reply`, sent once `gate` is set."""
    return replace(reply, gate=gate)


def trickled(reply: Reply, chunk: int = 1, gap_s: float = 0.05) -> Reply:
    """`reply`, its body sent `chunk` bytes at a time with `gap_s` between."""
    return Reply(reply.status, reply.body, reply.delay_s, reply.headers, trickle=(chunk, gap_s))


def endless_reply() -> Reply:
    """A 200 whose JSON body never ends (until the client hangs up)."""
    return Reply(200, {}, endless=True)


# The Messages API refuses a request whose tool definitions, system blocks and message content
# blocks (a tool result's own blocks too) carry more than four `cache_control` marks.
MAX_CACHE_MARKS = 4


def _marked(blocks: Any) -> int:
    if not isinstance(blocks, list):
        return 0
    own = sum(1 for b in blocks if isinstance(b, dict) and "cache_control" in b)
    nested = sum(
        _marked(b.get("content"))
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "tool_result"
    )
    return own + nested


def cache_marks(body: Any) -> int:
    """The `cache_control` marks the API counts in a request, read from its structure (a key of
    that name inside a tool's input_schema or a call's input is data, not a mark)."""
    if not isinstance(body, dict):
        return 0
    messages = body.get("messages")
    contents = (
        [m.get("content") for m in messages if isinstance(m, dict)]
        if isinstance(messages, list)
        else []
    )
    return _marked(body.get("tools")) + _marked(body.get("system")) + sum(map(_marked, contents))


async def _body_chunks(reply: Reply) -> AsyncIterator[bytes]:
    if reply.endless:
        yield b'{"id": "msg_endless", "type": "message", "content": [{"type": "text", "text": "'
        block = b"x" * 65536
        while True:
            yield block
            await asyncio.sleep(0)
    assert reply.trickle is not None
    chunk, gap_s = reply.trickle
    data = json.dumps(reply.body).encode()
    for start in range(0, len(data), chunk):
        yield data[start : start + chunk]
        await asyncio.sleep(gap_s)


class FakeMessagesAPI:
    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.handler: Callable[[Any], Reply] | None = None
        self._queue: list[Reply] = []
        self._lock = threading.Lock()
        self._server: _QuickServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- scripting --------------------------------------------------------------------------
    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def message_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/v1/messages")]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _next_reply(self, body: Any) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.pop(0)
        if self.handler is not None:
            return self.handler(body)
        return error_reply(500, "api_error", "fake Messages API: no scripted reply left")

    # -- serving --------------------------------------------------------------------------
    async def _messages(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        self.requests.append(
            RecordedRequest(
                request.method,
                request.url.path,
                {k.lower(): v for k, v in request.headers.items()},
                raw,
                body,
                time.monotonic(),
            )
        )
        marks = cache_marks(body)
        if marks > MAX_CACHE_MARKS:
            # As the real API: refused before any scripted reply is used up.
            return Response(
                json.dumps(
                    error_reply(
                        400,
                        "invalid_request_error",
                        f"A maximum of {MAX_CACHE_MARKS} blocks with cache_control may be "
                        f"provided. Found {marks}.",
                    ).body
                ),
                status_code=400,
                media_type="application/json",
            )
        reply = self._next_reply(body)
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        while reply.gate is not None and not reply.gate.is_set():
            await asyncio.sleep(0.01)  # polled: a stop() cancels it, no thread is left waiting
        if reply.endless or reply.trickle is not None:
            return StreamingResponse(
                _body_chunks(reply), status_code=reply.status, media_type="application/json"
            )
        # Escaped to ASCII, as a real provider may send it: a reply can then carry a lone
        # surrogate ("\\ud800"), which the SDK decodes into the string as it is.
        return Response(
            json.dumps(reply.body),
            status_code=reply.status,
            headers=reply.headers,
            media_type="application/json",
        )

    def start(self) -> FakeMessagesAPI:
        app = Starlette(routes=[Route("/v1/messages", self._messages, methods=["POST"])])
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="error", lifespan="off", loop="asyncio")
        self._server = _QuickServer(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("fake Messages API did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop_now()  # scripted slow replies are not waited for
        if self._thread is not None:
            self._thread.join(timeout=10)
