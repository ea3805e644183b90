"""The JSON-RPC 2.0 envelope: error codes, error objects, and what makes a message a request."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from memoryd.daemon.limits import MAX_ECHOED_CHARS, MAX_ID_CHARS

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# memoryd's own: a reply over the reply cap (the same code as TooLarge in memoryd/errors.py).
TOO_LARGE = -32004
# memoryd's own: a request read whole but not started when the daemon began to stop.
STOPPING = -32006

NO_DATA: Any = object()  # `data` left out of an error object (not the same as null)

T = TypeVar("T")


def error_object(code: int, message: str, data: Any = NO_DATA, id_: Any = None) -> dict[str, Any]:
    """An error reply; `data` only when given (a given None is sent as null)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not NO_DATA:
        error["data"] = data
    return {"jsonrpc": "2.0", "error": error, "id": id_}


def check_request(obj: Any) -> str | None:
    """Why `obj` is not a JSON-RPC 2.0 request, or None when it is one."""
    if not isinstance(obj, dict):
        return f"a request must be a JSON object, got {type(obj).__name__}"
    if obj.get("jsonrpc") != "2.0":
        return 'jsonrpc: must be exactly "2.0"'
    method = obj.get("method")
    if not isinstance(method, str):
        return "method: must be a string"
    if "params" in obj and not isinstance(obj["params"], dict | list):
        return "params: must be an object or an array"
    if "id" in obj:
        id_ = obj["id"]
        if not (id_ is None or isinstance(id_, str) or type(id_) in (int, float)):
            return "id: must be a string, a number or null"
        if isinstance(id_, str) and len(id_) > MAX_ID_CHARS:
            return f"id: at most {MAX_ID_CHARS:,} characters, got {len(id_):,}"
    extra = set(obj) - {"jsonrpc", "method", "params", "id"}
    if extra:
        return echoed(f"unexpected member(s): {', '.join(sorted(extra))}")
    return None


def request_id(obj: Any) -> Any:
    """The id to answer with: the message's own when it is a valid one, else null (an id
    over MAX_ID_CHARS too: a reply must echo its id whole, and 20 MB of it would not fit)."""
    if isinstance(obj, dict):
        id_ = obj.get("id")
        if isinstance(id_, str):
            return id_ if len(id_) <= MAX_ID_CHARS else None
        if id_ is None or type(id_) in (int, float):
            return id_
    return None


def echoed(text: str, limit: int = MAX_ECHOED_CHARS) -> str:
    """`text` from a request as an error repeats it: cut past `limit` characters (a 20 MB
    method name made a -32601 over the reply cap)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


def listed(
    items: Sequence[T], limit: int, show: Callable[[T], str], *, sep: str, more_sep: str
) -> str:
    """The first `limit` of `items`, each as `show` makes it, joined by `sep`, then after
    `more_sep` how many more there are: an error that lists what a request named stays short
    however many it named (each cut by `echoed` too, as a caller's `show` does)."""
    text = sep.join(show(item) for item in items[:limit])
    if len(items) > limit:
        text += f"{more_sep}and {len(items) - limit:,} more"
    return text
