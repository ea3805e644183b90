"""The real filesystem behind `fsview.FileSystem`, recording every path it was asked about.

What was probed — files that exist, names that did not, folders listed — is exactly what
a cached context depends on: its stamps (`os.stat` facts) tell later whether anything
changed, and the folders holding those paths are what the watcher watches.
"""

from __future__ import annotations

import errno
import os
import stat as stat_mod
from dataclasses import dataclass
from pathlib import Path

from memoryd.fsutil import NotRegularFile, read_regular_file
from memoryd.rules.fsview import FsError, Stat

# (inode, size, mtime, ctime, mode) of what a path points to, or why there is nothing.
Stamp = tuple[int, int, int, int, int] | str


def _stamp_of(result: os.stat_result) -> Stamp:
    return (result.st_ino, result.st_size, result.st_mtime_ns, result.st_ctime_ns, result.st_mode)


def stamp(path: Path) -> Stamp:
    try:
        return _stamp_of(os.stat(path))
    except (FileNotFoundError, NotADirectoryError):
        return "missing"
    except OSError as exc:
        return f"error:{exc.errno}"
    except ValueError:  # embedded NUL and friends
        return "invalid"


# The stamp of a touched path: only whether it is a folder, so editing a source file the
# session touched keeps the cached instructions (its full stat dropped them on every edit).
KIND_DIR = "kind:dir"
KIND_OTHER = "kind:other"
_KINDS = (KIND_DIR, KIND_OTHER)


def _kind(path: Path) -> str:
    return KIND_DIR if os.path.isdir(path) else KIND_OTHER


def _fs_error(path: Path, exc: OSError) -> FsError:
    if exc.errno == errno.ELOOP:
        return FsError("symlink_loop", "too many levels of symbolic links")
    if isinstance(exc, PermissionError):
        return FsError("unreadable", "permission denied")
    if isinstance(exc, IsADirectoryError):
        return FsError("not_a_file", "a directory")
    if isinstance(exc, FileNotFoundError | NotADirectoryError):
        return FsError("missing", "no such file")
    return FsError("unreadable", f"{exc.strerror or exc} (errno {exc.errno})")


@dataclass(frozen=True)
class Involvement:
    """What a load depended on."""

    stamps: dict[Path, Stamp]
    listed: frozenset[Path]  # folders whose entries were read (`.claude/rules` trees)
    involved: frozenset[Path]  # every path whose change invalidates the load
    watch_dirs: frozenset[Path]  # existing folders to watch, non-recursively


class RealFS:
    def __init__(self) -> None:
        self.stamps: dict[Path, Stamp] = {}
        self.listed: set[Path] = set()
        self._reals: dict[Path, Path] = {}  # path -> its real path, for this load

    def note(self, path: Path) -> None:
        """Record a path the caller depends on (a settings file, the approvals file)."""
        if self.stamps.get(path, KIND_DIR) in _KINDS:
            self.stamps[path] = stamp(path)

    def _record(self, path: Path, value: Stamp) -> None:
        """The first stamp of a path, except that a full one replaces a touched path's kind
        (a touched `svc/CLAUDE.md` is also a file the load read: its edits count)."""
        if self.stamps.get(path, KIND_DIR) in _KINDS:
            self.stamps[path] = value

    def stat(self, path: Path) -> Stat | None:
        try:
            result = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            self._record(path, "missing")
            return None
        except OSError as exc:
            self._record(path, f"error:{exc.errno}")
            error = _fs_error(path, exc)
            if error.reason == "missing":
                return None
            raise error from None
        except ValueError:
            self._record(path, "invalid")
            raise FsError("missing", "not a valid path") from None
        self._record(path, _stamp_of(result))
        if stat_mod.S_ISREG(result.st_mode):
            return Stat("file", result.st_size)
        if stat_mod.S_ISDIR(result.st_mode):
            return Stat("dir", result.st_size)
        return Stat("other", result.st_size)

    def is_dir(self, path: Path) -> bool:
        kind = _kind(path)
        if kind != KIND_DIR:
            # The nested walk stops at a folder not made yet: its making must undo the load
            # (unwatched, nothing else would see it; its CLAUDE.md was never stat'ed).
            self.stamps.setdefault(path, kind)
        return kind == KIND_DIR

    def touched_is_dir(self, path: Path) -> bool:
        kind = _kind(path)
        self.stamps.setdefault(path, kind)
        return kind == KIND_DIR

    def realpath(self, path: Path) -> Path:
        real = self._resolve(path)
        if real != path:
            self.note(real)
        return real

    def _resolve(self, path: Path) -> Path:
        """`os.path.realpath(path)`, the real path of every folder on the way remembered for
        the rest of the load: each resolved from `/` (an `lstat` per folder above it), the
        `CLAUDE.md`s of a cwd 1,000 folders deep held `get_context` 16 s."""
        if not path.is_absolute() or ".." in path.parts:
            return Path(os.path.realpath(path))
        todo: list[Path] = []
        at = path
        while at not in self._reals and at != at.parent:
            todo.append(at)
            at = at.parent
        real = self._reals.get(at) or Path(os.path.realpath(at))
        for step in reversed(todo):
            # Below a folder's real path, only a link in this very name needs resolving.
            joined = real / step.name
            real = Path(os.path.realpath(joined)) if os.path.islink(joined) else joined
            self._reals[step] = real
        return real

    def read_bytes(self, path: Path, limit: int) -> bytes:
        """`path` is a real path (symlinks resolved by the caller): a symlink found there now
        was swapped in since, and is refused (ELOOP), as a FIFO is (no blocking open)."""
        try:
            return read_regular_file(path, limit)
        except NotRegularFile:
            raise FsError("not_a_file", "not a regular file") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise FsError("unreadable", "a symbolic link was swapped in for it") from None
            raise _fs_error(path, exc) from None

    def list_dir(self, path: Path) -> list[str]:
        self.listed.add(path)
        self.note(path)
        try:
            return sorted(os.listdir(path))
        except OSError as exc:
            raise _fs_error(path, exc) from None

    def involvement(self) -> Involvement:
        # A touched file is no dependency: its edits, and its folder, are nobody's business.
        depends = [path for path, recorded in self.stamps.items() if recorded != KIND_OTHER]
        involved: set[Path] = set(depends)
        watch: set[Path] = set()
        for folder in self.listed:
            if os.path.isdir(folder):
                watch.add(folder)
        nearest: dict[Path, Path] = {}  # folder -> the nearest existing folder at or above it
        for path in depends:
            # Watch the nearest existing folder; the missing ones between are involved
            # too, so creating `docs/` is seen before `docs/a.md` appears in it.
            watch.add(_nearest_dir(path.parent, nearest, involved))
        return Involvement(
            dict(self.stamps), frozenset(self.listed), frozenset(involved), frozenset(watch)
        )


def _nearest_dir(folder: Path, nearest: dict[Path, Path], involved: set[Path]) -> Path:
    """The nearest existing folder at or above `folder`; the missing ones on the way join
    `involved`. Memoized in `nearest`, so 5,000 probes under one missing 1,000-folder path
    walk it once (walking it for each was quadratic)."""
    walked: list[Path] = []
    found = folder
    while True:
        known = nearest.get(found)
        if known is not None:
            found = known
            break
        if os.path.isdir(found) or found == found.parent:
            break
        walked.append(found)
        found = found.parent
    involved.update(walked)
    for step in walked:
        nearest[step] = found
    nearest[folder] = found
    return found


def became_folder(stamps: dict[Path, Stamp], path: Path, now: dict[Path, bool]) -> bool:
    """Whether `path` is a touched path recorded as no folder that is one now (a file
    replaced by a folder may open nested instruction files). `now` memoizes the checks of
    one batch of changes across entries."""
    if stamps.get(path) != KIND_OTHER:
        return False
    if path not in now:
        now[path] = _kind(path) == KIND_DIR
    return now[path]


def unchanged(stamps: dict[Path, Stamp]) -> bool:
    """True when every recorded path still stats the same."""
    return all(
        (_kind(path) if recorded in _KINDS else stamp(path)) == recorded
        for path, recorded in stamps.items()
    )
