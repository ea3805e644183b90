"""A small client for the memoryd socket protocol. Standard library only.

    from memoryd_client import Client, AsyncClient, RpcError, DaemonUnavailable

`Client` is synchronous (one request at a time); `AsyncClient` multiplexes concurrent
requests on one connection and queues server notifications.
"""

from memoryd_client.client import (
    AsyncClient,
    Client,
    DaemonUnavailable,
    RpcError,
    default_socket_path,
)

__all__ = ["AsyncClient", "Client", "DaemonUnavailable", "RpcError", "default_socket_path"]
