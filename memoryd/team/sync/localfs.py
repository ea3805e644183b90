"""The team folder on disk: what is in it, where a server key may be written, conflict copies.

Scanning never follows symlinks (a link in team/ to `~/.ssh/id_rsa` must not be uploaded) and
keeps a stat cache, so a no-op push over thousands of unchanged files reads none of them.

Keys are NFC; a file name on disk may not be (macOS writes names decomposed, NFD). A file is
scanned under the NFC form of its name, and that key is read and written back through the name
the file has on disk (`path_of`), so a pull updates the same file instead of adding a twin. When
both spellings exist (possible on Linux), the NFC one is the key's file and the other is skipped.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat as stat_mod
import time
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from memoryd.fsutil import (
    atomic_write_text,
    fsync_dir,
    make_private_dirs,
    read_regular_file,
    stage_file,
)
from memoryd.team.protocol import (
    ENTRY_MAX_BYTES,
    KEY_MAX_DEPTH,
    checksum,
    ignored_name,
    validate_key,
)

_Stamp = tuple[int, int, int, int]

# A file modified this recently may be rewritten within the filesystem's timestamp granularity
# without its stamp changing ("racy git"): hash it again rather than trust the cache.
_RACY_NS = 2_000_000_000


def is_ignored(name: str) -> bool:
    """Hidden files (our atomic-write temp files among them), editor backups, conflict copies:
    `protocol.ignored_name`, the rule `key_problem` refuses too, so the scan and the keys a
    pull may write agree."""
    return ignored_name(name)


def _not_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


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
        self._disk_names: dict[str, str] = {}  # key -> its file's name on disk, when not NFC
        self._racy_after = 0

    def key_of(self, path: Path) -> str | None:
        """The key a scan gives the file at `path` (relative, `/`-separated, NFC), or None
        when `path` is not in this folder."""
        try:
            relative = path.relative_to(self.team_dir).as_posix()
        except ValueError:
            return None
        return unicodedata.normalize("NFC", relative)

    # -- reading --------------------------------------------------------------------------
    def scan(self) -> LocalScan:
        result = LocalScan()
        seen: set[str] = set()
        self._racy_after = time.time_ns() - _RACY_NS
        self._disk_names = {}
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
            if not name.isascii() and _not_utf8(name):
                # Bytes no key can name (a Latin-1 name from an old archive): listed as
                # skipped under a printable form, never uploaded, never a crash.
                shown = rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
                result.invalid[shown] = "file name is not UTF-8"
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat_mod.S_ISDIR(st.st_mode):
                if rel.count("/") + 2 > KEY_MAX_DEPTH:
                    # No key in it could be valid; and the walk's recursion stays bounded.
                    result.invalid[rel] = f"folder nested deeper than {KEY_MAX_DEPTH} levels"
                    continue
                self._walk(Path(entry.path), rel + "/", result, seen)
                continue
            if not stat_mod.S_ISREG(st.st_mode):
                if stat_mod.S_ISLNK(st.st_mode):
                    result.invalid[rel] = "symbolic link (never followed)"
                continue
            key = unicodedata.normalize("NFC", rel)
            if key != rel:
                if os.path.lexists(self.team_dir.joinpath(*key.split("/"))):
                    result.invalid[rel] = f"another file is named {key!r} (the same in NFC form)"
                    continue
                self._disk_names[key] = rel
            self._scan_file(entry.path, key, st, result, seen)

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
            # A symlink or FIFO swapped in since the stat is refused, not followed or waited on.
            raw = read_regular_file(path, self.entry_max)
            if len(raw) > self.entry_max:  # grew since the stat
                result.too_large[key] = os.stat(path, follow_symlinks=False).st_size
                return
            content = raw.decode("utf-8")
        except UnicodeDecodeError:
            result.invalid[key] = "not UTF-8 text"
            return
        except OSError as exc:
            result.invalid[key] = f"unreadable: {exc.strerror}"
            return
        if "\x00" in content:
            # The server refuses it (400), and one refused entry would stop every push.
            result.invalid[key] = "holds a NUL character (saved as UTF-16?): not text to share"
            return
        digest = checksum(content)
        self._cache[key] = (stamp, digest)
        result.checksums[key] = digest
        result.contents[key] = content
        seen.add(key)

    def path_of(self, key: str) -> Path:
        """Where the file of `key` is (its name on disk may be another Unicode form)."""
        return self.team_dir.joinpath(*self._disk_names.get(key, key).split("/"))

    def read(self, key: str) -> str | None:
        """The current content of `key`, None when it is gone or no longer text."""
        try:
            raw = read_regular_file(self.target(key), self.entry_max)
            # Over the entry cap it cannot be a server version: "unreadable" to the engine.
            return None if len(raw) > self.entry_max else raw.decode("utf-8")
        except (OSError, UnicodeDecodeError, ValueError):
            return None

    def exists(self, key: str) -> bool:
        return os.path.lexists(self.path_of(key))

    # -- writing server keys --------------------------------------------------------------
    def target(self, key: str) -> Path:
        """Where `key` lives, or ValueError: the key must be valid and nothing on its path
        below the team folder may be a symbolic link. One pointing out would carry the write
        outside; one pointing inside (`alias -> sub`) wrote `alias/x.md` as `sub/x.md`, which
        the next push sent as `sub/x.md`, over a teammate's note of that name."""
        validate_key(key)
        target = self.path_of(key)
        self._refuse_links(target)
        if os.path.lexists(target) and not target.is_file():
            raise ValueError("exists and is not a regular file")
        return target

    def _refuse_links(self, path: Path) -> None:
        """ValueError when `path` or a folder on its way below the team folder is a symbolic
        link (each level lstat'ed, never followed), or a file stands where a folder on its
        way must be; the team folder itself may be a link."""
        probe = self.team_dir
        parts = path.relative_to(self.team_dir).parts
        for depth, part in enumerate(parts, 1):
            probe = probe / part
            try:
                st = os.lstat(probe)
            except (FileNotFoundError, NotADirectoryError):
                return  # nothing exists deeper: no link to pass through
            shown = probe.relative_to(self.team_dir).as_posix()
            if stat_mod.S_ISLNK(st.st_mode):
                raise ValueError(f"goes through a symbolic link in the team folder ({shown!r})")
            if depth < len(parts) and not stat_mod.S_ISDIR(st.st_mode):
                # Said so, and refused until it moves: it was a raw "[Errno 17] File exists"
                # retried at every pull, each asking for the whole listing again (no 304).
                raise ValueError(f"needs {shown!r} as a folder, where a file of that name is")

    def write(self, key: str, content: str) -> Path:
        """Write `content` as `key` (atomic), whatever the file held: for a file known to be
        new or in step. A pull or push writing over a local file uses `replace`."""
        target = self.target(key)
        self._make_parents(target)
        atomic_write_text(target, content)
        return target

    def _make_parents(self, target: Path) -> None:
        # Parents are created, then checked again: a link planted between the check and the
        # write cannot carry the write elsewhere.
        if self.team_dir.is_symlink() and not self.team_dir.exists():
            # Its folder removed (or on a drive not mounted): never made here. The bare
            # FileExistsError ("File exists: …/team") told the user nothing.
            raise FileNotFoundError(
                errno.ENOENT,
                f"the team folder is a symbolic link to {os.readlink(self.team_dir)!r}, which "
                "does not exist: make that folder or remove the link",
                str(self.team_dir),
            )
        make_private_dirs(self.team_dir)
        make_private_dirs(target.parent)
        self._refuse_links(target.parent)

    def replace(
        self,
        key: str,
        content: str,
        *,
        disposable: Collection[str],
        now: datetime,
        dirs_to_sync: set[Path] | None = None,
    ) -> Replaced:
        """Put `content` in place of the local file `key` without ever losing a local edit.

        The local file is not overwritten: it is renamed aside (atomically — an edit saved
        up to that instant, even by an editor's own rename, is in what moved), the new
        content is linked into the free name (exclusively — a file re-created meanwhile is
        left alone, `written` False), and only then is what moved aside looked at: content
        whose checksum is in `disposable` (the synced or the incoming version) is dropped,
        anything else — an edit, bytes that are not text — is kept byte for byte as
        `<stem>.conflict-<UTC time><suffix>` (`saved_as`). ValueError for a key that may not
        be written, OSError when the filesystem refuses; the local file is then put back.
        With `dirs_to_sync`, the folder is added to it for the caller to fsync once for a
        whole batch (`sync_dirs`), before it records the files as synced; else it is fsynced
        here.
        """
        target = self.target(key)
        self._make_parents(target)
        staged = stage_file(target.parent, content.encode("utf-8"), prefix=".memoryd-")
        aside: Path | None = None
        try:
            aside = self._move_aside(target)
            written = self._place(staged, target)
        except BaseException:
            if aside is not None:
                self._restore(aside, target, now)
            raise
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(staged)
        saved_as: Path | None = None
        if aside is not None:
            if self._holds_one_of(aside, disposable):
                with contextlib.suppress(OSError):
                    os.unlink(aside)
            else:
                try:
                    saved_as = self._keep_as_conflict_copy(aside, target, now)
                except OSError:
                    saved_as = aside  # no name to give it: kept where it is, and reported
        if dirs_to_sync is None:
            fsync_dir(target.parent)
        else:
            dirs_to_sync.add(target.parent)
        return Replaced(written, saved_as)

    @staticmethod
    def sync_dirs(dirs: Collection[Path]) -> None:
        """Make the renames and links of a batch of `replace` calls durable: one fsync per
        folder, not one per file (20,000 files in 50 folders: 50, not 20,000)."""
        for directory in dirs:
            fsync_dir(directory)

    @staticmethod
    def _move_aside(target: Path) -> Path | None:
        """Rename the local file to a hidden name (never scanned, never watched); None when
        there is no file."""
        aside = target.with_name(f".memoryd-aside-{secrets.token_hex(6)}")
        try:
            os.rename(target, aside)
        except FileNotFoundError:
            return None
        return aside

    @staticmethod
    def _place(staged: Path, target: Path) -> bool:
        """Link the staged file as `target` unless a file of that name appeared meanwhile."""
        try:
            os.link(staged, target, follow_symlinks=False)
        except FileExistsError:
            return False
        except OSError:  # no hard links on this filesystem: check, then rename
            if os.path.lexists(target):
                return False
            os.rename(staged, target)
        return True

    def _restore(self, aside: Path, target: Path, now: datetime) -> None:
        """After a failed replace: the moved local file goes back, or — when its name was
        taken meanwhile — becomes a conflict copy. Never deleted."""
        with contextlib.suppress(OSError):
            if not os.path.lexists(target):
                os.rename(aside, target)
            else:
                self._keep_as_conflict_copy(aside, target, now)

    def _holds_one_of(self, path: Path, checksums: Collection[str]) -> bool:
        try:
            raw = read_regular_file(path, self.entry_max)
            return len(raw) <= self.entry_max and checksum(raw.decode("utf-8")) in checksums
        except (OSError, UnicodeDecodeError):
            return False

    @staticmethod
    def _keep_as_conflict_copy(aside: Path, target: Path, now: datetime) -> Path:
        """Give the moved-aside file its conflict copy name next to `target`:
        `<stem>.conflict-<UTC time><suffix>` (`-2`, `-3` … within one second), which sorts
        with the original and is never pushed (`is_ignored`). Never overwrites a file."""
        stamp = now.strftime("%Y%m%dT%H%M%SZ")
        suffix = target.suffix if 0 < len(target.suffix) <= 16 else ""
        stem = target.name[: len(target.name) - len(suffix)] if suffix else target.name
        for n in range(1, 1000):
            extra = "" if n == 1 else f"-{n}"
            tail = f".conflict-{stamp}{extra}{suffix}"
            # A long name's copy would pass 255 bytes: its stem is cut to make room.
            room = 255 - len(tail.encode("utf-8"))
            short = stem.encode("utf-8")[:room].decode("utf-8", errors="ignore")
            copy = target.with_name(f"{short}{tail}")
            try:
                os.link(aside, copy, follow_symlinks=False)
            except FileExistsError:
                continue
            except OSError:  # no hard links here: check, then rename
                if os.path.lexists(copy):
                    continue
                os.rename(aside, copy)
                return copy
            os.unlink(aside)
            return copy
        raise FileExistsError(f"no free conflict copy name for {target} (kept as {aside})")


@dataclass(frozen=True, slots=True)
class Replaced:
    written: bool  # False: the file was re-created while being replaced, and left alone
    saved_as: Path | None  # where the local content was kept, when it was an edit
