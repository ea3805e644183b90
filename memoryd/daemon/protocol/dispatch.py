"""A request to its method, and every error to its JSON-RPC code (here and nowhere else).

Our own small dispatcher, not `jsonrpcserver`'s: its public API takes a JSON string and
answers with its own messages, so we could not parse each line once (orjson), name the
field in envelope errors, cap batches, or skip its per-call `inspect.signature` check without
reaching into its private modules. Here a request costs one dict lookup, one pydantic
validation and the handler.

Errors: the params model's `ValidationError` is -32602 naming the field; a `MemorydError`
carries its own code (`memoryd/errors.py`), its message and data; anything else is -32603
naming the method, with the details in the log only (docs/protocol.md).
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from memoryd.daemon.limits import MAX_BATCH, MAX_FIELD_MESSAGE_CHARS, MAX_INFLIGHT_PER_CONNECTION
from memoryd.daemon.protocol.envelope import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NO_DATA,
    check_request,
    echoed,
    error_object,
    listed,
    request_id,
)
from memoryd.daemon.protocol.framing import ParseFailure
from memoryd.daemon.rpc import MethodSpec
from memoryd.errors import MemorydError
from memoryd.fsutil import ChangedMeanwhile

if TYPE_CHECKING:
    from memoryd.daemon.app import Daemon

log = structlog.get_logger("memoryd.protocol")

Reply = dict[str, Any] | list[dict[str, Any]] | None


class _Failed(Exception):
    """A request's error reply, raised on the way out of `_call`."""

    def __init__(self, code: int, message: str, data: Any = NO_DATA) -> None:
        self.code, self.message, self.data = code, message, data


# Field errors one -32602 lists; past them it says how many more. Each name was cut, not their
# number: 600,000 unknown fields made a 27 MB message, and the reply a -32004.
MAX_FIELD_ERRORS = 20


def format_validation_error(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    return "invalid params: " + listed(
        errors, MAX_FIELD_ERRORS, _field_error, sep="; ", more_sep="; "
    )


def _field_error(err: ErrorDetails) -> str:
    loc = ".".join(str(p) for p in err["loc"]) or "params"
    # A validator's message may quote the value sent, whatever its size.
    return f"{echoed(loc)}: {echoed(err['msg'], MAX_FIELD_MESSAGE_CHARS)}"


async def dispatch_message(message: Any, daemon: Daemon) -> Reply:
    """A parsed line (request, notification or batch) in, the reply (None: nothing) out."""
    if isinstance(message, ParseFailure):
        return message.reply
    if isinstance(message, list):
        if not message:
            return error_object(INVALID_REQUEST, "invalid request: empty batch")
        if len(message) > MAX_BATCH:
            return error_object(
                INVALID_REQUEST, f"invalid request: batch of {len(message)} over {MAX_BATCH}"
            )
        # At most a connection's share at once: 1,000 members were 1,000 requests running.
        share = asyncio.Semaphore(MAX_INFLIGHT_PER_CONNECTION)

        async def one(member: Any) -> dict[str, Any] | None:
            async with share:
                return await dispatch_one(member, daemon)

        replies = await asyncio.gather(*(one(m) for m in message))
        batch = [r for r in replies if r is not None]
        return batch or None
    return await dispatch_one(message, daemon)


async def dispatch_one(message: Any, daemon: Daemon) -> dict[str, Any] | None:
    problem = check_request(message)
    if problem is not None:
        return error_object(INVALID_REQUEST, f"invalid request: {problem}", id_=request_id(message))
    name: str = message["method"]
    try:
        spec = daemon.methods.get(name)
        if spec is None:
            raise _Failed(METHOD_NOT_FOUND, f"method not found: {echoed(name)}", echoed(name))
        result = await _call(daemon, spec, message.get("params"))
    except _Failed as failed:
        if "id" not in message:
            return None  # a notification is never answered, not even with an error
        return error_object(failed.code, failed.message, failed.data, message["id"])
    if "id" not in message:
        return None
    return {"jsonrpc": "2.0", "result": result, "id": message["id"]}


async def _call(daemon: Daemon, spec: MethodSpec, raw: Any) -> Any:
    if isinstance(raw, list) and raw:
        raise _Failed(INVALID_PARAMS, "invalid params: params must be an object of named fields")
    try:
        params = spec.params.model_validate(raw if isinstance(raw, dict) else {})
    except ValidationError as exc:
        raise _Failed(INVALID_PARAMS, format_validation_error(exc)) from None
    except Exception:
        # A validator that failed in a way it did not mean to: still the client's params.
        log.exception("params check failed", method=spec.name)
        raise _Failed(INVALID_PARAMS, f"invalid params: {spec.name} could not check them") from None
    try:
        result = await spec.handler(daemon, params)
    except MemorydError as exc:
        if exc.code == INTERNAL_ERROR:
            raise _internal(spec, exc) from None
        # No data is no `data` member (JSON-RPC: it may be omitted), not `"data": null`.
        raise _Failed(exc.code, exc.message, NO_DATA if exc.data is None else exc.data) from None
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        raise _internal(spec, exc) from None
    return result.model_dump(mode="json") if isinstance(result, BaseModel) else result


# The OS errors a user can mend (room, quota, a limit, a mount), each with its cause and the
# fix; any other OSError is a bug or a race, and stays a plain internal error.
_NO_ROOM = {
    errno.ENOSPC: ("the disk is full (ENOSPC)", "free some space"),
    errno.EDQUOT: ("the disk quota is used up (EDQUOT)", "free some space or raise the quota"),
    errno.EFBIG: (
        "a file would pass the daemon's file-size limit (EFBIG: `ulimit -f` where it started)",
        "raise that limit and `memctl restart`",
    ),
    errno.EROFS: ("the file system is read-only (EROFS)", "remount it read-write"),
    # A file made immutable or append-only (chattr +i/+a, which only root sets and clears):
    # its mode allows the write, so no chmod mends it (an index so made: automem.layout).
    errno.EPERM: (
        "a file is immutable or the operation not permitted (EPERM)",
        "`chattr -i -a` the file (as root)",
    ),
    # A file replaced or removed by a rename, where the file is a mount point (a container's
    # `-v notes.md:…/memory/user_x.md`): the kernel refuses to rename it.
    errno.EBUSY: (
        "a file it replaces or removes is a mount point (EBUSY)",
        "mount its folder instead of the file, or unmount it",
    ),
}
# A read-only memory folder may also be moved (`MethodSpec.memory_folder`); for settings.set
# (the user settings file) or a history snapshot (the state folder) that is no fix.
_MOVE_IT = "or move the memory folder (autoMemoryDirectory or MEMORYD_AUTO_MEMORY_DIR)"


def _internal(spec: MethodSpec, exc: BaseException) -> _Failed:
    """-32603 names the method and the kind of failure; the details (an errno text, a path,
    the traceback) go to the log only (docs/protocol.md). A full disk, a quota, a file-size
    limit, a read-only file system or an immutable file is named, with what was left and how
    to mend it."""
    log.error("method failed", method=spec.name, exc_info=exc)
    # Every method but these writes one file atomically (or stages all before the first
    # rename), so a failure leaves everything as it was.
    left = (
        "what it wrote before that stands, the rest was not changed"
        if spec.writes_several
        else "nothing was changed"
    )
    if _in_chain(exc, lambda e: isinstance(e, ChangedMeanwhile)) is not None:
        # A file saved again under each of the write's tries (an editor or a script saving
        # in a loop): said as a bare "ChangedMeanwhile" it read as memoryd's own fault.
        return _Failed(
            INTERNAL_ERROR,
            f"{spec.name} failed: another program changed its file (saved it again, or removed "
            f"its folder) under each of its tries; {left}. Try again once it has stopped (the "
            "file is named in the daemon's log)",
        )
    found = _in_chain(exc, lambda e: isinstance(e, OSError) and e.errno in _NO_ROOM)
    if not isinstance(found, OSError) or found.errno is None:
        return _Failed(
            INTERNAL_ERROR,
            f"internal error in {spec.name}: {type(exc).__name__} "
            "(details are in the daemon's log)",
        )
    code = found.errno
    what, fix = _NO_ROOM[code]
    if code == errno.EROFS and spec.memory_folder:
        fix = f"{fix}, {_MOVE_IT}"
    return _Failed(
        INTERNAL_ERROR,
        f"{spec.name} failed: {what}; {left}. To mend it: {fix}, then try again "
        "(the file is named in the daemon's log)",
    )


def _in_chain(exc: BaseException, wanted: Callable[[BaseException], bool]) -> BaseException | None:
    """The first exception in `exc`'s chain (causes, then contexts) that is `wanted`."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if wanted(current):
            return current
        current = current.__cause__ or current.__context__
    return None
