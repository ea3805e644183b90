"""A socket server that misbehaves on purpose, for the editor clients' fault tests.

What it does depends on the method called: `get_context` and `memory.snapshot` are never
answered (a daemon that hangs), `recall` gets a line that is not JSON, `memory.list` gets a line
over the client's cap, `memory.write` a result of the wrong shape, `test.null_id` an error with
`"id": null` (as the daemon answers a line it cannot read), `test.notify` sends one notification
of three kinds, `test.storm` starts 1,000 `memory/saved` notifications spread over one second,
`test.stop_reading` is answered and then nothing more is read on that connection (a daemon that
hangs with the client's requests piling up in the socket), `test.answer_then_mark` is answered
and then the file params.mark is made (the reply is in the client's socket by then),
`test.long_answer_then_mark` answers params.bytes of text, far more than the socket holds: its
first 64 KiB are sent, the mark made, and the rest sent as the client reads; `test.trickle`
begins a reply and sends one more byte of it every params.every_ms, never ending it, until the
client hangs up;
`status` and `subscribe` answer normally so the client can tell it is connected.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from pathlib import Path
from typing import Any

STORM_SIZE = 1000
RESTORE_WARNING = "restored, but MEMORY.md could not be rewritten yet: the next write retries"
NOTIFICATIONS: list[tuple[str, dict[str, Any]]] = [
    ("session/summary_updated", {"session_id": "s-42"}),
    ("team/synced", {"repo": "acme/widgets", "pushed": 2, "pulled": 1}),
    ("worker/error", {"worker": "extraction", "message": "model call failed: 529 overloaded"}),
]


class MisbehavingDaemon:
    def __init__(self, socket_path: Path, huge_line_bytes: int = 2 * 1024 * 1024) -> None:
        self.socket_path = socket_path
        self.huge_line_bytes = huge_line_bytes
        self.methods: list[str] = []
        self.storms_sent = 0
        self._stopped = threading.Event()
        fake = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                for line in self.rfile:
                    try:
                        request = json.loads(line)
                    except ValueError:
                        continue
                    if not fake._serve(request, self.connection):
                        return

        self._server = socketserver.ThreadingUnixStreamServer(str(socket_path), Handler)
        self._server.daemon_threads = True
        # shutdown() waits for the serving loop's next poll: the default 0.5 s was half a
        # second of every test's teardown.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    def start(self) -> MisbehavingDaemon:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._server.shutdown()
        self._server.server_close()

    def _reply(self, conn: socket.socket, request: dict[str, Any], result: Any) -> None:
        message = {"jsonrpc": "2.0", "id": request.get("id"), "result": result}
        conn.sendall(json.dumps(message).encode() + b"\n")

    def _serve(self, request: dict[str, Any], conn: socket.socket) -> bool:
        method = str(request.get("method"))
        self.methods.append(method)
        try:
            if method in ("get_context", "memory.snapshot"):
                return True  # never answered
            if method == "recall":
                conn.sendall(b"this is not json <html>\n")
            elif method == "memory.list":
                conn.sendall(
                    b'{"jsonrpc": "2.0", "id": 1, "result": "' + b"x" * self.huge_line_bytes
                )
                conn.sendall(b'"}\n')
            elif method == "test.storm":
                self._reply(conn, request, {"storm": STORM_SIZE})
                threading.Thread(target=self._storm, args=(conn,), daemon=True).start()
            elif method == "test.null_id":
                error = {"code": -32700, "message": "parse error: invalid UTF-8 in the line"}
                message = {"jsonrpc": "2.0", "id": None, "error": error}
                conn.sendall(json.dumps(message).encode() + b"\n")
            elif method == "memory.write":
                self._reply(conn, request, "a string where an object belongs")
            elif method == "memory.restore":  # restored, with a warning as memory.write's
                result = {"path": request["params"]["path"], "restored": "v1"}
                self._reply(conn, request, {**result, "warnings": [RESTORE_WARNING]})
            elif method == "test.notify":
                self._reply(conn, request, {"sent": len(NOTIFICATIONS)})
                for event, params in NOTIFICATIONS:
                    note = {"jsonrpc": "2.0", "method": event, "params": params}
                    conn.sendall(json.dumps(note).encode() + b"\n")
            elif method == "test.answer_then_mark":
                self._reply(conn, request, {"answered": True})
                Path(request["params"]["mark"]).touch()
            elif method == "test.long_answer_then_mark":
                message = {"jsonrpc": "2.0", "id": request.get("id"), "result": {"text": ""}}
                head, tail = json.dumps(message).encode().split(b'""')
                text = b'"' + b"x" * int(request["params"]["bytes"]) + b'"'
                line = head + text + tail + b"\n"
                conn.sendall(line[: 64 * 1024])
                Path(request["params"]["mark"]).touch()
                conn.sendall(line[64 * 1024 :])
            elif method == "test.trickle":
                begun = json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "result": ""})
                conn.sendall(begun[:-2].encode())  # up to the string's opening quote
                every = float(request["params"]["every_ms"]) / 1000
                threading.Thread(target=self._trickle, args=(conn, every), daemon=True).start()
            elif method == "test.stop_reading":
                self._reply(conn, request, {"reading": False})
                self._stopped.wait()
                return False
            elif method == "subscribe":
                self._reply(conn, request, {"subscribed": ["memory/saved"]})
            else:
                self._reply(
                    conn, request, {"version": "misbehaving", "pid": 0, "protocol_version": 1}
                )
        except OSError:
            return False  # the client hung up (as it should after a bad line)
        return True

    def _trickle(self, conn: socket.socket, every: float) -> None:
        """One byte of a reply that never ends every `every` seconds, until the client hangs up."""
        while not self._stopped.wait(every):
            try:
                conn.sendall(b"x")
            except OSError:
                return

    def _storm(self, conn: socket.socket) -> None:
        """1,000 notifications in ten bursts over about a second."""
        for burst in range(10):
            lines = b"".join(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "method": "memory/saved",
                        "params": {"path": f"/m/storm_{burst}_{i}.md", "project": "/p"},
                    }
                ).encode()
                + b"\n"
                for i in range(STORM_SIZE // 10)
            )
            try:
                conn.sendall(lines)
            except OSError:
                return
            self.storms_sent += STORM_SIZE // 10
            time.sleep(0.1)
