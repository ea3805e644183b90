"""Every overwrite or delete keeps the previous content: versions under memoryd's state dir.

`<state>/history/<memory dir key>/<file key>/<version>.md`, never inside the memory dir
(that one is synced and read by agents). A version id is `<ns timestamp>-<reason>`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from memoryd.core.project import sanitize_key
from memoryd.errors import InvalidParams, NotFound
from memoryd.fsutil import (
    NotRegularFile,
    atomic_write_bytes,
    ensure_private_dir,
    read_regular_file,
)

# Versions are copies of memory files, refused over 16 MiB before they are kept (writes.py).
_MAX_VERSION_BYTES = 16 * 1024 * 1024
_VERSION = re.compile(r"^\d{19,20}-[a-z]{1,20}$")


@dataclass(frozen=True)
class Version:
    version: str
    timestamp: float
    size: int
    reason: str

    def as_dict(self) -> dict[str, object]:
        return {
            "version": self.version,
            "timestamp": self.timestamp,
            "time": datetime.fromtimestamp(self.timestamp, UTC).isoformat(timespec="seconds"),
            "size": self.size,
            "reason": self.reason,
        }


def _key(text: str) -> str:
    """A folder name for `text`: readable, and unique because a hash of the exact text ends it
    (`feedback_x.md` and `feedback-x.md` read alike once sanitised but never share history)."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{sanitize_key(text)[:100]}-{digest}"


def _version_name(name: str) -> bool:
    return name.endswith(".md") and _VERSION.fullmatch(name[:-3]) is not None


# Only regular files are versions: a link, a folder or a FIFO named like one (left by a
# restored backup) is skipped, not followed, read or waited on.
def _is_version(entry: os.DirEntry[str]) -> bool:
    try:
        return _version_name(entry.name) and entry.is_file(follow_symlinks=False)
    except OSError:
        return False


def _is_version_file(folder: Path, name: str) -> bool:
    try:
        return _version_name(name) and stat.S_ISREG(os.lstat(folder / name).st_mode)
    except OSError:
        return False


class History:
    def __init__(self, root: Path) -> None:
        self.root = root

    def folder(self, memory_dir: Path, file: str) -> Path:
        return self.root / _key(str(memory_dir)) / _key(file)

    def kept(self, memory_dir: Path) -> Callable[[str], bool]:
        """Whether versions of a file (by its key in `memory_dir`) are kept."""
        return lambda file: self.folder(memory_dir, file).is_dir()

    def save(self, memory_dir: Path, file: str, content: bytes, reason: str) -> Version | None:
        """Keep `content` as a version; None when it equals the newest kept version."""
        folder = ensure_private_dir(self.folder(memory_dir, file))
        # One listing of names: the newest is the greatest version name (ids sort by time),
        # the only one lstat'ed; the taken stamps a set. Listing and stat'ing every version,
        # then listing them again for the name check, took 41 ms a save at 5,000 versions
        # (bench/bench_history.py).
        names = sorted(os.listdir(folder), reverse=True)
        newest = next((n[:-3] for n in names if _is_version_file(folder, n)), None)
        if newest is not None and self._newest_is(folder / f"{newest}.md", content):
            return None
        # Named after the newest even when the clock was set back since (NTP after a VM
        # resume, a dead RTC battery): named by the clock alone it sorted below it, and
        # "newest first" put an older text first.
        stamp = max(time.time_ns(), int(newest.split("-", 1)[0]) + 1 if newest else 0)
        taken = {n.split("-", 1)[0] for n in names if "-" in n}
        while f"{stamp:020d}" in taken:
            stamp += 1
        version = f"{stamp:020d}-{reason}"
        atomic_write_bytes(folder / f"{version}.md", content)
        return Version(version, stamp / 1e9, len(content), reason)

    def drop(self, memory_dir: Path, file: str, version: Version) -> None:
        """Take back a version just kept for a change that then failed: it equals the file
        still there, and listed it stood for a change that never happened. Best effort: one
        left behind is a duplicate of the file, nothing lost."""
        with contextlib.suppress(OSError):
            (self.folder(memory_dir, file) / f"{version.version}.md").unlink()

    def versions(self, memory_dir: Path, file: str) -> list[Version]:
        """Newest first."""
        folder = self.folder(memory_dir, file)
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            return []
        out = []
        for entry in entries:
            if not _is_version(entry):
                continue
            try:
                size = entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
            stem = entry.name[:-3]
            stamp, reason = stem.split("-", 1)
            out.append(Version(stem, int(stamp) / 1e9, size, reason))
        out.sort(key=lambda v: v.version, reverse=True)
        return out

    def read(self, memory_dir: Path, file: str, version: str) -> bytes:
        if not _VERSION.fullmatch(version):
            raise InvalidParams(f"version: not a version id: {version!r}")
        try:
            return self._read(self.folder(memory_dir, file) / f"{version}.md")
        except (OSError, NotRegularFile):
            raise NotFound(f"no version {version} of {file}") from None

    @classmethod
    def _newest_is(cls, path: Path, content: bytes) -> bool:
        try:
            return cls._read(path) == content
        except OSError:  # gone or swapped since it was listed: keep this version anyway
            return False

    @staticmethod
    def _read(path: Path) -> bytes:
        """A kept version, never through a link nor blocking on a FIFO (OSError,
        NotRegularFile for either)."""
        return read_regular_file(path, _MAX_VERSION_BYTES)
