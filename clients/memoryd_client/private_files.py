"""Whether a folder is safe to keep the user's socket and log in, and opening the log there:
one rule for the daemon (socket folder, `--log-file`), `memctl start` (the log beside the
socket) and every client (the socket it connects to). Standard library only.

Another local user who made the folder first (the /tmp/memoryd-<uid> fallback, any sticky
folder) could swap the socket for their own, or put `memoryd.log` there as a link to a file of
the user's, which the daemon's output would then be appended to.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


def folder_problem(folder: Path) -> str | None:
    """Why `folder` is no place for the user's socket or log (it belongs to another user, or
    others may write in it and it is not sticky), or None. OSError when it cannot be read."""
    info = folder.stat()
    if info.st_uid not in (os.getuid(), 0):
        return f"its folder {folder} belongs to uid {info.st_uid}, not to you (uid {os.getuid()})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not info.st_mode & stat.S_ISVTX:
        return f"its folder {folder} is writable by other users"
    return None


class UnsafeFolder(PermissionError):
    """The log's folder is no place for it (`folder_problem`); `problem` says why."""

    def __init__(self, problem: str) -> None:
        super().__init__(errno.EPERM, f"{problem}; use a folder of your own")
        self.problem = problem


def open_owner_rw(path: Path, flags: int) -> int:
    """`os.open(path, flags | O_CREAT, 0o600)` for a file the user must be able to open again
    (a log, a lock): the mode of one created, or found, narrower or wider (a umask of 0277 or
    0777 gave 0400 or 000, and the next open by the user was EACCES) is made 0600 when the file
    is the user's. Another user's file is left as it is (the caller judges it)."""
    try:
        fd = os.open(path, flags | os.O_CREAT, 0o600)
    except PermissionError as denied:
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            # No file: the folder refused to make one. Said as lstat's "no such file", it read
            # as a missing folder (and a lock's caller made the user's 0500 folder 0700).
            raise denied from None
        if not (stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid()):
            raise
        if stat.S_IMODE(info.st_mode) & 0o600 == 0o600:
            raise  # not its mode (the folder, a read-only mount): chmod would not help
        os.chmod(path, 0o600)  # a regular file, seen by lstat: no link is followed
        fd = os.open(path, flags | os.O_CREAT, 0o600)
    try:
        info = os.fstat(fd)
        # A regular file only: run as root, a device or FIFO opened here is root's too, and
        # /dev/null made 0600 broke every other user's (and initdb's) `> /dev/null`.
        if (
            stat.S_ISREG(info.st_mode)
            and info.st_uid == os.getuid()
            and stat.S_IMODE(info.st_mode) != 0o600
        ):
            os.fchmod(fd, 0o600)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_private_log(path: Path) -> int:
    """A descriptor appending to `path`, a plain file of the user's in a folder of the user's
    (`folder_problem`, checked first: UnsafeFolder), created 0600 (the daemon's log holds
    paths, model errors, tracebacks: a wider or narrower one is made 0600), never through a link, never a FIFO (whose open would hang) or a device, never
    another user's file or one with other hard links (each writes somewhere else than the
    log). OSError, its strerror saying why."""
    problem = folder_problem(path.parent)
    if problem is not None:
        raise UnsafeFolder(problem)
    flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = open_owner_rw(path, flags | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(exc.errno, f"{path} is a symbolic link; it is not followed") from exc
        if exc.errno == errno.ENXIO:  # a FIFO nobody reads
            raise OSError(exc.errno, f"{path} is not a regular file") from exc
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file")
        if info.st_uid != os.getuid():
            raise PermissionError(errno.EPERM, f"{path} belongs to uid {info.st_uid}, not to you")
        if info.st_nlink > 1:
            raise PermissionError(errno.EPERM, f"{path} has {info.st_nlink} hard links")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd
