"""The team folder on disk: what is in it, where a server key may be written, conflict copies.

Scanning never follows symlinks (a link in team/ to `~/.ssh/id_rsa` must not be uploaded) and
keeps a stat cache, so a no-op push over thousands of unchanged files reads none of them.
"""

from __future__ import annotations

import os
import re
import stat as stat_mod
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from memoryd.fsutil import atomic_write_text
from memoryd.team.protocol import ENTRY_MAX_BYTES, checksum, validate_key

# `<stem>.conflict-20261202T153012Z.md` (and `-2`, `-3` … when one second saw several).
_CONFLICT_COPY = re.compile(r"\.conflict-\d{8}T\d{6}Z(?:-\d+)?(?:\.[^./]+)?$")

_Stamp = tuple[int, int, int, int]

# A file modified this recently may be rewritten within the filesystem's timestamp granularity
# without its stamp changing ("racy git"): hash it again rather than trust the cache.
_RACY_NS = 2_000_000_000


def is_ignored(name: str) -> bool:
    """Hidden files (our atomic-write temp files among them), editor backups, conflict copies."""
    return (
        name.startswith(".")
        or name.endswith(("~", ".swp", ".swx", ".tmp"))
        or (".conflict-" in name and bool(_CONFLICT_COPY.search(name)))
    )


@dataclass
class LocalScan:
    checksums: dict[str, str] = field(default_factory=dict)  # key -> sha256 of the content
    contents: dict[str, str] = field(default_factory=dict)  # files read by this scan
    invalid: dict[str, str] = field(default_factory=dict)  # relative path -> why it is skipped
    too_large: dict[str, int] = field(default_factory=dict)  # key -> size in bytes


class LocalFolder:
    """One team folder. Not thread-safe; the engine calls it from one task at a time."""

    def __init__(self, team_dir: Path, *, entry_max: int = ENTRY_MAX_BYTES) -> None:
        self.team_dir = team_dir
        self.entry_max = entry_max
        self._cache: dict[str, tuple[_Stamp, str]] = {}
        self._key_problems: dict[str, str | None] = {}  # validate_key, once per name
        self._racy_after = 0

    # -- reading --------------------------------------------------------------------------
    def scan(self) -> LocalScan:
        result = LocalScan()
        seen: set[str] = set()
        self._racy_after = time.time_ns() - _RACY_NS
        self._walk(self.team_dir, "", result, seen)
        for key in set(self._cache) - seen:
            del self._cache[key]
        return result

    def _walk(self, directory: Path, prefix: str, result: LocalScan, seen: set[str]) -> None:
        try:
            entries = list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as exc:
            result.invalid[prefix or "."] = f"unreadable folder: {exc.strerror}"
            return
        for entry in entries:
            name = entry.name
            if is_ignored(name):
                continue
            rel = prefix + name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat_mod.S_ISDIR(st.st_mode):
                self._walk(Path(entry.path), rel + "/", result, seen)
                continue
            if not stat_mod.S_ISREG(st.st_mode):
                if stat_mod.S_ISLNK(st.st_mode):
                    result.invalid[rel] = "symbolic link (never followed)"
                continue
            self._scan_file(entry.path, rel, st, result, seen)

    def _key_problem(self, key: str) -> str | None:
        if key not in self._key_problems:
            if len(self._key_problems) > 100_000:  # names come and go; keep it bounded
                self._key_problems.clear()
            try:
                validate_key(key)
                self._key_problems[key] = None
            except ValueError as exc:
                self._key_problems[key] = str(exc)
        return self._key_problems[key]

    def _scan_file(
        self, path: str, key: str, st: os.stat_result, result: LocalScan, seen: set[str]
    ) -> None:
        problem = self._key_problem(key)
        if problem is not None:
            result.invalid[key] = problem
            return
        if st.st_size > self.entry_max:
            result.too_large[key] = st.st_size
            return
        stamp: _Stamp = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)
        cached = self._cache.get(key)
        racy = st.st_mtime_ns > self._racy_after
        if cached is not None and cached[0] == stamp and not racy:
            result.checksums[key] = cached[1]
            seen.add(key)
            return
        try:
            with open(path, "rb") as handle:
                content = handle.read().decode("utf-8")
        except UnicodeDecodeError:
            result.invalid[key] = "not UTF-8 text"
            return
        except OSError as exc:
            result.invalid[key] = f"unreadable: {exc.strerror}"
            return
        if len(content.encode("utf-8")) > self.entry_max:  # grew since the stat
            result.too_large[key] = len(content.encode("utf-8"))
            return
        digest = checksum(content)
        self._cache[key] = (stamp, digest)
        result.checksums[key] = digest
        result.contents[key] = content
        seen.add(key)

    def read(self, key: str) -> str | None:
        """The current content of `key`, None when it is gone or no longer text."""
        try:
            path = self.target(key)
            return path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError, ValueError):
            return None

    def exists(self, key: str) -> bool:
        return os.path.lexists(self.team_dir.joinpath(*key.split("/")))

    # -- writing server keys --------------------------------------------------------------
    def target(self, key: str) -> Path:
        """Where `key` lives, or ValueError: the key must be valid and its real path — the
        deepest existing ancestor with symlinks resolved — must be inside the team folder."""
        validate_key(key)
        root = self.team_dir.resolve()
        target = self.team_dir.joinpath(*key.split("/"))
        probe = target
        while not os.path.lexists(probe) and probe != self.team_dir:
            probe = probe.parent
        real = probe.resolve()
        if real != root and root not in real.parents:
            raise ValueError("resolves outside the team folder (through a symbolic link)")
        if probe == target and (target.is_symlink() or not target.is_file()):
            raise ValueError("exists and is not a regular file")
        return target

    def write(self, key: str, content: str) -> Path:
        target = self.target(key)
        # Parents are created one by one and re-checked: a link planted between the check and
        # the write cannot carry the write outside the folder.
        self.team_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        root = self.team_dir.resolve()
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        real_parent = target.parent.resolve()
        if real_parent != root and root not in real_parent.parents:
            raise ValueError("resolves outside the team folder (through a symbolic link)")
        atomic_write_text(target, content)
        return target

    def save_conflict_copy(self, key: str, now: datetime) -> Path:
        """Keep the local file as `<stem>.conflict-<UTC time><suffix>` next to it, byte for
        byte: a hard link to it (the write that follows replaces the name, not the inode),
        or a copy where links are not possible. Never overwrites an existing file."""
        target = self.target(key)
        stamp = now.strftime("%Y%m%dT%H%M%SZ")
        suffix = target.suffix if 0 < len(target.suffix) <= 16 else ""
        stem = target.name[: len(target.name) - len(suffix)] if suffix else target.name
        data: bytes | None = None
        for n in range(1, 1000):
            extra = "" if n == 1 else f"-{n}"
            copy = target.with_name(f"{stem}.conflict-{stamp}{extra}{suffix}")
            try:
                os.link(target, copy, follow_symlinks=False)
                return copy
            except FileExistsError:
                continue
            except OSError:
                pass  # no hard links here: copy the bytes instead
            if data is None:
                data = target.read_bytes()
            try:
                fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                continue
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            return copy
        raise FileExistsError(f"no free conflict copy name for {target}")
