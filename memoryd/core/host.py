"""What a layer service may ask of the program it runs in: the `Host` (the daemon implements it).

A layer never imports the daemon. It gets a `Host` in its constructor and uses it to start
supervised background work, tell subscribed clients something, report a failure loudly,
count things for `status`, and reach the model. `Closable` is the one lifecycle step a
service may have: the daemon closes what it built, in reverse order, at shutdown.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from memoryd.llm.client import ModelClient

# `Host.notify` handed on alone, to a collaborator that needs nothing else of the host.
Notify = Callable[[str, dict[str, Any]], Awaitable[None]]


class Host(Protocol):
    counters: Counter[str]  # shown in `status`
    # Set when the daemon is asked to stop (a signal, the `shutdown` method), before it drains
    # its requests: a service whose requests could hold the drain ends them by then.
    shutdown_requested: asyncio.Event

    @property
    def model(self) -> ModelClient: ...

    def spawn(
        self, coro: Coroutine[Any, Any, Any], *, worker: str, writes: bool = False
    ) -> asyncio.Task[Any]:
        """Run `coro` in the background, supervised: a failure is reported under `worker`.
        `writes`: it saves something a client was told would be saved (a memory, a summary),
        so shutdown lets it finish within the drain cap before services close."""
        ...

    async def notify(self, event: str, params: dict[str, Any]) -> None:
        """Send a notification to every subscribed client that wants `event`."""
        ...

    async def report_worker_error(
        self, worker: str, message: str, *, exc: BaseException | None = None, **fields: Any
    ) -> None:
        """A log line, a counter in `status` and a `worker/error` notification."""
        ...


class Closable(Protocol):
    async def close(self) -> None:
        """Finish or cancel background work; called once, at daemon shutdown."""
        ...
