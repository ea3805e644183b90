"""Field types shared by the params models of many methods, validated at the boundary."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, Field


def _absolute_existing_dir(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain a NUL byte")
    path = Path(value)
    if not path.is_absolute():
        raise ValueError(f"must be an absolute path, got {value!r}")
    if not path.is_dir():
        raise ValueError(f"no such directory: {value}")
    return value


_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$")


# Session folders sit beside the project's `memory/` folder; a session named like it would put
# its summary inside auto memory.
_RESERVED_SESSION_IDS = frozenset({"memory"})


def _session_id(value: str) -> str:
    if not _SESSION_ID.match(value) or ".." in value:
        raise ValueError(
            "must be 1-200 characters of letters, digits, '.', '_', ':' or '-', "
            "start with a letter or digit, and contain no '/' or '..'"
        )
    if value.lower() in _RESERVED_SESSION_IDS:
        raise ValueError(f"{value!r} is reserved (it names the project's auto memory folder)")
    return value


Cwd = Annotated[str, AfterValidator(_absolute_existing_dir)]
SessionId = Annotated[str, AfterValidator(_session_id)]
PathList = Annotated[list[str], Field(max_length=100_000)]
