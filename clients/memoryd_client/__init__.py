"""A small client for the memoryd socket protocol. Standard library only.

    from memoryd_client import Client, AsyncClient, RpcError, DaemonUnavailable, UntrustedSocket

`Client` is synchronous (one request at a time); `AsyncClient` multiplexes concurrent
requests on one connection and queues server notifications. Both have one typed method per
RPC (`get_context`, `recall`, `memory_list`, …, see `memoryd_client.methods`) next to the raw
`call(method, params)`; result shapes are the TypedDicts of `memoryd_client.types`.
"""

from typing import TYPE_CHECKING

from memoryd_client.client import (
    Client,
    DaemonUnavailable,
    ProtocolError,
    RpcError,
    UntrustedSocket,
    default_socket_path,
)

if TYPE_CHECKING:
    from memoryd_client.aio import AsyncClient

__all__ = [
    "AsyncClient",
    "Client",
    "DaemonUnavailable",
    "ProtocolError",
    "RpcError",
    "UntrustedSocket",
    "default_socket_path",
]


def __getattr__(name: str) -> object:
    # Lazy, so `import memoryd_client` (memctl, hooks) does not import asyncio.
    if name == "AsyncClient":
        from memoryd_client.aio import AsyncClient

        return AsyncClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
