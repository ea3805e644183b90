"""NDJSON JSON-RPC 2.0 over a stream: framing, request checks, dispatch, error mapping.

One message (request, notification or batch) per `\\n`-terminated line. Each line is handled
in its own task, so a slow method never holds up another on the same connection; replies
may therefore come out of order and are matched by `id`. Dispatch goes through
`jsonrpcserver`; params are validated by the method's pydantic model, and domain errors
(memoryd.errors) become JSON-RPC errors here and nowhere else.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
import structlog
from jsonrpcserver import Success
from jsonrpcserver.async_dispatcher import dispatch_request
from jsonrpcserver.dispatcher import create_request, to_response
from jsonrpcserver.exceptions import JsonRpcError
from jsonrpcserver.response import to_serializable_one
from jsonrpcserver.sentinels import NOCONTEXT, NOID
from pydantic import BaseModel, ValidationError

from memoryd.daemon.limits import LINGER_S, MAX_BATCH, NOTIFY_BUFFER_CAP, READ_CHUNK
from memoryd.daemon.rpc import MethodSpec
from memoryd.errors import MemorydError

if TYPE_CHECKING:
    from memoryd.daemon.app import Daemon

log = structlog.get_logger("memoryd.protocol")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

TOO_LARGE = -32004

# The connection a request arrived on, for methods that act on it (`subscribe`).
current_connection: contextvars.ContextVar[Connection | None] = contextvars.ContextVar(
    "current_connection", default=None
)


def error_object(code: int, message: str, data: Any = None, id_: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "error": error, "id": id_}


def format_validation_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "params"
        parts.append(f"{loc}: {err['msg']}")
    return "invalid params: " + "; ".join(parts)


def check_request(obj: Any) -> str | None:
    """Why `obj` is not a JSON-RPC 2.0 request, or None when it is one."""
    if not isinstance(obj, dict):
        return f"a request must be a JSON object, got {type(obj).__name__}"
    if obj.get("jsonrpc") != "2.0":
        return 'jsonrpc: must be exactly "2.0"'
    method = obj.get("method")
    if not isinstance(method, str):
        return "method: must be a string"
    if "params" in obj and not isinstance(obj["params"], dict | list):
        return "params: must be an object or an array"
    if "id" in obj:
        id_ = obj["id"]
        if not (id_ is None or isinstance(id_, str) or type(id_) in (int, float)):
            return "id: must be a string, a number or null"
    extra = set(obj) - {"jsonrpc", "method", "params", "id"}
    if extra:
        return f"unexpected member(s): {', '.join(sorted(extra))}"
    return None


def _request_id(obj: Any) -> Any:
    if isinstance(obj, dict):
        id_ = obj.get("id")
        if id_ is None or isinstance(id_, str) or type(id_) in (int, float):
            return id_
    return None


def _to_json(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


def build_methods(daemon: Daemon) -> dict[str, Callable[..., Any]]:
    """The jsonrpcserver method table: one adapter per registered method."""
    return {name: _adapter(daemon, spec) for name, spec in daemon.methods.items()}


def inline_methods(daemon: Daemon) -> frozenset[str]:
    """Methods whose handlers never wait on I/O."""
    return frozenset(name for name, spec in daemon.methods.items() if spec.inline)


def _adapter(daemon: Daemon, spec: MethodSpec) -> Callable[..., Any]:
    async def call(*args: Any, **kwargs: Any) -> Any:
        if args:
            raise JsonRpcError(
                INVALID_PARAMS, "invalid params: params must be an object of named fields"
            )
        try:
            params = spec.params.model_validate(kwargs)
        except ValidationError as exc:
            raise JsonRpcError(INVALID_PARAMS, format_validation_error(exc)) from None
        except Exception:
            # A validator that failed in a way it did not mean to: still the client's params.
            log.exception("params check failed", method=spec.name)
            raise JsonRpcError(
                INVALID_PARAMS, f"invalid params: {spec.name} could not check them"
            ) from None
        try:
            result = await spec.handler(daemon, params)
        except MemorydError as exc:
            if exc.code == INTERNAL_ERROR:
                raise _internal(spec.name, exc) from None
            raise JsonRpcError(exc.code, exc.message, exc.data) from None
        except JsonRpcError:
            raise
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise _internal(spec.name, exc) from None
        return Success(_to_json(result))

    # jsonrpcserver checks arguments with inspect.signature on every call; a precomputed
    # signature turns that from the largest cost of a small request into a lookup.
    call.__signature__ = inspect.signature(call)  # type: ignore[attr-defined]
    return call


def _internal(method: str, exc: BaseException) -> JsonRpcError:
    """-32603 names the method and the kind of failure; the details (an errno text, a path,
    the traceback) go to the log only (docs/protocol.md)."""
    log.error("method failed", method=method, exc_info=exc)
    return JsonRpcError(
        INTERNAL_ERROR,
        f"internal error in {method}: {type(exc).__name__} (details are in the daemon's log)",
    )


class ParseFailure:
    """A line that is not JSON, carrying the error reply it gets."""

    __slots__ = ("reply",)

    def __init__(self, reply: dict[str, Any]) -> None:
        self.reply = reply


def parse_line(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except (UnicodeDecodeError, ValueError) as exc:
        return ParseFailure(error_object(PARSE_ERROR, f"parse error: {exc}"))


async def dispatch_line(
    line: bytes, methods: dict[str, Callable[..., Any]]
) -> dict[str, Any] | list[dict[str, Any]] | None:
    """One line in, the reply (or None for notifications) out."""
    return await dispatch_message(parse_line(line), methods)


async def dispatch_message(
    message: Any, methods: dict[str, Callable[..., Any]]
) -> dict[str, Any] | list[dict[str, Any]] | None:
    if isinstance(message, ParseFailure):
        return message.reply
    if isinstance(message, list):
        if not message:
            return error_object(INVALID_REQUEST, "invalid request: empty batch")
        if len(message) > MAX_BATCH:
            return error_object(
                INVALID_REQUEST, f"invalid request: batch of {len(message)} over {MAX_BATCH}"
            )
        replies = await asyncio.gather(*(_dispatch_one(m, methods) for m in message))
        batch = [r for r in replies if r is not None]
        return batch or None
    single: dict[str, Any] | None = await _dispatch_one(message, methods)
    return single


async def _dispatch_one(message: Any, methods: dict[str, Callable[..., Any]]) -> Any:
    problem = check_request(message)
    if problem is not None:
        return error_object(
            INVALID_REQUEST, f"invalid request: {problem}", id_=_request_id(message)
        )
    # jsonrpcserver's own per-request pipeline (method lookup, argument check, call, error
    # conversion), entered below its string/batch layer: we parse once, check the envelope
    # ourselves with field-naming messages, and batch with our own gather.
    request, result = await dispatch_request(methods, NOCONTEXT, create_request(message))
    if request.id is NOID:
        return None
    reply = to_serializable_one(to_response(request, result))
    if isinstance(reply, dict) and "error" in reply:
        error = reply["error"]
        if error["code"] == METHOD_NOT_FOUND:
            error["message"] = f"method not found: {message['method']}"
        elif error["code"] == INTERNAL_ERROR and "data" in error:
            # jsonrpcserver's own catch-all puts str(exception) in `data`: log it instead.
            log.error("internal error", method=message["method"], detail=error.pop("data"))
    return reply


def _encode(payload: Any) -> bytes:
    return _encode_one(payload) + b"\n"


def _encode_one(payload: Any) -> bytes:
    try:
        return orjson.dumps(payload)
    except TypeError:
        # orjson refuses ints beyond 64 bits and non-str dict keys; the stdlib takes them.
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str).encode()


def encode_reply(reply: Any, message: Any, limit: int) -> tuple[bytes, int]:
    """The reply line, and how many replies (or batch members) were over `limit` bytes and
    replaced by -32004 naming the method and the cap. A batch keeps every member's id: the
    members that fit are answered, the others get the error."""
    if not isinstance(reply, list):
        data = _encode_one(reply)
        if len(data) + 1 <= limit:
            return data + b"\n", 0
        method = message.get("method") if isinstance(message, dict) else None
        return _encode(_too_large(reply, method, len(data), limit)), 1
    methods: dict[Any, Any] = {}
    if isinstance(message, list):
        methods = {_request_id(m): m.get("method") for m in message if isinstance(m, dict)}
    parts: list[bytes] = []
    used = 2  # "[" and "]\n"
    over = 0
    for member in reply:
        data = _encode_one(member)
        if used + len(data) + 1 > limit:
            over += 1
            id_ = member.get("id") if isinstance(member, dict) else None
            data = _encode_one(_too_large(member, methods.get(id_), len(data), limit))
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


def _line_over(limit: int) -> dict[str, Any]:
    return error_object(INVALID_REQUEST, f"request line over the {limit}-byte cap")


class InputBudget:
    """Bytes of unfinished request lines held for all connections together, capped."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.used = 0

    def take(self, size: int) -> bool:
        if self.used + size > self.cap:
            return False
        self.used += size
        return True

    def give_back(self, size: int) -> None:
        self.used = max(0, self.used - size)


class Connection:
    """One client connection: reads lines, runs each as a task, writes replies in order of completion."""

    def __init__(
        self,
        daemon: Daemon,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        methods: dict[str, Callable[..., Any]],
        input_budget: InputBudget | None = None,
    ) -> None:
        self.daemon = daemon
        self.input_budget = input_budget or InputBudget(daemon.config.input_buffer_cap)
        self._held = 0  # bytes of an unfinished line charged to `input_budget`
        self.reader = reader
        self.writer = writer
        self.methods = methods
        self.inline = inline_methods(daemon)
        self.subscriptions: frozenset[str] | None = None  # None: not subscribed
        self.tasks: set[asyncio.Task[None]] = set()
        self.closed = False

    def wants(self, event: str) -> bool:
        subs = self.subscriptions
        return subs is not None and (not subs or event in subs)

    async def serve(self) -> None:
        token = current_connection.set(self)
        try:
            await self._read_lines()
        finally:
            self.input_budget.give_back(self._held)
            self._held = 0
            current_connection.reset(token)
            # A client may send its requests and half-close: answer them before closing.
            if self.tasks:
                await asyncio.gather(*list(self.tasks), return_exceptions=True)
            await self.close()

    async def _read_lines(self) -> None:
        """Split the input into lines and start each; an unfinished line is held (charged to
        the shared budget) until its newline comes. Returns on EOF or a refusal."""
        limit = self.daemon.config.line_limit
        partial = bytearray()
        while not self.closed:
            try:
                chunk = await self.reader.read(READ_CHUNK)
            except (ConnectionError, OSError):
                return
            if not chunk:
                return  # EOF, possibly mid-line: nothing complete to answer
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                if partial:
                    line = bytes(partial) + chunk[start : end + 1]
                    partial.clear()
                    self.input_budget.give_back(self._held)
                    self._held = 0
                else:
                    line = chunk[start : end + 1]
                start = end + 1
                if len(line) - 1 > limit:
                    await self._refuse(_line_over(limit))
                    return
                if line.strip():
                    await self._start(parse_line(line))
            rest = len(chunk) - start
            if not rest:
                continue
            if len(partial) + rest > limit:
                await self._refuse(_line_over(limit))
                return
            if not self.input_budget.take(rest):
                cap = self.input_budget.cap
                log.warning("closing a connection over the input buffer cap", cap=cap)
                self.daemon.counters["input_cap_closed"] += 1
                await self._refuse(
                    error_object(
                        INVALID_REQUEST,
                        f"input refused: unfinished request lines buffered across connections "
                        f"would go over the {cap}-byte cap; finish each line with a newline "
                        "(this connection is closed)",
                    )
                )
                return
            self._held += rest
            partial += chunk[start:]

    async def _refuse(self, error: dict[str, Any]) -> None:
        """Answer, then read and drop what the client is still sending (for at most
        LINGER_S) before the connection closes: closing with unread input resets the
        connection, and the client would never see the answer."""
        await self.send(error)
        with contextlib.suppress(ConnectionError, OSError, RuntimeError, TimeoutError):
            if self.writer.can_write_eof():
                self.writer.write_eof()
            async with asyncio.timeout(LINGER_S):
                while await self.reader.read(READ_CHUNK):
                    pass

    async def _start(self, message: Any) -> None:
        if isinstance(message, dict) and message.get("method") in self.inline:
            await self._handle(message)
            return
        task = asyncio.create_task(self._handle(message))
        self.tasks.add(task)
        self.daemon.inflight.add(task)
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        self.daemon.inflight.discard(task)

    async def _handle(self, message: Any) -> None:
        reply = await dispatch_message(message, self.methods)
        if reply is None:
            return
        data, over = encode_reply(reply, message, self.daemon.config.reply_limit)
        if over:
            log.warning("reply over the cap", replies=over, cap=self.daemon.config.reply_limit)
            self.daemon.counters["reply_over_cap"] += over
        await self._write(data)

    async def send(self, payload: Any) -> None:
        await self._write(_encode(payload))

    async def _write(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            self.writer.write(data)
            if self.writer.transport.get_write_buffer_size() > 1 << 20:
                await self.writer.drain()
        except (ConnectionError, RuntimeError, OSError):
            self.closed = True

    def stop_reading(self) -> None:
        """End the read loop as if the client had hung up; replies in flight still go out."""
        self.reader.feed_eof()

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """Never waits on the client: one subscriber that stops reading must not hold up
        notifications to the others (or the worker that sent them). Past the cap its
        connection is closed."""
        if self.closed:
            return
        try:
            self.writer.write(_encode({"jsonrpc": "2.0", "method": method, "params": params}))
        except (ConnectionError, RuntimeError, OSError):
            self.closed = True
            return
        if self.writer.transport.get_write_buffer_size() > NOTIFY_BUFFER_CAP:
            log.warning("closing a subscriber that stopped reading", buffered=NOTIFY_BUFFER_CAP)
            self.daemon.counters["slow_subscriber_closed"] += 1
            # Abort, not close: a graceful close would wait for the client to read it all.
            self.closed = True
            self.daemon.connections.discard(self)
            self.writer.transport.abort()

    async def close(self) -> None:
        if self.closed and self.writer.is_closing():
            return
        self.closed = True
        self.daemon.connections.discard(self)
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()
