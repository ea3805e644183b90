"""The one place RPC methods are registered.

A method is an async function `(daemon, params) -> result`, where `params` is a pydantic
model validated at the boundary and `result` a pydantic model (or plain JSON data).
Feature modules under `memoryd/daemon/methods/` register with `@rpc_method`; the package's
`__init__` imports every one of them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from memoryd.daemon.app import Daemon


class Params(BaseModel):
    """Base of every params model: unknown fields are an error, so typos are caught."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class NoParams(Params):
    pass


P = TypeVar("P", bound=BaseModel)
Handler = Callable[["Daemon", Any], Awaitable[Any]]


@dataclass(frozen=True)
class MethodSpec:
    name: str
    params: type[BaseModel]
    handler: Handler
    summary: str
    # True for handlers that never wait on I/O: they run in the connection's reading loop
    # instead of a task of their own, which saves a loop iteration per request.
    inline: bool = False


REGISTRY: dict[str, MethodSpec] = {}


def rpc_method(
    name: str, params: type[P], *, inline: bool = False
) -> Callable[[Callable[[Daemon, P], Awaitable[Any]]], Callable[[Daemon, P], Awaitable[Any]]]:
    def register(
        handler: Callable[[Daemon, P], Awaitable[Any]],
    ) -> Callable[[Daemon, P], Awaitable[Any]]:
        if name in REGISTRY:
            raise RuntimeError(f"RPC method {name!r} registered twice")
        summary = (handler.__doc__ or "").strip().splitlines()[0] if handler.__doc__ else ""
        REGISTRY[name] = MethodSpec(name, params, handler, summary, inline)
        return handler

    return register


StartupHook = Callable[["Daemon"], Coroutine[Any, Any, None]]
STARTUP_HOOKS: list[StartupHook] = []


def on_daemon_start(hook: StartupHook) -> StartupHook:
    """Run `hook(daemon)` once the socket listens (e.g. the first team pull)."""
    STARTUP_HOOKS.append(hook)
    return hook
