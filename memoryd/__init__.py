"""memoryd: a per-user daemon that gives LLM agents a real memory."""

from __future__ import annotations

from memoryd_client.version import installed_version

# Bumped whenever a method, field or error code of docs/protocol.md changes incompatibly.
PROTOCOL_VERSION = 1

__all__ = ["PROTOCOL_VERSION", "__version__"]


def __getattr__(name: str) -> str:
    # `__version__` is looked up when first asked for (a wheel's is in its package metadata,
    # slow to read); from a git checkout it names the commit (memoryd_client.version).
    if name == "__version__":
        return installed_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
