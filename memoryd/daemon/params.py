"""Field types shared by the params models of many methods, validated at the boundary."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, Field

# What the kernel accepts (Linux PATH_MAX / NAME_MAX, in bytes): a longer path or component
# can name nothing, and checking it anyway would surface as an OSError instead of -32602.
PATH_MAX = 4096
NAME_MAX = 255


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


Cwd = Annotated[str, AfterValidator(_absolute_existing_dir)]
SessionId = Annotated[str, AfterValidator(_session_id)]
# A path given by the client: bounded like the kernel bounds it (see `path_problem`).
PathText = Annotated[str, AfterValidator(_path_text)]
# Paths only recorded or compared (`read_paths`, `already_surfaced`): odd ones are skipped
# where they are used, never refused.
PathList = Annotated[list[str], Field(max_length=100_000)]
