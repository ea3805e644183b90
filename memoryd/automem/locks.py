"""One writer lock per memory dir, held across processes.

Every writer of a memory directory (the service, the extraction and dream agents, a team pull)
holds it while it writes files there or `MEMORY.md`, so writes are serialised per directory and
the index never loses a line.

Two daemons of one user can run at once (started with different sockets: a login service
with XDG_RUNTIME_DIR and one started by hand without it), and both write the same memory
dirs. An asyncio lock alone serialised the writers of one process only: overwrites that
returned success were lost without a history version, and MEMORY.md lost lines. So the lock
also takes an exclusive `flock` on a lock file per memory dir under the state dir
(`<state>/locks/`), taken without blocking the event loop (polled) and released with the
asyncio lock. Each holder leaves a token of its own in the file: a holder that finds another
process's token knows that process may have written, and the dir's warm view is checked again
(a directory's mtime can stay the same across two writes in one clock tick).

A dir's lock object lives while someone holds it, waits for it or keeps it to take later (an
agent's run): a daemon that runs for months writes in hundreds of dirs. The token left in a
dir's file is remembered for the MAX_TOKENS dirs locked last; a dir locked again after is
checked again once (on a dir not loaded, `on_foreign_change` costs nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import os
import secrets
import weakref
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Literal, TypeVar

import structlog

from memoryd.core.project import sanitize_key
from memoryd.fsutil import flock_tries, open_lock_file

log = structlog.get_logger("memoryd.automem")

_POLL_FIRST_S = 0.001
_POLL_MAX_S = 0.01  # holders hold it for milliseconds; a waiter looks again this often at most
_TOKEN_BYTES = 32
MAX_TOKENS = 256  # dirs whose last token is kept: many more than are loaded at once (32)

T = TypeVar("T")


def lock_file_name(memory_dir: Path) -> str:
    """The lock file's name for a memory dir: readable, and unique by a hash of the dir's real
    path, so every process that means the same dir takes the same file."""
    real = os.path.realpath(memory_dir)
    digest = hashlib.sha256(real.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{sanitize_key(real)[-100:]}-{digest}.lock"


class DirLock(asyncio.Lock):
    """An asyncio lock that, once held, also holds the dir's file lock. An asyncio.Lock to
    everyone who takes it (`async with`), so no caller changes."""

    def __init__(self, locks: WriterLocks, memory_dir: Path) -> None:
        super().__init__()
        self._locks = locks
        self._memory_dir = memory_dir
        self._path = locks.folder / lock_file_name(memory_dir)
        self._fd: int | None = None

    async def acquire(self) -> Literal[True]:
        await super().acquire()
        # Held: kept for its release, also by a holder that does not keep the object.
        self._locks.held[self._memory_dir] = self
        try:
            await self._lock_file()
        except BaseException:  # cancelled while waiting for the other process: not held
            self._locks.held.pop(self._memory_dir, None)
            super().release()
            raise
        return True

    def release(self) -> None:
        try:
            self._unlock_file()
        finally:
            self._locks.held.pop(self._memory_dir, None)
            super().release()

    async def _lock_file(self) -> None:
        fd = self._locks.open_lock_file(self._path)
        if fd is None:
            return  # cannot be opened: this process's writers are still serialised
        try:
            for delay in flock_tries(fd, first_s=_POLL_FIRST_S, most_s=_POLL_MAX_S):
                await asyncio.sleep(delay)
            token = os.pread(fd, _TOKEN_BYTES, 0)
        except BaseException:
            os.close(fd)  # closing releases the lock
            raise
        self._fd = fd
        if token != self._locks.last_token.get(self._memory_dir):
            # Another process held the lock since we did (or we never did): what it wrote may
            # hide behind directory stamps we took ourselves.
            self._locks.on_foreign_change(self._memory_dir)

    def _unlock_file(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            token = self._locks.next_token()
            with contextlib.suppress(OSError):  # a full disk: the next holder looks again
                if os.pwrite(fd, token, 0) == len(token):
                    self._locks.note_token(self._memory_dir, token)
        finally:
            os.close(fd)


async def held_work(work: Callable[[], T]) -> T:
    """Run a lock holder's file work (fsyncs, a MEMORY.md rewrite) in a thread: the event loop
    stays free, and the other writers wait on the lock, so their index lines are batched into
    the next flush. Run on the loop, a free lock never yielded: a burst of writes ran back to
    back in one loop iteration, each rewriting MEMORY.md alone. The holder waits for the work
    even when cancelled: the lock is never released while its work still runs."""
    task = asyncio.ensure_future(asyncio.to_thread(work))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        while not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # retrieved: the cancellation is what the caller sees
        raise


class WriterLocks:
    """`locks(memory_dir)`: the dir's writer lock (one object per dir). `on_foreign_change`
    is called, under the lock, when another process may have written the dir."""

    def __init__(
        self, folder: Path, on_foreign_change: Callable[[Path], None] = lambda _dir: None
    ) -> None:
        self.folder = folder
        self.on_foreign_change = on_foreign_change
        # What we left in each dir's lock file, the least recently left first.
        self.last_token: OrderedDict[Path, bytes] = OrderedDict()
        # Weak: an entry goes with its last waiter or keeper (never two for one dir); one
        # held stays in `held` until released.
        self._locks: weakref.WeakValueDictionary[Path, DirLock] = weakref.WeakValueDictionary()
        self.held: dict[Path, DirLock] = {}
        self._nonce = secrets.token_hex(8)
        self._count = itertools.count()
        self._warned = False

    def __call__(self, memory_dir: Path) -> asyncio.Lock:
        lock = self._locks.get(memory_dir)
        if lock is None:
            lock = self._locks[memory_dir] = DirLock(self, memory_dir)
        return lock

    def note_token(self, memory_dir: Path, token: bytes) -> None:
        self.last_token[memory_dir] = token
        self.last_token.move_to_end(memory_dir)
        while len(self.last_token) > MAX_TOKENS:
            self.last_token.popitem(last=False)

    def next_token(self) -> bytes:
        return f"{self._nonce}-{next(self._count):015d}".encode().ljust(_TOKEN_BYTES)

    def open_lock_file(self, path: Path) -> int | None:
        """The lock file, opened (folder made 0700, file 0600); None when it cannot be, said
        once in the log."""
        try:
            return open_lock_file(path)
        except OSError as exc:
            if not self._warned:
                self._warned = True
                log.warning(
                    "memory writer lock file cannot be opened: writers of another memoryd "
                    "process on these memory folders are not kept apart",
                    path=str(path),
                    error=exc.strerror or str(exc),
                )
            return None
