"""memoryd: a per-user daemon that gives LLM agents a real memory."""

from __future__ import annotations

__version__ = "0.1.0"
# Bumped whenever a method, field or error code of docs/protocol.md changes incompatibly.
PROTOCOL_VERSION = 1

__all__ = ["PROTOCOL_VERSION", "__version__"]
