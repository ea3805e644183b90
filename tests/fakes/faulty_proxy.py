"""A fault-injecting HTTP/1.1 proxy on loopback, in front of a real team server.

It works at the socket level (asyncio streams, its own loop in a thread), so it can do what
an ASGI app cannot: reset a connection, stall past the client's timeout, trickle a body.

    proxy = FaultyProxy(upstream_url).start()
    proxy.script(Fault.status(500), method="PUT", times=2)   # the next 2 PUTs get a 500
    proxy.script(Fault.reset())                              # the next request: RST
    proxy.script(Fault.gateway_413())                        # an HTML 413 from "nginx"
    proxy.script(Fault.status(412), method="PUT", times=10)  # a 412 storm
    proxy.script(Fault.slow_body(chunk=16, gap_s=0.01))      # forwarded, body trickled
    proxy.script(Fault.stall(5.0))                           # no answer for 5 s (a timeout)
    proxy.script(Fault.endless())                            # a 200 whose body never ends
    proxy.script(Fault.header(b'ETag: "\xc3\xa9"'))          # forwarded, that header a lie
    proxy.script(Fault.reply(200, b"<html>", "text/html"))   # any reply at all, e.g. a portal's
    proxy.default = Fault.status(401)                        # every request, once the script is empty

Every request is recorded (`proxy.log`: method, target, what was done), so tests count
exactly how many requests a client made.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections import deque
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Fault:
    kind: str  # pass | status | reset | stall | gateway_413 | slow_body | endless | header
    code: int = 0
    body: bytes = b""
    content_type: str = "application/json"
    seconds: float = 0.0
    chunk: int = 64
    extra_headers: tuple[bytes, ...] = ()

    @staticmethod
    def passthrough() -> Fault:
        return Fault("pass")

    @staticmethod
    def status(code: int, body: bytes | None = None) -> Fault:
        default = b'{"error": "injected", "message": "injected by the faulty proxy"}'
        return Fault("status", code=code, body=default if body is None else body)

    @staticmethod
    def reset() -> Fault:
        return Fault("reset")

    @staticmethod
    def stall(seconds: float) -> Fault:
        return Fault("stall", seconds=seconds)

    @staticmethod
    def gateway_413() -> Fault:
        page = (
            b"<html>\r\n<head><title>413 Request Entity Too Large</title></head>\r\n<body>\r\n"
            b"<center><h1>413 Request Entity Too Large</h1></center>\r\n"
            b"<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
        )
        return Fault("status", code=413, body=page, content_type="text/html")

    @staticmethod
    def slow_body(chunk: int = 64, gap_s: float = 0.01) -> Fault:
        return Fault("slow_body", seconds=gap_s, chunk=chunk)

    @staticmethod
    def header(line: bytes) -> Fault:
        """Forwarded, with the raw header `line` in place of the reply's header of its name
        (a proxy's lie the client must survive: a non-ASCII ETag, a Retry-After)."""
        return Fault("header", body=line)

    @staticmethod
    def reply(code: int, body: bytes, content_type: str, *extra_headers: bytes) -> Fault:
        """This reply, whatever was asked (a captive portal's page, a 429 with Retry-After)."""
        return Fault(
            "status",
            code=code,
            body=body,
            content_type=content_type,
            extra_headers=extra_headers,
        )

    @staticmethod
    def endless() -> Fault:
        """A 200 whose JSON body never ends (until the client hangs up)."""
        return Fault("endless")


@dataclass
class _Rule:
    fault: Fault
    method: str | None
    times: int
    body_over: int | None = None


@dataclass(frozen=True)
class Logged:
    method: str
    target: str
    action: str
    body_size: int


@dataclass
class FaultyProxy:
    upstream: str
    default: Fault = field(default_factory=Fault.passthrough)
    log: list[Logged] = field(default_factory=list)

    def __post_init__(self) -> None:
        parts = urlsplit(self.upstream)
        self._up_host = parts.hostname or "127.0.0.1"
        self._up_port = parts.port or 80
        self._rules: deque[_Rule] = deque()
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = int(self._sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="faulty-proxy", daemon=True)
        self._ready = threading.Event()
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    # -- control (any thread) -------------------------------------------------------------
    def script(
        self,
        fault: Fault,
        *,
        method: str | None = None,
        times: int = 1,
        body_over: int | None = None,
    ) -> None:
        """The next `times` requests matching `method` (and a body over `body_over` bytes)."""
        with self._lock:
            self._rules.append(_Rule(fault, method, times, body_over))

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()
        self.default = Fault.passthrough()

    def requests(self, method: str | None = None) -> int:
        return sum(1 for entry in list(self.log) if method is None or entry.method == method)

    def _pick(self, method: str, body_size: int) -> Fault:
        with self._lock:
            for rule in self._rules:
                if rule.method not in (None, method):
                    continue
                if rule.body_over is not None and body_size <= rule.body_over:
                    continue
                rule.times -= 1
                if rule.times <= 0:
                    self._rules.remove(rule)
                return rule.fault
        return self.default

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> FaultyProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the faulty proxy did not start")
        return self

    def stop(self) -> None:
        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for writer in list(self._writers):
                writer.close()

        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._sock.close()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def serve() -> None:
            self._server = await asyncio.start_server(self._handle, sock=self._sock)
            self._ready.set()

        self._loop.run_until_complete(serve())
        try:
            self._loop.run_forever()
        finally:
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.close()

    # -- one client connection ------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                method, target, head, body = request
                fault = self._pick(method, len(body))
                self.log.append(Logged(method, target, fault.kind, len(body)))
                if not await self._serve_one(fault, head, body, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    async def _serve_one(
        self, fault: Fault, head: bytes, body: bytes, writer: asyncio.StreamWriter
    ) -> bool:
        """Answer one request; False when the connection must end."""
        if fault.kind == "reset":
            sock = writer.get_extra_info("socket")
            if sock is not None:  # SO_LINGER 0: close sends RST, not FIN
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return False
        if fault.kind == "stall":
            await asyncio.sleep(fault.seconds)
            writer.transport.abort()
            return False
        if fault.kind == "endless":
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
                b'{"entries": {"a.md": "'
            )
            block = b"x" * 65536
            while True:  # until the client goes: drain raises ConnectionError
                writer.write(block)
                await writer.drain()
        if fault.kind == "status":
            writer.write(_response(fault.code, fault.body, fault.content_type, fault.extra_headers))
            await writer.drain()
            return True
        status_line, headers, payload = await self._forward(head, body)
        if fault.kind == "header":
            headers = _with_header(headers, fault.body)
        if fault.kind == "slow_body":
            writer.write(status_line + headers)
            for start in range(0, len(payload), fault.chunk):
                writer.write(payload[start : start + fault.chunk])
                await writer.drain()
                await asyncio.sleep(fault.seconds)
        else:
            writer.write(status_line + headers + payload)
        await writer.drain()
        return True

    async def _forward(self, head: bytes, body: bytes) -> tuple[bytes, bytes, bytes]:
        reader, writer = await asyncio.open_connection(self._up_host, self._up_port)
        try:
            lines = head.split(b"\r\n")
            kept = [
                line
                for line in lines[1:]
                if line and not line.lower().startswith((b"connection:", b"host:"))
            ]
            request = b"\r\n".join(
                [
                    lines[0],
                    f"Host: {self._up_host}:{self._up_port}".encode(),
                    *kept,
                    b"Connection: close",
                ]
            )
            writer.write(request + b"\r\n\r\n" + body)
            await writer.drain()
            raw = await reader.read()
        finally:
            writer.close()
        head_end = raw.index(b"\r\n\r\n")
        status_line, _, rest = raw[:head_end].partition(b"\r\n")
        payload = raw[head_end + 4 :]
        headers = [
            line
            for line in rest.split(b"\r\n")
            if line
            and not line.lower().startswith(
                (b"content-length:", b"connection:", b"transfer-encoding:")
            )
        ]
        if b"chunked" in raw[:head_end].lower():
            payload = _dechunk(payload)
        headers.append(f"Content-Length: {len(payload)}".encode())
        return status_line + b"\r\n", b"\r\n".join(headers) + b"\r\n\r\n", payload


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, bytes, bytes] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    head = head[:-4]
    request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    method, target, _ = request_line.split(" ", 2)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    body = await reader.readexactly(length) if length else b""
    return method, target, head, body


def _response(
    status: int, body: bytes, content_type: str, extra_headers: tuple[bytes, ...] = ()
) -> bytes:
    reason = {412: "Precondition Failed", 413: "Request Entity Too Large"}.get(status, "Injected")
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n"
    ).encode()
    return head + b"".join(line + b"\r\n" for line in extra_headers) + b"\r\n" + body


def _with_header(block: bytes, line: bytes) -> bytes:
    """A header block (ending in a blank line) with `line` replacing the header of its name."""
    name = line.split(b":", 1)[0].strip().lower() + b":"
    kept = [h for h in block.split(b"\r\n") if h and not h.lower().startswith(name)]
    return b"\r\n".join([*kept, line]) + b"\r\n\r\n"


def _dechunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2 :]
    return bytes(out)
