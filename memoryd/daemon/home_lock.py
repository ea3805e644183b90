"""Which daemon of a user's state dir came first, so a second one can say so.

Two daemons of one user can run at once on two sockets (a login service with XDG_RUNTIME_DIR,
and one `memctl` started from a shell without it). Their writes are kept apart (the memory
writer locks, the team state file's lock), but hooks and editors then talk to
whichever daemon their environment finds, and nothing told the user. The first daemon holds
an exclusive `flock` on `<state>/daemon.lock` for its life and leaves its pid and socket in
the file; another one reads them, logs a warning and reports them in `status`. It asks again
at each `status`, so once the first stops the next to ask becomes the holder.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path

from memoryd import jsonread
from memoryd.fsutil import open_lock_file

_MAX_BYTES = 4096  # a pid and a socket path; more is not a holder's note


@dataclass(frozen=True)
class OtherDaemon:
    pid: int | None
    socket: str | None


class HomeLock:
    def __init__(self, path: Path, socket: Path) -> None:
        self.path = path
        self._socket = socket
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def claim(self) -> OtherDaemon | None:
        """None when this daemon holds the lock (or it cannot be made: nothing to say); else
        the daemon that holds it, as far as its note tells."""
        if self._fd is not None:
            return None
        try:
            fd = open_lock_file(self.path)
        except OSError:
            return None  # a read-only state dir: no daemon could leave a note there either
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                return _read_note(os.pread(fd, _MAX_BYTES, 0))
            finally:
                os.close(fd)
        except OSError:
            os.close(fd)
            return None
        note = json.dumps({"pid": os.getpid(), "socket": str(self._socket)}).encode()
        with contextlib.suppress(OSError):  # a full disk: held all the same, with no note
            os.ftruncate(fd, 0)
            os.pwrite(fd, note, 0)
        self._fd = fd
        return None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # no stale note for a reader between this and the close
            os.close(fd)


def _read_note(data: bytes) -> OtherDaemon:
    try:
        note = jsonread.loads(data.decode("utf-8"), long_ints="none")
    except ValueError:
        note = None
    if not isinstance(note, dict):
        return OtherDaemon(None, None)  # held, its note not written yet or not ours
    pid, socket = note.get("pid"), note.get("socket")
    return OtherDaemon(
        pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        socket if isinstance(socket, str) else None,
    )
