"""A TCP proxy that can stall: a database behind it behaves like a frozen host or a network
partition (connections stay open, nothing comes back), for this proxy's connections only —
the session's PostgreSQL keeps serving every other test."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable


class StallingProxy:
    """127.0.0.1:`port` forwards to 127.0.0.1:`target_port` until `stall()`, again after
    `resume()`; what arrives meanwhile is held, not dropped."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._flowing = threading.Event()
        self._flowing.set()
        self._trigger: bytes | None = None
        self._stopped = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(self) -> StallingProxy:
        self._spawn(self._accept)
        return self

    def stall(self) -> None:
        self._flowing.clear()

    def stall_on(self, trigger: bytes) -> None:
        """Stall once a client sends data holding `trigger` (that data is held too): a
        partition at an exact point of a transaction, e.g. after a row lock was taken."""
        self._trigger = trigger

    def resume(self) -> None:
        self._flowing.set()

    def stop(self) -> None:
        self._stopped = True
        self._flowing.set()
        with self._lock:
            sockets = [self._listener, *self._sockets]
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in accept or recv
            sock.close()
        for thread in self._threads:
            thread.join(5)

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                return
            with self._lock:
                self._sockets += [client, upstream]
            self._spawn(self._pump, client, upstream, True)
            self._spawn(self._pump, upstream, client)

    def _pump(self, source: socket.socket, target: socket.socket, to_db: bool = False) -> None:
        try:
            while data := source.recv(65536):
                if to_db and self._trigger is not None and self._trigger in data:
                    self._trigger = None
                    self._flowing.clear()
                while not self._flowing.wait(0.1):
                    if self._stopped:
                        return
                target.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, target):  # one side gone: the connection is over
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
