"""The daemon object: the `Host` of every layer service, for one user.

It holds the connections, the workers and the counters, and `services` (built by
`wiring.Services`) and `methods` (the RPC table of `wiring.rpc_methods`). Feature code does
not add attributes here: a layer service is built in `wiring.py`. Background work goes
through `spawn`, which supervises it: a failure becomes a log line, a `worker/error`
notification and a counter.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from collections import Counter
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, ClassVar

import structlog

from memoryd import PROTOCOL_VERSION, __version__, paths
from memoryd.core.model_config import scrub_credentials
from memoryd.daemon.home_lock import HomeLock
from memoryd.daemon.methods.core import FileChecks
from memoryd.daemon.wiring import Services, rpc_methods
from memoryd.llm.client import ModelClient

if TYPE_CHECKING:
    from memoryd.daemon.config import DaemonConfig
    from memoryd.daemon.protocol.connection import Connection

log = structlog.get_logger("memoryd.daemon")


class Daemon:
    # Set by `memoryd` (main) for its own process only: a test's in-process daemons would
    # freeze the test runner's heap again and again. See `on_start`.
    freeze_start_up_heap: ClassVar[bool] = False

    def __init__(self, config: DaemonConfig) -> None:
        self.config = config
        self.model = ModelClient(config.model)
        self.started_monotonic = time.monotonic()
        self.connections: set[Connection] = set()
        self.inflight: set[asyncio.Task[Any]] = set()
        self.workers: set[asyncio.Task[Any]] = set()
        self.writers: set[asyncio.Task[Any]] = set()  # workers shutdown lets finish
        self.worker_errors: Counter[str] = Counter()
        self.counters: Counter[str] = Counter()
        self.shutdown_requested = asyncio.Event()
        # settings.set reads the file, changes one key and writes it whole: two at once (a
        # batch, two clients) each wrote what it had read, and every key but the last writer's
        # was lost. One at a time, waited for on the loop: a lock taken inside worker threads
        # parked the executor's threads during a batch, and unrelated thread work queued.
        self.settings_write = asyncio.Lock()
        self.file_checks = FileChecks()  # status's checks of the files, cached (methods/core)
        self.last_activity = time.monotonic()
        self.methods = rpc_methods()
        self.services = Services(self)
        self.home_lock = HomeLock(paths.state_dir() / "daemon.lock", config.socket_path)

    # -- background work ------------------------------------------------------------------
    def spawn(
        self, coro: Coroutine[Any, Any, Any], *, worker: str, writes: bool = False
    ) -> asyncio.Task[Any]:
        task = asyncio.create_task(self._supervise(coro, worker), name=f"worker:{worker}")
        self.workers.add(task)
        task.add_done_callback(self.workers.discard)
        if writes:
            self.writers.add(task)
            task.add_done_callback(self._writer_done)
        # A task cancelled before its first step (at shutdown) never started `coro`: closed
        # here, it is not left to warn "never awaited" when collected.
        task.add_done_callback(lambda _: coro.close())
        return task

    def _writer_done(self, task: asyncio.Task[Any]) -> None:
        self.writers.discard(task)
        # The idle timeout counts from the end of the last background write (one that
        # outlived its client: the stop must not begin under it).
        self.last_activity = time.monotonic()

    async def _supervise(self, coro: Coroutine[Any, Any, Any], worker: str) -> Any:
        try:
            return await coro
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self.report_worker_error(worker, f"{type(exc).__name__}: {exc}", exc=exc)
            return None

    async def report_worker_error(
        self, worker: str, message: str, *, exc: BaseException | None = None, **fields: Any
    ) -> None:
        """Failure is loud: a log line, a counter in `status`, a `worker/error` notification.
        The configured credentials are scrubbed from the message and fields first: an error's
        text may quote a request header, and subscribers get it as is."""
        self.worker_errors[worker] += 1
        message = self.scrub(message)
        fields = {k: self.scrub(v) if isinstance(v, str) else v for k, v in fields.items()}
        if exc is not None:
            log.error("worker failed", worker=worker, error=message, exc_info=exc, **fields)
        else:
            log.warning("worker error", worker=worker, error=message, **fields)
        await self.notify("worker/error", {"worker": worker, "message": message, **fields})

    def scrub(self, text: str) -> str:
        """`text` without the model key or token or the team token in it."""
        return scrub_credentials(text, (*self.config.model.credentials, self.config.team.token))

    # -- notifications --------------------------------------------------------------------
    async def notify(self, event: str, params: dict[str, Any]) -> None:
        for connection in list(self.connections):
            if connection.wants(event):
                await connection.notify(event, params)

    # -- status ---------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        features: dict[str, Any] = {
            "model": {
                "enabled": self.model.configured,
                "reason": self.model.reason,
                "problem": self.model.problem,
            },
            **self.services.feature_status(),
        }
        extra: dict[str, Any] = {"projects": 0, "sessions": 0, **self.services.status_counts()}
        return {
            **extra,
            "version": __version__,
            "protocol_version": PROTOCOL_VERSION,
            "pid": os.getpid(),
            "uptime_s": round(time.monotonic() - self.started_monotonic, 3),
            "socket": str(self.config.socket_path),
            "connections": len(self.connections),
            "inflight": len(self.inflight),
            "workers_running": len(self.workers),
            "worker_errors": dict(self.worker_errors),
            "counters": dict(self.counters),
            "model": self.model.status(),
            "features": features,
            "other_daemon": self._other_daemon(),
        }

    def _other_daemon(self) -> dict[str, Any] | None:
        """The daemon that shares this user's state dir and started first, if one runs."""
        other = self.home_lock.claim()
        return None if other is None else {"pid": other.pid, "socket": other.socket}

    # -- lifecycle ------------------------------------------------------------------------
    async def on_start(self) -> None:
        other = self.home_lock.claim()
        if other is not None:
            log.warning(
                "another memoryd of this user is running: hooks and editors talk to the daemon "
                "their environment's socket names, so they may not see each other's sessions; "
                "keep one (`memctl --socket SOCKET stop` the other)",
                other_pid=other.pid,
                other_socket=other.socket,
                state_dir=str(self.home_lock.path.parent),
            )
        self.services.on_start()
        if self.freeze_start_up_heap:
            settle_start_up_heap()

    async def close_services(self) -> None:
        for name, exc in await self.services.close():
            log.error("service close failed", service=name, exc_info=exc)
        await self.model.close()
        self.home_lock.release()


def settle_start_up_heap() -> None:
    """Collect once, then move every object left (the modules, classes and services start-up
    built, ~44,000) out of the collector's reach for good: each full collection, which walks
    every tracked object on the event loop, no longer walks them. With 10,000 memory files
    being read, the longest full collection went 110-116 -> 79-90 ms and the probe's worst
    `status` wait 126-138 -> 103-114 ms, RSS unchanged (bench/bench_catch_up_stall.py,
    session 22). Once, at start-up only: a frozen object is never collected, so one later
    dropped in a cycle leaks; start-up objects mostly live as long as the daemon, and the
    collection first leaves no garbage to freeze. Not after each load: a folder's objects
    die when it reloads, and freezing them would grow the heap without bound."""
    gc.collect()
    gc.freeze()
