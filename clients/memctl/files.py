"""Writing the user's files safely: atomically, keeping a backup, never through a symlink.

`memctl service` and `memctl claude-code` write into the user's config (unit files, Claude Code
settings). A write goes to a temporary file in the same directory and is renamed over the
target, so a crash leaves the old file or the new one, never half of either; a file is removed
only when it still holds what was read (`remove_if_unchanged`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from memoryd_client.client import strict_json
from memoryd_client.durable import fsync_dir
from memoryd_client.private_dirs import make_private_dirs


def write_atomic(
    path: Path, text: str, mode: int = 0o644, dir_mode: int = 0o755, *, durable: bool = True
) -> None:
    """Replace `path` with `text`; `durable` also syncs it to disk first and the rename after
    (skip for caches): a unit file or Claude Code's settings that a power cut right after
    install takes back leaves no service at the next boot, or no hooks."""
    import tempfile  # only when something is written: slow to import

    make_private_dirs(
        path.parent, dir_mode
    )  # each folder it creates gets dir_mode, not the umask's
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def read_text(path: Path) -> str | None:
    """The file's text, None when it does not exist."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def backup(path: Path, folder: Path | None = None) -> Path:
    """Copy `path` to `<folder>/<name>.memctl-backup-<time>` (default: beside it) and return the
    copy's path. The copy is created with the original's mode (O_EXCL, never through a link), so
    a private file's backup is never readable by others, not even while it is being written."""
    import time

    folder = path.parent if folder is None else folder
    stamp = time.strftime("%Y%m%d-%H%M%S")
    source = os.stat(path)
    data = path.read_bytes()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    counter = 1
    while True:
        suffix = "" if counter == 1 else f"-{counter}"
        target = folder / f"{path.name}.memctl-backup-{stamp}{suffix}"
        try:
            fd = os.open(target, flags, source.st_mode & 0o777)
        except FileExistsError:
            counter += 1
            continue
        break
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), source.st_mode & 0o777)  # the umask took bits off
            handle.write(data)
        os.utime(target, ns=(source.st_atime_ns, source.st_mtime_ns))
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    return target


def remove_if_unchanged(path: Path, expected: bytes) -> bool:
    """Remove `path` when it still holds `expected`; False, and the file left, when it does not.

    The file is first renamed aside in its folder, atomically, and compared there: a write
    that lands before the rename is seen by the comparison, one after it makes a new file, so
    nothing written to `path` is removed unseen. What was set aside is read without following
    a link, and a link or changed file is put back without replacing one made meanwhile (in
    that rare race it stays beside it as `<name>.memctl-removing-<random>`).
    """
    import secrets

    aside = path.with_name(f"{path.name}.memctl-removing-{secrets.token_hex(6)}")
    os.rename(path, aside)
    try:
        same = _holds(aside, expected)
    except BaseException:
        _put_back(aside, path)
        raise
    if same:
        aside.unlink()
        return True
    _put_back(aside, path)
    return False


def _holds(path: Path, expected: bytes) -> bool:
    import stat

    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return False  # a symlink (ELOOP) or unreadable: not the file that was read
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        return handle.read(len(expected) + 1) == expected


def _put_back(aside: Path, path: Path) -> None:
    try:
        os.link(aside, path, follow_symlinks=False)  # never over a file written there meanwhile
    except FileExistsError:
        return
    aside.unlink()


def read_regular(path: Path, limit: int) -> bytes | None:
    """A regular file's first `limit` bytes; None when it does not exist. OSError for one
    that cannot be read or is no regular file (a FIFO in its place is not waited on, and
    /dev/zero not read without end)."""
    import errno
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    with open(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, a device or a folder)")
        return handle.read(limit)


def read_regular_head(path: Path, limit: int) -> bytes | None:
    """`read_regular`, None for any file it refuses or cannot read too."""
    try:
        return read_regular(path, limit)
    except OSError:
        return None


def read_json_object(path: Path, limit: int) -> dict[str, Any] | None:
    """The JSON object a regular file of at most `limit` bytes holds, or None: missing,
    unreadable, no regular file (`read_regular_head`), larger, or no JSON object."""
    raw = read_regular_head(path, limit + 1)
    if raw is None or len(raw) > limit:
        return None
    try:
        # strict: nested deeper than Python reads is a ValueError (a RecursionError traceback
        # of `memctl status`, `stop` and `start` for a damaged status file)
        data = strict_json(raw.decode("utf-8"))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
