"""What an RPC method is: a params model, an async handler and a one-line summary.

A handler is `async (daemon, params) -> result`, where `params` is a pydantic model validated
at the boundary and `result` a pydantic model (or plain JSON data). Each module under
`memoryd/daemon/methods/` lists its methods in a `METHODS` tuple; `wiring.rpc_methods`
gathers them into the daemon's table.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
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
    # True for handlers that write several files, one after another (a pull, a dream): a
    # full disk halfway leaves what they wrote before it, so its error must not say "nothing
    # was changed" as it does for every other method.
    writes_several: bool = False
    # True for handlers that write in a memory folder (auto memory, its `team/`): a read-only
    # file system there is also mended by moving that folder, and their error says so.
    memory_folder: bool = False


def method(
    name: str,
    params: type[P],
    handler: Callable[[Daemon, P], Awaitable[Any]],
    *,
    inline: bool = False,
    writes_several: bool = False,
    memory_folder: bool = False,
) -> MethodSpec:
    """The spec of one method; its summary is the first line of the handler's docstring."""
    summary = (handler.__doc__ or "").strip().splitlines()[0] if handler.__doc__ else ""
    return MethodSpec(name, params, handler, summary, inline, writes_several, memory_folder)
