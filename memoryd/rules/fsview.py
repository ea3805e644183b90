"""The small filesystem interface the loader runs on, so the domain never touches `os`.

`realfs.RealFS` is the implementation the daemon uses; tests may use it on a temp dir.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from memoryd.rules.model import SkipReason


@dataclass(frozen=True)
class Stat:
    kind: Literal["file", "dir", "other"]
    size: int


class FsError(Exception):
    """A path that exists but cannot be used; `reason` is what the client is shown."""

    def __init__(self, reason: SkipReason, detail: str) -> None:
        super().__init__(detail)
        self.reason: SkipReason = reason
        self.detail = detail


class FileSystem(Protocol):
    def stat(self, path: Path) -> Stat | None:
        """Follows symlinks. None when nothing is there (or a dangling link); FsError otherwise."""

    def is_dir(self, path: Path) -> bool:
        """Whether a folder is there (following symlinks); a dependency of the load only
        when it is not (the nested walk stops there)."""

    def touched_is_dir(self, path: Path) -> bool:
        """Whether a touched path is a folder; only that much is a dependency of the load."""

    def realpath(self, path: Path) -> Path:
        """Symlinks resolved as far as they go; never raises."""

    def read_bytes(self, path: Path, limit: int) -> bytes:
        """At most `limit + 1` bytes of a regular file; FsError when unreadable."""

    def list_dir(self, path: Path) -> list[str]:
        """Entry names, sorted; FsError when the directory cannot be read."""
