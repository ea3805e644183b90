"""Field types shared by the params models of many methods, validated at the boundary."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field
from pydantic_core import PydanticKnownError

# What the kernel accepts (Linux PATH_MAX / NAME_MAX, in bytes): a longer path or component
# can name nothing, and checking it anyway would surface as an OSError instead of -32602.
PATH_MAX = 4096
NAME_MAX = 255


# Characters of a path short enough that its bytes (at most 4 a character) pass no bound.
_SHORT = NAME_MAX // 4


def path_problem(value: str) -> str | None:
    """Why `value` cannot be a path on this system, or None."""
    if not value:
        return "must be a non-empty path"
    if "\x00" in value:
        return "must not contain a NUL byte"
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > PATH_MAX:
        return f"is {size:,} bytes; a path is at most {PATH_MAX:,}"
    longest = max(len(part.encode("utf-8", "surrogatepass")) for part in value.split("/"))
    if longest > NAME_MAX:
        return f"has a file or folder name of {longest:,} bytes; at most {NAME_MAX} each"
    return None


def _path_text(value: str) -> str:
    # Most paths are too short for any byte count to pass a bound: no encoding, no split
    # (50,000 touched paths took ~60 ms on the event loop, now ~4 ms).
    if value and "\x00" not in value and len(value) <= (NAME_MAX if value.isascii() else _SHORT):
        return value
    problem = path_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _absolute_existing_dir(value: str) -> str:
    _path_text(value)
    path = Path(value)
    if not path.is_absolute():
        raise ValueError(f"must be an absolute path, got {value!r}")
    try:
        is_dir = path.is_dir()
    except OSError as exc:  # ELOOP, EACCES …: the client's path, so a -32602, not a crash
        raise ValueError(f"cannot be used as a directory: {exc.strerror}") from None
    if not is_dir:
        raise ValueError(f"no such directory: {value}")
    return value


_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")


# Session folders sit beside the project's `memory/` folder; a session named like it would put
# its summary inside auto memory.
_RESERVED_SESSION_IDS = frozenset({"memory"})


def _session_id(value: str) -> str:
    if not _SESSION_ID.fullmatch(value) or ".." in value:  # `$` would let a final "\n" in
        raise ValueError(
            "must be 1-200 characters of letters, digits, '.', '_', ':' or '-', "
            "start with a letter or digit, and contain no '/' or '..'"
        )
    if value.lower() in _RESERVED_SESSION_IDS:
        raise ValueError(f"{value!r} is reserved (it names the project's auto memory folder)")
    return value


# Paths one request may list.
MAX_PATHS = 100_000


def _at_most(limit: int) -> BeforeValidator:
    """A list over `limit` refused before its items are checked, with the message pydantic's
    own bound gives after checking them all (10^6 paths took ~0.3 s on the event loop)."""

    def check(value: Any) -> Any:
        if isinstance(value, list) and len(value) > limit:
            context = {"field_type": "List", "max_length": limit, "actual_length": len(value)}
            raise PydanticKnownError("too_long", context)
        return value

    return BeforeValidator(check)


Cwd = Annotated[str, AfterValidator(_absolute_existing_dir)]
SessionId = Annotated[str, AfterValidator(_session_id)]
# A path given by the client: bounded like the kernel bounds it (see `path_problem`).
PathText = Annotated[str, AfterValidator(_path_text)]
PathTexts = Annotated[list[PathText], _at_most(MAX_PATHS), Field(max_length=MAX_PATHS)]
# Paths only recorded or compared (`read_paths`, `already_surfaced`): odd ones are skipped
# where they are used, never refused.
PathList = Annotated[list[str], _at_most(MAX_PATHS), Field(max_length=MAX_PATHS)]
