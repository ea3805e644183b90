"""Filesystem writes that never leave a torn file: temp file + fsync + rename; and the one
way to read a file found earlier by a scan or a check (`read_regular_file`)."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import re
import secrets
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Iterable
from pathlib import Path

import structlog

from memoryd_client.durable import fsync_dir as fsync_dir
from memoryd_client.flocks import flock_tries as flock_tries
from memoryd_client.flocks import flock_within as flock_within
from memoryd_client.private_dirs import make_private_dirs as create_private_dirs
from memoryd_client.private_files import open_owner_rw

_log = structlog.get_logger("memoryd.fsutil")


class NotRegularFile(OSError):
    """What was opened is not a regular file (a FIFO, a device, a folder)."""


def open_regular_file(path: Path | str, *, follow_links: bool = False) -> int:
    """A read-only descriptor of the regular file at `path`, for a file a scan or a check found
    earlier, which may have been swapped since:
    O_NOFOLLOW — a symbolic link put in its place is refused (ELOOP), never followed out
    (unless `follow_links`: a user's own settings file may be a dotfile manager's link);
    O_NONBLOCK — a FIFO put in its place does not block the open, and the fstat refuses it
    (NotRegularFile), as it refuses a device or a folder."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(path, flags if follow_links else flags | os.O_NOFOLLOW)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
        if not stat.S_ISREG(mode):
            raise NotRegularFile(errno.EINVAL, "not a regular file", str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular_file(path: Path | str, limit: int, *, follow_links: bool = False) -> bytes:
    """At most `limit + 1` bytes of the regular file at `path` (one byte over tells the caller
    the file is larger than `limit`, without reading the rest), opened as `open_regular_file`
    opens it."""
    fd = open_regular_file(path, follow_links=follow_links)
    try:
        chunks: list[bytes] = []
        remaining = limit + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


# A NUL byte in a file's first 8 KiB makes it binary, as git sees it (UTF-16 text is one too).
BINARY_SNIFF_BYTES = 8_192


def looks_binary(data: bytes) -> bool:
    return b"\x00" in data[:BINARY_SNIFF_BYTES]


def make_private_dirs(path: Path, mode: int = 0o700) -> Path:
    """Create `path` and its missing parents, each with exactly `mode` (0700); existing ones
    are left as they are. The one rule, shared with memctl (`memoryd_client.private_dirs`)."""
    create_private_dirs(path, mode)
    return path


def open_lock_file(path: Path) -> int:
    """A lock file (for `flock`) opened read-write, made 0600 in a 0700 folder when missing
    (made 0600 too when a umask, or an older memoryd under one, left it unopenable); a
    symbolic link in its place is refused (ELOOP), never followed. OSError otherwise."""
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        return open_owner_rw(path, flags)
    except FileNotFoundError:  # the folder's first lock
        ensure_private_dir(path.parent)
        return open_owner_rw(path, flags)


def ensure_private_dir(path: Path, mode: int = 0o700) -> Path:
    """Create `path` (and missing parents, each `mode`); an existing `path` is tightened to
    `mode`, its existing parents are left alone."""
    make_private_dirs(path, mode)
    with contextlib.suppress(PermissionError):
        if (path.stat().st_mode & 0o777) != mode:
            path.chmod(mode)
    return path


def open_dirs(paths: Iterable[Path]) -> list[tuple[Path, int]]:
    """(path, permission bits) of each existing directory that others may use (any group or
    other bit set): memoryd keeps its folders 0700."""
    found = []
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_mode & 0o077:
            found.append((path, stat.S_IMODE(st.st_mode)))
    return found


def stage_file(directory: Path, data: bytes, *, prefix: str, mode: int = 0o600) -> Path:
    """`data` in a new hidden temp file in `directory`, fsynced, with `mode`: ready to be
    renamed or linked into place. Nothing is left behind when writing it fails."""
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return Path(tmp)


# What `stage_file` names a temp file for `atomic_write_*` of `<name>`: `.<name>.<8 chars>.tmp`;
# and team sync's staged entries, `.memoryd-<8 chars>.tmp`.
_STAGED = re.compile(r"^(?:\..+\.|\.memoryd-)[A-Za-z0-9_]{8}\.tmp$")
# When this process started: a temp file last modified before it was left by a process that
# is gone (every writer memoryd runs now started its file later)…
STARTED_AT = time.time()
# … by more than this: another process may be writing in these folders as this one starts (a
# daemon still draining when `memctl start` ran, a second daemon of the user, a `memctl`
# hook), its temp file older than this process by as long as its write has taken, a slow
# fsync's seconds.
LIVE_WRITE_MARGIN_S = 60.0
STALE_BEFORE = STARTED_AT - LIVE_WRITE_MARGIN_S


def _staged_prefix(name: str) -> str:
    """`.<name>.`, the name cut so the temp file's whole name (8 random characters and `.tmp`
    after it) stays within 255 bytes: a file name of 242–255 bytes is legal, its temp file's
    would not be. Cut between characters, each as many bytes as the name holds on disk: one
    byte for a byte that is not UTF-8 (a surrogate escape, `caf\udce9.md`), which the name's
    UTF-8 encoding refused (UnicodeEncodeError, the write failed)."""
    room = 255 - len(".") - len(".") - 8 - len(".tmp")
    size = 0
    for end, char in enumerate(name):
        size += len(os.fsencode(char))
        if size > room:
            return f".{name[:end]}."
    return f".{name}."


def remove_stale_staged(
    folder: Path, older_than: float = STALE_BEFORE, *, names: Collection[str] | None = None
) -> list[Path]:
    """Remove temp files that `atomic_write_*` left in `folder` (not below it) when its
    process was killed mid-write, if last modified before `older_than` (a time.time()): a
    writer alive now started its file later. With `names`, only the temp files of those
    file names (in a folder that others write too, `~/.claude`, a project's). Returns what
    was removed."""
    removed: list[Path] = []
    prefixes = None if names is None else tuple(_staged_prefix(n) for n in names)
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        if not _STAGED.match(entry.name):
            continue
        if prefixes is not None and not entry.name.startswith(prefixes):
            continue
        try:
            if (
                entry.is_file(follow_symlinks=False)
                and entry.stat(follow_symlinks=False).st_mtime < older_than
            ):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            continue
    return removed


def remove_stale_staged_tree(root: Path, older_than: float = STALE_BEFORE) -> list[Path]:
    """`remove_stale_staged` in `root` and every folder below it (links not followed): for a
    tree only memoryd writes, its state folder."""
    removed: list[Path] = []
    for folder, _, _ in os.walk(root):
        removed += remove_stale_staged(Path(folder), older_than)
    return removed


def save_stamp(path: Path, *, follow_links: bool = True) -> tuple[int, ...] | None:
    """What changes whenever anyone saves `path`, in place (a time, a size) or by a rename (an
    inode): compared before and after, for `atomic_write_bytes(still=…)`. None: no file."""
    try:
        st = os.stat(path, follow_symlinks=follow_links)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_dev)


def unchanged_since(path: Path, stamp: tuple[int, ...] | None) -> Callable[[], bool]:
    """For `atomic_write_bytes(still=…)`: whether `path` itself (a symlink put in its place
    is a change, not followed) is still as `save_stamp(path, follow_links=False)` saw it
    (`stamp`), so a rewrite made from that read replaces nobody's later save."""
    return lambda: save_stamp(path, follow_links=False) == stamp


class ChangedMeanwhile(OSError):
    """`atomic_write_bytes(still=…)`: the file changed since it was read; nothing written."""


def as_stamped(out: Path, stamp: tuple[int, ...] | None) -> bool:
    """Whether the file a swap took out of its place (`atomic_write_bytes(came_out=…)`, now
    at `out`) is the one `save_stamp` saw as `stamp`, unchanged: the same inode, time and
    size (the swap's rename changed its ctime). Not: someone's save after the last look
    (`still`), by rename (another inode) or in place."""
    try:
        st = os.lstat(out)
    except OSError:
        return False
    return stamp is not None and (st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev) == (
        stamp[0],
        *stamp[2:],
    )


def put_back_unless(stamp: tuple[int, ...] | None) -> Callable[[Path], None]:
    """For `atomic_write_bytes(came_out=…)` of a rewrite made from a read (an index, an
    agent's edit): what came out is put back and ChangedMeanwhile raised, for the rewrite
    to be made again from it, unless it is the file read (`save_stamp`: `stamp`)."""

    def look(out: Path) -> None:
        if not as_stamped(out, stamp):
            raise ChangedMeanwhile(errno.EAGAIN, "saved by another program as it was rewritten")

    return look


def atomic_write_bytes(
    path: Path,
    data: bytes,
    mode: int = 0o600,
    *,
    still: Callable[[], bool] | None = None,
    came_out: Callable[[Path], None] | None = None,
) -> None:
    """Replace `path` with `data` atomically; readers see the old or the new file, never half.
    `still`: asked once the new file is staged, right before the rename; False raises
    ChangedMeanwhile and leaves `path` as it is (another writer changed what `data` was made
    from: staging and its fsync take milliseconds, a window another writer falls into).
    `came_out`: the new file is swapped in (`swap_in`) and `came_out(name)` sees what it
    replaced, under the temp file's name, before that is removed: a save by rename (an
    editor's `mv`) landing after `still`'s look is there, where a replace dropped it unseen.
    What it raises puts that file back (`path` as it was) and fails the write."""
    make_private_dirs(path.parent)
    tmp = stage_file(path.parent, data, prefix=_staged_prefix(path.name), mode=mode)
    removable = True  # `tmp` names the staged file or nothing, never someone else's
    try:
        staged = _identity(tmp)
        if still is not None and not still():
            raise ChangedMeanwhile(errno.EAGAIN, "changed while it was rewritten", str(path))
        if came_out is None:
            os.replace(tmp, path)
        elif swap_in(tmp, path):
            try:
                came_out(tmp)
            except BaseException:
                removable = _put_back(tmp, path, staged)
                raise
    except BaseException:
        if removable:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        raise
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # what was replaced, once `came_out` saw it
    fsync_dir(path.parent)


# renameat2(2)'s flags (Linux 3.15+, glibc 2.28+).
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
# What renameat2 fails with where a filesystem (some FUSE, NFS, overlay) or kernel has no
# such flag or call: a plain replace then, as before.
_NO_RENAMEAT2 = frozenset({errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP})
# Tries of a swap whose `path` keeps coming and going (made, removed) between them.
_SWAP_TRIES = 8


@functools.cache
def _renameat2() -> Callable[..., int] | None:
    """libc's renameat2, or None (not Linux, an older libc)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        call = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    call.restype = ctypes.c_int
    return call


def _rename_flags(source: Path, target: Path, flags: int) -> bool:
    """renameat2(source, target, flags); False where it is not to be had (the caller falls
    back to a plain replace), OSError for any other failure (FileExistsError for a target
    RENAME_NOREPLACE found, FileNotFoundError for a missing one RENAME_EXCHANGE needs)."""
    call = _renameat2()
    if call is None:
        return False
    if call(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), flags) == 0:
        return True
    code = ctypes.get_errno()
    if code in _NO_RENAMEAT2:
        return False
    raise OSError(code, os.strerror(code), str(source), None, str(target))


def swap_in(staged: Path, path: Path) -> bool:
    """`staged` put at `path`, atomically. True: swapped (RENAME_EXCHANGE), `staged`'s name
    now holds what was at `path`, for the caller to look at and remove. False: nothing was
    at `path` (renamed with RENAME_NOREPLACE, so a file made there meanwhile is swapped, not
    replaced unseen), or no renameat2 here (a plain replace, which cannot tell)."""
    for _ in range(_SWAP_TRIES):
        try:
            if not _rename_flags(staged, path, _RENAME_EXCHANGE):
                break
            return True
        except FileNotFoundError:
            if not staged.exists():
                raise  # the temp file (or its folder) is gone: the caller's to handle
        try:
            if _rename_flags(staged, path, _RENAME_NOREPLACE):
                return False
            break
        except FileExistsError:
            continue  # made meanwhile: swapped for it on the next try
    os.replace(staged, path)
    return False


def take_out(path: Path) -> Path:
    """`path` renamed to a new hidden temp name beside it (`.<name>.<8 chars>.tmp`, as
    `stage_file` names them, so one a killed process left is swept), returned: for a delete
    to look at what it removes. An unlink removed whatever was there at that instant: a save
    by rename landing after the delete's last look went uncopied. FileNotFoundError: none."""
    for _ in range(_SWAP_TRIES):
        out = path.with_name(f"{_staged_prefix(path.name)}{secrets.token_hex(4)}.tmp")
        try:
            if not _rename_flags(path, out, _RENAME_NOREPLACE):
                os.rename(path, out)  # no renameat2: 32 random bits make a clash moot
            return out
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temp name", str(path))


def _kept_name(out: Path) -> Path:
    """Where a temp name's file someone else saved is kept (`.<name>.<7 chars>.kept`): never
    swept as a temp file is, and no longer than the temp name (a 255-byte memory name's one
    is as long as a name may be)."""
    return out.with_name(out.name.removesuffix(".tmp")[:-1] + ".kept")


def put_back(out: Path, path: Path) -> None:
    """Undo `take_out`: `out` renamed back to `path`, unless something is there now (a save
    since): then it stays beside it, renamed `.<name>.<7 chars>.kept`, and is logged."""
    try:
        if _rename_flags(out, path, _RENAME_NOREPLACE):
            return
        if not os.path.lexists(path):
            os.rename(out, path)
            return
    except FileExistsError:
        pass
    _keep_beside(out, "a file taken out to be removed kept beside a save since")


def _keep_beside(out: Path, why: str) -> None:
    kept = _kept_name(out)
    os.rename(out, kept)
    _log.warning(why, file=str(kept))


def _identity(path: Path) -> tuple[int, int]:
    """The inode and device of what is at `path` (a link not followed)."""
    st = os.lstat(path)
    return st.st_ino, st.st_dev


def _put_back(out: Path, path: Path, staged: tuple[int, int]) -> bool:
    """Undo `swap_in`: what came out (at `out`) goes back to `path`, and the staged file
    (`staged`: its `_identity`) to `out`. True: `out` now holds the staged file or nothing,
    for the caller to remove. Anything else is kept beside (`.kept`, logged): what came out,
    when a save landed at `path` since the swap (it stays there: it came last; compared with
    an lstat made here, one made during `came_out`'s look was taken for the staged file,
    exchanged out and removed) or when it cannot be exchanged back; a save landing between
    the look and the exchange (microseconds). When the name is free (the new file removed
    meanwhile) what came out goes back to it. False: what is at `out` could not be moved (a
    full directory refuses a new name, an I/O error): it is left there, logged, and must
    not be removed."""
    try:
        try:
            at_path = _identity(path)
        except FileNotFoundError:
            put_back(out, path)
            return True
        exchanged = False
        if at_path == staged:
            with contextlib.suppress(OSError):
                exchanged = _rename_flags(out, path, _RENAME_EXCHANGE)
        if not exchanged or _identity(out) != staged:
            _keep_beside(out, "a save under a failed write kept beside it")
        return True
    except OSError as exc:
        _log.error(
            "a save under a failed write left at its temp name", file=str(out), error=str(exc)
        )
        return False


def atomic_write_text(path: Path, text: str, mode: int = 0o600) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode)


def create_exclusive(path: Path, text: str = "", mode: int = 0o600) -> bool:
    """Create `path` with `text` only if it does not exist, never seen half written: the text
    is staged and fsynced first, then linked into place (a link fails on an existing name, as
    O_EXCL does). True when this call created it. Created in place and then written, a
    process killed in between left an empty or half file that passed for the real one."""
    make_private_dirs(path.parent)
    tmp = stage_file(path.parent, text.encode("utf-8"), prefix=_staged_prefix(path.name), mode=mode)
    try:
        if not _link_into_place(tmp, path, mode):
            return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    fsync_dir(path.parent)
    return True


# What `link` fails with on a filesystem without hard links (exFAT, some FUSE mounts).
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK})


def _link_into_place(staged: Path, path: Path, mode: int) -> bool:
    """`staged` linked as `path` unless `path` exists (False then)."""
    try:
        os.link(staged, path)
        return True
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
    # No hard links here: the name is claimed empty, then the whole file renamed over it.
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode))
    except FileExistsError:
        return False
    os.replace(staged, path)
    return True
