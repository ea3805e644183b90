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

from memoryd.daemon.registry import REGISTRY, MethodSpec
from memoryd.errors import MemorydError

if TYPE_CHECKING:
    from memoryd.daemon.app import Daemon

log = structlog.get_logger("memoryd.protocol")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

DEFAULT_LINE_LIMIT = 64 * 1024 * 1024
# Notifications queued for a client that is not reading, before its connection is closed.
NOTIFY_BUFFER_CAP = 16 * 1024 * 1024
MAX_BATCH = 100_000

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
    return {name: _adapter(daemon, spec) for name, spec in REGISTRY.items()}


def inline_methods() -> frozenset[str]:
    """Methods whose handlers never wait on I/O."""
    return frozenset(name for name, spec in REGISTRY.items() if spec.inline)


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
    try:
        return orjson.dumps(payload, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        # orjson refuses ints beyond 64 bits and non-str dict keys; the stdlib takes them.
        return (
            json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str).encode()
            + b"\n"
        )


class Connection:
    """One client connection: reads lines, runs each as a task, writes replies in order of completion."""

    def __init__(
        self,
        daemon: Daemon,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        methods: dict[str, Callable[..., Any]],
    ) -> None:
        self.daemon = daemon
        self.reader = reader
        self.writer = writer
        self.methods = methods
        self.inline = inline_methods()
        self.subscriptions: frozenset[str] | None = None  # None: not subscribed
        self.tasks: set[asyncio.Task[None]] = set()
        self.closed = False

    def wants(self, event: str) -> bool:
        subs = self.subscriptions
        return subs is not None and (not subs or event in subs)

    async def serve(self) -> None:
        token = current_connection.set(self)
        try:
            while not self.closed:
                try:
                    line = await self.reader.readuntil(b"\n")
                except asyncio.IncompleteReadError:
                    return  # EOF, possibly mid-line: nothing complete to answer
                except asyncio.LimitOverrunError:
                    limit = self.daemon.config.line_limit
                    await self.send(
                        error_object(INVALID_REQUEST, f"request line over the {limit}-byte cap")
                    )
                    return
                except (ConnectionError, OSError):
                    return
                if not line.strip():
                    continue
                message = parse_line(line)
                if isinstance(message, dict) and message.get("method") in self.inline:
                    await self._handle(message)
                    continue
                task = asyncio.create_task(self._handle(message))
                self.tasks.add(task)
                self.daemon.inflight.add(task)
                task.add_done_callback(self._forget)
        finally:
            current_connection.reset(token)
            # A client may send its requests and half-close: answer them before closing.
            if self.tasks:
                await asyncio.gather(*list(self.tasks), return_exceptions=True)
            await self.close()

    def _forget(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        self.daemon.inflight.discard(task)

    async def _handle(self, message: Any) -> None:
        reply = await dispatch_message(message, self.methods)
        if reply is not None:
            await self.send(reply)

    async def send(self, payload: Any) -> None:
        if self.closed:
            return
        data = _encode(payload)
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
