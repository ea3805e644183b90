"""Domain errors, each carrying the JSON-RPC code it maps to.

    MemorydError
    ├── InvalidParams        -32602  a field is missing, mistyped or out of range
    ├── NotFound             -32001  the thing named does not exist
    ├── ForbiddenPath        -32002  a path outside the allowed directory, or a symlink escape
    ├── FeatureUnavailable   -32003  no model / no team server configured (message says how)
    ├── TooLarge             -32004  over a size or count limit
    └── SecretRefused        -32005  the content holds a secret and the user asked to refuse it

The protocol's own codes (a reply over its cap -32004, a request not started because the
daemon is stopping -32006) are in memoryd/daemon/protocol/envelope.py.

The daemon converts these to JSON-RPC errors in exactly one place (memoryd/daemon/protocol/dispatch.py);
domain code raises them and never builds error responses itself.
"""

from __future__ import annotations

from typing import Any, ClassVar


class MemorydError(Exception):
    code: ClassVar[int] = -32603

    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data

    def __init_subclass__(cls, *, code: int | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if code is not None:  # else the parent's code (a narrower kind of the same error)
            cls.code = code


# The tree of the module docstring, one class a line.
class InvalidParams(MemorydError, code=-32602): ...


class NotFound(MemorydError, code=-32001): ...


class ForbiddenPath(MemorydError, code=-32002): ...


class FeatureUnavailable(MemorydError, code=-32003): ...


class TooLarge(MemorydError, code=-32004): ...


class SecretRefused(MemorydError, code=-32005): ...
