"""File-change events, with the options every memoryd watcher uses.

Both watchers in the daemon (the rules' folder watcher, each team folder's) read changes
through `watch`: no filter (each decides what it ignores), folders it may not read skipped,
debounce and step in milliseconds, stopped by an event.

On Linux every watch reads inotify itself; off Linux it goes through watchfiles (imported on
first use, so a daemon that watches nothing never loads it). watchfiles drops what it cannot
name, so the kernel's queue overflow (events lost: a daemon stopped or starved while a checkout
rewrote thousands of files) and the folders it skipped for want of permission went unseen, and
an edit after either was never reported. Here the first is a `Change.lost` entry in the batch
and the second is put in `unwatched`.

A recursive watch (the team folder's) puts one watch on each folder of the tree, as watchfiles
does; a folder made or moved in later is watched when its event is read, and what it already
holds is reported as added (it was filled before its watch existed); so is a folder the walk
could not watch (unreadable then) once a chmod makes it readable (its parent reports the chmod:
the folder stayed unwatched till an overflow or a restart). After an overflow the tree
is walked again, so a folder made while events were being lost is watched too: watchfiles never
learned of it, and edits in it went unseen until the daemon restarted. Each root's parent is
watched for the root's own name: a root's watch follows the folder, not the name, so a symlink
retargeted (`ln -sfn`), removed then made a folder again, or made while dangling went unseen
and the old folder stayed watched. Such a root is reported `deleted` or `added`: the caller
sets up a new watch.

A `Backlog` passed to `watch` tells its caller, at any instant, whether every change so far
has been handed over: inotify queues an event within the very call that made the change, so a
caller that has seen no batch since it looked at the folder, while its backlog is clear, knows
the folder is as it was (the team status reuses its last scan of the folder on that word).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import enum
import errno
import os
import select
import struct
import sys
from collections.abc import AsyncGenerator, Iterable
from pathlib import Path


class Change(enum.IntEnum):
    """The kind of a change; the first three are `watchfiles.Change`'s values."""

    added = 1
    modified = 2
    deleted = 3
    lost = 4  # the OS dropped events (its queue overflowed): anything may have changed


Changes = set[tuple[Change, str]]  # (kind, path as the OS reported it; "" for `lost`)
LOST: tuple[Change, str] = (Change.lost, "")


class Backlog:
    """Whether a watch has changes it has not yet handed over (Linux only: off Linux it is
    never `clear`). `epoch` counts the watches set up: one that ended saw nothing until the
    next was in place, so a caller keying a cache on the batches it got must key it on the
    epoch too."""

    def __init__(self) -> None:
        self.epoch = 0
        self._fd: int | None = None  # the inotify instance, while its watches are in place
        self._held = False  # events read, waiting in a batch not yet yielded

    def clear(self) -> bool:
        """The watch is in place, holds no batch, and the kernel holds no event for it."""
        if self._fd is None or self._held:
            return False
        poller = select.poll()  # not select(): a daemon's fds may pass FD_SETSIZE
        poller.register(self._fd, select.POLLIN)
        return not poller.poll(0)

    def _live(self, fd: int) -> None:
        self.epoch += 1
        self._fd, self._held = fd, False

    def _ended(self) -> None:
        self._fd, self._held = None, False


async def watch(
    *paths: Path,
    stop: asyncio.Event,
    recursive: bool,
    debounce_ms: int,
    step_ms: int,
    unwatched: set[Path] | None = None,
    ready: asyncio.Event | None = None,
    backlog: Backlog | None = None,
) -> AsyncGenerator[Changes]:
    """Batches of changes under `paths` until `stop` is set; `ready` is set once the watches
    are in place (on Linux they are set up in a thread: a tree of 20,000 folders took 250 ms
    on the loop; off Linux, when watchfiles starts). The folders among `paths` that
    could not be watched (no permission, gone) are added to `unwatched` before the first
    batch (on the watchfiles path: those not readable when it starts); without `unwatched`,
    on Linux, such a folder raises OSError (a watch of nothing waited for ever). Raises
    RuntimeError or OSError when the OS watch cannot be set up (the watch limit reached) or
    dies. `backlog`, when given, says meanwhile whether changes wait to be handed over."""
    if sys.platform.startswith("linux"):
        args = (paths, stop, recursive, debounce_ms, step_ms, unwatched, ready, backlog)
        # Closed with this generator, not when the loop collects it: till then its fd stayed
        # open and its backlog vouched for a folder its caller had stopped watching.
        async with contextlib.aclosing(_inotify(*args)) as batches:
            async for batch in batches:
                yield batch
        return
    import watchfiles

    if unwatched is not None:
        unwatched.update(p for p in paths if not os.access(p, os.R_OK))
    if ready is not None:
        ready.set()
    raws = watchfiles.awatch(
        *paths,
        stop_event=stop,
        watch_filter=None,
        debounce=debounce_ms,
        step=step_ms,
        recursive=recursive,
        ignore_permission_denied=True,
    )
    # Closed with this generator, as the inotify one: left to the loop's collection, its
    # Rust watcher and its thread went on watching a folder the caller had stopped watching.
    async with contextlib.aclosing(raws) as batches:
        async for raw in batches:
            yield {(Change(int(kind)), path) for kind, path in raw}


# <sys/inotify.h>
_IN_MODIFY, _IN_ATTRIB, _IN_CLOSE_WRITE = 0x2, 0x4, 0x8
_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x40, 0x80, 0x100, 0x200
_IN_DELETE_SELF, _IN_MOVE_SELF, _IN_UNMOUNT = 0x400, 0x800, 0x2000
_IN_Q_OVERFLOW, _IN_IGNORED, _IN_ONLYDIR = 0x4000, 0x8000, 0x1000000
_IN_DONT_FOLLOW, _IN_MASK_ADD, _IN_ISDIR = 0x2000000, 0x20000000, 0x40000000
_IN_NONBLOCK, _IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC
_MASK = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
    | _IN_ONLYDIR
)
_ADDED, _DELETED = _IN_CREATE | _IN_MOVED_TO, _IN_DELETE | _IN_MOVED_FROM
_SELF_GONE = _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_UNMOUNT | _IN_IGNORED
_HEADER = struct.Struct("iIII")  # wd, mask, cookie, length of the name that follows
# A folder that cannot be watched for a reason of its own; any other error (ENOSPC: the
# user's watch limit; EMFILE, ENOMEM) is the watcher's and is raised.
_SKIPPED = {errno.EACCES, errno.EPERM, errno.ENOENT, errno.ENOTDIR, errno.ELOOP}


class _Libc:
    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.init1 = libc.inotify_init1
        self.init1.argtypes = [ctypes.c_int]
        self.init1.restype = ctypes.c_int
        self.add_watch = libc.inotify_add_watch
        self.add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self.add_watch.restype = ctypes.c_int
        self.rm_watch = libc.inotify_rm_watch
        self.rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
        self.rm_watch.restype = ctypes.c_int


_libc: _Libc | None = None


class _Inotify:
    """One inotify instance: its fd and the folder of each watch; with `recursive`, every
    folder under the roots (symlinks not followed below a root, as the team scan does)."""

    def __init__(self, roots: Iterable[Path], recursive: bool, unwatched: set[Path] | None):
        global _libc
        if _libc is None:
            _libc = _Libc()
        self._libc = _libc
        roots = list(roots)
        self.roots = [str(root) for root in roots]
        self.recursive = recursive
        self.folders: dict[int, str] = {}
        self.parents: dict[int, dict[str, str]] = {}  # recursive: parent wd -> {name: root}
        self.fd = self._libc.init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if self.fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, f"inotify_init1: {os.strerror(code)}")
        try:
            for root in roots:
                if recursive:
                    self._watch_name(str(root))
                if self._add(str(root), follow=True) is None:
                    if unwatched is None:
                        code = ctypes.get_errno()
                        raise OSError(code, f"cannot watch: {os.strerror(code)}", str(root))
                    unwatched.add(root)
                elif recursive:
                    self._add_below(str(root), None)
        except BaseException:
            os.close(self.fd)
            raise

    def close(self) -> None:
        os.close(self.fd)

    def _add(self, folder: str, *, follow: bool) -> int | None:
        """Watch `folder`: its watch; None when it cannot be (gone, unreadable, not a folder)."""
        wd = self._add_watch(folder, _MASK if follow else _MASK | _IN_DONT_FOLLOW)
        if wd is not None:
            self.folders[wd] = folder  # the same wd again for a folder already watched
        return wd

    def _watch_name(self, root: str) -> None:
        """Watch `root`'s parent for entries named as `root` (made, removed, renamed)."""
        parent, name = os.path.split(root.rstrip(os.sep))
        if not name:
            return  # "/": no parent
        # IN_MASK_ADD: a parent that is also a watched folder keeps its whole mask.
        wd = self._add_watch(parent or ".", _ADDED | _DELETED | _IN_MASK_ADD)
        if wd is not None:
            self.parents.setdefault(wd, {})[name] = root

    def _add_watch(self, path: str, mask: int) -> int | None:
        """inotify_add_watch: the watch, or None (errno left set) for a path that cannot be
        watched for a reason of its own; the watcher's own errors (the watch limit) raised."""
        wd = self._libc.add_watch(self.fd, os.fsencode(path), mask)
        if wd >= 0:
            return int(wd)
        code = ctypes.get_errno()
        if code not in _SKIPPED:
            raise OSError(code, f"inotify_add_watch: {os.strerror(code)}", path)
        return None

    def _add_below(self, top: str, found: Changes | None, kept: set[int] | None = None) -> None:
        """Watch every folder under `top` (watched already); what is there goes in `found`,
        their watches in `kept`."""
        pending = [top]
        while pending:
            folder = pending.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue  # gone or unreadable meanwhile: as watchfiles, skipped
            for entry in entries:
                if found is not None:
                    found.add((Change.added, entry.path))
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
                # _add raises what is the watcher's (ENOSPC: the watch limit), not the folder's.
                wd = self._add(entry.path, follow=False) if is_dir else None
                if wd is not None:
                    pending.append(entry.path)
                    if kept is not None:
                        kept.add(wd)

    def _add_late(self, folder: str, changes: Changes) -> None:
        """A folder in the tree whose attributes changed (a chmod): one that could not be
        watched when its parent was walked (unreadable then, readable now) is watched, and what
        it holds is reported as added (written before its watch existed). Left unwatched, edits
        in it went unseen until a rescan or an overflow's rewalk."""
        # Asked of the kernel, not looked up: a watched folder gives back its own wd (a search
        # of `folders` by path cost a pass over every watch, per chmod of a 20,000-folder tree).
        # IN_MASK_ADD: a folder also watched for a root's name keeps that part of its mask.
        wd = self._add_watch(folder, _MASK | _IN_DONT_FOLLOW | _IN_MASK_ADD)
        if wd is not None and wd not in self.folders:
            self.folders[wd] = folder
            self._add_below(folder, changes)

    def _rewalk(self, changes: Changes) -> None:
        """After events were lost: watch the folders made meanwhile, and forget those moved
        out (still reported under their old names) or gone. A root whose name now holds
        another folder, or none (the parent's events for its name were lost too), is reported
        `added` or `deleted`: its watch stayed on the old folder, and the new one's top level
        went unseen."""
        kept: set[int] = set()
        for root in self.roots:
            before = {wd for wd, folder in self.folders.items() if folder == root}
            wd = self._add(root, follow=True)  # by name: the wd of what the name holds now
            if wd is None:
                if before:
                    changes.add((Change.deleted, root))
                continue
            if wd not in before:
                changes.add((Change.added, root))
            kept.add(wd)
            self._add_below(root, None, kept)
        for wd in set(self.folders) - kept:
            del self.folders[wd]
            self._libc.rm_watch(self.fd, wd)

    def _forget_below(self, top: str) -> None:
        """Stop watching `top` and the folders under it (moved out, or away to be re-added)."""
        below = top + os.sep
        for wd, folder in list(self.folders.items()):
            if folder == top or folder.startswith(below):
                del self.folders[wd]
                self._libc.rm_watch(self.fd, wd)  # its IN_IGNORED then finds no folder

    def drain(self, changes: Changes) -> None:
        """Every event queued, as changes."""
        while True:
            try:
                data = os.read(self.fd, 64 * 1024)
            except BlockingIOError:
                return
            offset = 0
            while offset + _HEADER.size <= len(data):
                wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
                name = data[offset + _HEADER.size : offset + _HEADER.size + length].rstrip(b"\0")
                offset += _HEADER.size + length
                self._event(wd, mask, name, changes)

    def _event(self, wd: int, mask: int, name: bytes, changes: Changes) -> None:
        if mask & _IN_Q_OVERFLOW:
            changes.add(LOST)
            if self.recursive:
                self._rewalk(changes)
            return
        named = self.parents.get(wd)
        if named is not None and name:
            replaced = named.get(os.fsdecode(name))
            if replaced is not None and mask & (_ADDED | _DELETED):
                changes.add((Change.added if mask & _ADDED else Change.deleted, replaced))
        folder = self.folders.get(wd)
        if folder is None:
            return
        if mask & _IN_IGNORED:
            del self.folders[wd]  # the kernel ended this watch (its folder is gone)
        path = os.path.join(folder, os.fsdecode(name)) if name else folder
        if name and mask & _ADDED:
            changes.add((Change.added, path))
            if self.recursive and mask & _IN_ISDIR and self._add(path, follow=False) is not None:
                self._add_below(path, changes)
        elif name and mask & _DELETED:
            changes.add((Change.deleted, path))
            if self.recursive and mask & _IN_MOVED_FROM and mask & _IN_ISDIR:
                self._forget_below(path)  # its watches would report it under this old name
        elif not name and mask & _SELF_GONE:
            changes.add((Change.deleted, path))  # the folder itself: its watch is gone
        else:
            changes.add((Change.modified, path))
            if self.recursive and mask & _IN_ATTRIB and mask & _IN_ISDIR:
                self._add_late(path, changes)


async def _inotify(
    paths: Iterable[Path],
    stop: asyncio.Event,
    recursive: bool,
    debounce_ms: int,
    step_ms: int,
    unwatched: set[Path] | None,
    ready: asyncio.Event | None,
    backlog: Backlog | None,
) -> AsyncGenerator[Changes]:
    """watchfiles' batching over a plain inotify instance: a batch closes once a step brings
    nothing new, or `debounce_ms` after its first change."""
    watches = await _set_up(list(paths), recursive, unwatched)
    if ready is not None:
        ready.set()
    fd = watches.fd
    loop = asyncio.get_running_loop()
    readable = asyncio.Event()
    backlog = backlog or Backlog()
    backlog._live(fd)
    try:
        changes: Changes = set()
        first: float | None = None
        while True:
            if changes:
                await asyncio.sleep(step_ms / 1000)
            else:
                # Watched only while waiting: the reader is level-triggered, so left on while a
                # step sleeps (events unread) or a batch is handled, the loop spun (select()
                # returned at once, again and again: a third of a core under a busy folder).
                readable.clear()
                loop.add_reader(fd, readable.set)
                try:
                    await _either(readable, stop)
                finally:
                    loop.remove_reader(fd)
            if stop.is_set():
                return
            count = len(changes)
            watches.drain(changes)
            backlog._held = bool(changes)
            if not changes:
                continue
            now = loop.time()
            if first is None:
                first = now
            elif len(changes) == count or now - first >= debounce_ms / 1000:
                batch, changes, first = changes, set(), None
                backlog._held = False  # handed over with the yield, no await between
                yield batch
    finally:
        backlog._ended()  # before the fd closes: its number may be reused at once
        watches.close()


async def _set_up(paths: list[Path], recursive: bool, unwatched: set[Path] | None) -> _Inotify:
    """The watches, set up in a thread: a recursive watch walks the whole tree (a scandir and
    an inotify_add_watch per folder, about 250 ms at 20,000 folders), which held the loop."""
    setup = asyncio.ensure_future(asyncio.to_thread(_Inotify, paths, recursive, unwatched))
    try:
        return await asyncio.shield(setup)
    except asyncio.CancelledError:
        # The thread goes on: what it sets up is closed when it ends, or its fd leaked.
        setup.add_done_callback(_close_unclaimed)
        raise


def _close_unclaimed(setup: asyncio.Future[_Inotify]) -> None:
    if not setup.cancelled() and setup.exception() is None:
        setup.result().close()


async def _either(first: asyncio.Event, second: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(first.wait()), asyncio.ensure_future(second.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in waits:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
