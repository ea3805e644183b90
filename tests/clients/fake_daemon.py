"""A scripted stand-in for memoryd on a real Unix socket (NDJSON JSON-RPC), in a thread.

Client-side tests (memctl subprocesses, the memory UI in a pty, the MCP server) use it where
they need exact, controllable replies: each method is a plain function of its params, every
request is recorded, and `notify()` pushes a notification to subscribed connections. As the
real daemon, a connection's later `subscribe` replaces its set of events (it never doubles a
notification), and `{"events": []}` unsubscribes.
"""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Handler = Callable[[dict[str, Any]], Any]


class FakeError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class FakeDaemon:
    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path
        self.handlers: dict[str, Handler] = {"status": lambda _: {"version": "fake", "pid": 0}}
        self.delays: dict[str, float] = {}
        self.requests: list[tuple[str, dict[str, Any]]] = []
        # Each subscribed connection and the events it asked for (None: every event).
        self._subscribers: dict[socket.socket, frozenset[str] | None] = {}
        self._lock = threading.Lock()
        fake = self

        class RequestHandler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                for line in self.rfile:
                    request = json.loads(line)
                    reply = fake._dispatch(request, self.connection)
                    if reply is not None:
                        # A client gone before its reply (a test's timeout) is no fault of
                        # the fake's: its traceback was noise in the test's output.
                        with fake._lock, contextlib.suppress(BrokenPipeError, ConnectionResetError):
                            self.wfile.write(json.dumps(reply).encode() + b"\n")
                            self.wfile.flush()

        self._server = socketserver.ThreadingUnixStreamServer(str(socket_path), RequestHandler)
        self._server.daemon_threads = True
        # shutdown() waits for the serving loop's next poll: the default 0.5 s was half a
        # second of every test's teardown.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    def start(self) -> FakeDaemon:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def on(self, method: str, handler: Handler | Any) -> None:
        self.handlers[method] = handler if callable(handler) else (lambda _p, v=handler: v)

    def calls(self, method: str) -> list[dict[str, Any]]:
        return [params for name, params in self.requests if name == method]

    def notify(self, event: str, params: dict[str, Any]) -> None:
        data = json.dumps({"jsonrpc": "2.0", "method": event, "params": params}).encode() + b"\n"
        with self._lock:
            for conn, events in list(self._subscribers.items()):
                if events is not None and event not in events:
                    continue
                try:
                    conn.sendall(data)
                except OSError:
                    del self._subscribers[conn]

    def wait_for_subscriber(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not self._subscribers:
            if time.monotonic() > deadline:
                raise TimeoutError("nobody subscribed")
            time.sleep(0.01)

    def _dispatch(self, request: dict[str, Any], conn: socket.socket) -> dict[str, Any] | None:
        method = request.get("method", "")
        params = request.get("params") or {}
        self.requests.append((method, params))
        if method in self.delays:
            time.sleep(self.delays[method])
        if method == "subscribe":
            events = params.get("events")
            with self._lock:
                if events == []:
                    self._subscribers.pop(conn, None)
                else:
                    self._subscribers[conn] = None if events is None else frozenset(events)
            result: Any = {"subscribed": ["memory/saved"] if events is None else sorted(events)}
        elif method not in self.handlers:
            return _error(request, -32601, f"method not found: {method}")
        else:
            try:
                result = self.handlers[method](params)
            except FakeError as exc:
                return _error(request, exc.code, exc.message)
        return {"jsonrpc": "2.0", "id": request.get("id"), "result": result}


def _error(request: dict[str, Any], code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request.get("id"), "error": {"code": code, "message": message}}
