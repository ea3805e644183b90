"""What one background agent may touch, checked on real paths (symlinks resolved).

A path is judged by `os.path.realpath`, so `memory/../../.bashrc`, a symlink inside the
memory dir pointing at `~/.ssh`, and `/etc/passwd` are all seen for what they are. Roots are
resolved the same way, so a root that is itself reached through a symlink still matches.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from memoryd.automem.manifest import file_of_shown, shown_file
from memoryd.automem.memfile import new_name_problem


class Denied(Exception):
    """A tool call the policy refuses; the reason goes back to the model as a tool error."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def real(path: Path | str) -> Path:
    """The path with every symlink resolved (the missing tail kept as written)."""
    return Path(os.path.realpath(path))


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def _named_as_shown(path: Path) -> Path:
    """`path`, or the file the memory manifest shows by it: each name along it that is the
    exact shown form of one that is there (`a%0Ab.md` for a name holding a newline,
    `c%2541.md` for `c%41.md`, a folder's as a file's: the manifest shows `notes/x.md` whole)
    is that one, even beside a file literally so named (shown itself as `a%250Ab.md`); any
    other name is as written. The model names files as it was shown them: Read said there
    was no such file, and until session 22 a literal twin was taken for the file shown."""
    if "%" not in str(path):
        return path
    found = Path(path.anchor)
    for name in path.parts[1:]:
        step = found / name
        if "%" in name:
            meant = file_of_shown(name)
            # The exact shown form only: `a%2Fb.md` spells no single name, `b%2Emd` no
            # name shown so.
            if meant != name and shown_file(meant) == name and os.path.lexists(found / meant):
                step = found / meant
        found = step
    return found


@dataclass(frozen=True)
class AccessPolicy:
    read_roots: tuple[Path, ...]
    write_roots: tuple[Path, ...] = ()
    write_files: tuple[Path, ...] = ()
    allow_shell: bool = True
    # A further check of each write inside the roots (its real path): the reason to refuse
    # it, or None (auto memory takes only memory files, as `memory.write` does).
    write_check: Callable[[Path], str | None] | None = None
    # Resolved once: the roots as real paths.
    _read: tuple[Path, ...] = field(init=False, repr=False, compare=False)
    _write: tuple[Path, ...] = field(init=False, repr=False, compare=False)
    _files: tuple[Path, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_write", tuple(real(p) for p in self.write_roots))
        object.__setattr__(self, "_files", tuple(real(p) for p in self.write_files))
        # Whatever an agent may write, it may also read back.
        reads = tuple(real(p) for p in self.read_roots) + self._write + self._files
        object.__setattr__(self, "_read", reads)

    @property
    def default_dir(self) -> Path:
        """Where relative paths and path-less searches start: the first read root."""
        if not self._read:
            raise Denied("this agent may not read anything")
        first = self._read[0]
        return first if first.is_dir() else first.parent

    def resolve(self, raw: str) -> Path:
        if not isinstance(raw, str) or not raw:
            raise Denied("a non-empty path is required")
        if "\x00" in raw:
            raise Denied("the path contains a NUL byte")
        path = Path(os.path.expanduser(raw)) if raw.startswith("~") else Path(raw)
        if not path.is_absolute():
            path = self.default_dir / path
        return real(_named_as_shown(path))

    def may_read(self, path: Path) -> bool:
        """`path` must already be real (see `resolve`)."""
        return any(_inside(path, root) for root in self._read)

    def may_write(self, path: Path) -> bool:
        return path in self._files or any(_inside(path, root) for root in self._write)

    def check_read(self, raw: str) -> Path:
        path = self.resolve(raw)
        if not self.may_read(path):
            raise Denied(
                f"reading {path} is not allowed for this agent (allowed: {self._describe(self._read)})"
            )
        return path

    def check_write(self, raw: str) -> Path:
        path = self.resolve(raw)
        if not self.may_write(path):
            allowed = self._describe(self._files + self._write) or "nothing"
            raise Denied(f"writing {path} is not allowed for this agent (allowed: {allowed})")
        if (problem := self._new_name_problem(path)) is not None:
            raise Denied(f"{problem}: {raw!r}")
        if self.write_check is not None:
            refusal = self.write_check(path)
            if refusal is not None:
                raise Denied(refusal)
        return path

    def _new_name_problem(self, path: Path) -> str | None:
        """Why a new file's name and folders below its root are refused (`memfile`), as
        `memory.write` refuses them; a file already so named may be rewritten."""
        if path in self._files or os.path.lexists(path):
            return None
        below = [path.relative_to(root) for root in self._write if _inside(path, root)]
        return new_name_problem(str(below[0] if below else path))

    def as_given(self, path: Path) -> Path:
        """A real path inside a write root, told under that root as the caller gave it (a
        memory dir reached through a linked `~/.claude` is known to clients by that path)."""
        for given, resolved in zip(self.write_roots, self._write, strict=True):
            if _inside(path, resolved):
                return given / path.relative_to(resolved)
        for given, resolved in zip(self.write_files, self._files, strict=True):
            if path == resolved:
                return given
        return path

    @staticmethod
    def _describe(paths: tuple[Path, ...]) -> str:
        return ", ".join(str(p) for p in paths)
