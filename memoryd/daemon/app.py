"""The daemon object: owns every cache, service and worker for one user.

Feature code does not add attributes here. It defines a service class whose constructor
takes the daemon, and gets the single instance with `daemon.service(Cls)`; services with
`async def start()` / `async def close()` are started on first use and closed (in reverse
order of creation) at shutdown. Background work goes through `daemon.spawn`, which
supervises it: a failure becomes a log line, a `worker/error` notification and a counter.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

import structlog

from memoryd import PROTOCOL_VERSION, __version__
from memoryd.llm.client import ModelClient

if TYPE_CHECKING:
    from memoryd.daemon.config import DaemonConfig
    from memoryd.daemon.protocol import Connection

log = structlog.get_logger("memoryd.daemon")

T = TypeVar("T")


class Daemon:
    def __init__(self, config: DaemonConfig) -> None:
        self.config = config
        self.model = ModelClient(config.model)
        self.started_monotonic = time.monotonic()
        self.connections: set[Connection] = set()
        self.inflight: set[asyncio.Task[Any]] = set()
        self.workers: set[asyncio.Task[Any]] = set()
        self.worker_errors: Counter[str] = Counter()
        self.counters: Counter[str] = Counter()
        self.shutdown_requested = asyncio.Event()
        self.last_activity = time.monotonic()
        self._services: dict[type[Any], Any] = {}
        self._service_order: list[Any] = []
        self._service_locks: dict[type[Any], asyncio.Lock] = {}

    # -- services -------------------------------------------------------------------------
    def service(self, cls: type[T]) -> T:
        """The daemon's single instance of `cls`, created on first use."""
        existing: T | None = self._services.get(cls)
        if existing is None:
            existing = cls(self)  # type: ignore[call-arg,unused-ignore]
            self._services[cls] = existing
            self._service_order.append(existing)
        return existing

    async def started_service(self, cls: type[T]) -> T:
        """Like `service`, and awaits its `start()` once."""
        instance = self.service(cls)
        if getattr(instance, "_memoryd_started", False):
            return instance
        lock = self._service_locks.setdefault(cls, asyncio.Lock())
        async with lock:
            if not getattr(instance, "_memoryd_started", False):
                start = getattr(instance, "start", None)
                if start is not None:
                    await start()
                instance._memoryd_started = True  # type: ignore[attr-defined]
        return instance

    def peek_service(self, cls: type[T]) -> T | None:
        return self._services.get(cls)

    # -- background work ------------------------------------------------------------------
    def spawn(self, coro: Coroutine[Any, Any, Any], *, worker: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(self._supervise(coro, worker), name=f"worker:{worker}")
        self.workers.add(task)
        task.add_done_callback(self.workers.discard)
        return task

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
        """Failure is loud: a log line, a counter in `status`, a `worker/error` notification."""
        self.worker_errors[worker] += 1
        if exc is not None:
            log.error("worker failed", worker=worker, error=message, exc_info=exc, **fields)
        else:
            log.warning("worker error", worker=worker, error=message, **fields)
        await self.notify("worker/error", {"worker": worker, "message": message, **fields})

    # -- notifications --------------------------------------------------------------------
    async def notify(self, event: str, params: dict[str, Any]) -> None:
        for connection in list(self.connections):
            if connection.wants(event):
                await connection.notify(event, params)

    # -- status ---------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        features: dict[str, Any] = {
            "model": {"enabled": self.model.configured, "reason": self.model.reason},
        }
        extra: dict[str, Any] = {"projects": 0, "sessions": 0}
        for svc in self._service_order:
            describe = getattr(svc, "feature_status", None)
            if describe is not None:
                features.update(describe())
            more = getattr(svc, "status_extra", None)
            if more is not None:
                extra.update(more())
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
        }

    # -- lifecycle ------------------------------------------------------------------------
    async def on_start(self) -> None:
        from memoryd.daemon.registry import STARTUP_HOOKS

        for hook in STARTUP_HOOKS:
            self.spawn(hook(self), worker=f"startup:{getattr(hook, '__name__', 'hook')}")

    async def close_services(self) -> None:
        for svc in reversed(self._service_order):
            close = getattr(svc, "close", None)
            if close is None:
                continue
            try:
                await close()
            except Exception:
                log.exception("service close failed", service=type(svc).__name__)
        await self.model.close()
