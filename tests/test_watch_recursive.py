"""A recursive watch (the team folder's) on Linux: `fswatch` reads inotify itself.

Through watchfiles, the kernel's queue overflow was dropped without a word, and a folder made
while events were being lost was never watched: a change after the overflow, and every later
edit in that folder, went unseen until the daemon restarted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from memoryd import fswatch
from tests.test_watch_git_work import _DROP_DAC, inotify_queue_size

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="inotify: off Linux watchfiles watches"
)


class _Watch:
    """A recursive watch of `root`, read batch by batch."""

    def __init__(self, root: Path) -> None:
        self.stop = asyncio.Event()
        self.batches: AsyncIterator[fswatch.Changes] = fswatch.watch(
            root, stop=self.stop, recursive=True, debounce_ms=50, step_ms=20
        )
        self.seen: fswatch.Changes = set()
        self._batch: asyncio.Future[fswatch.Changes] | None = None

    async def until(
        self, ready: Callable[[fswatch.Changes], bool], touch: Callable[[], object] = lambda: None
    ) -> fswatch.Changes:
        """Batches until `ready` holds for all seen so far; `touch` is done while it waits
        (the watch is set up on the first read, so a change before it may be missed)."""
        while not ready(self.seen):
            if self._batch is None:
                self._batch = asyncio.ensure_future(anext(self.batches))
            while not self._batch.done():
                touch()
                await asyncio.wait([self._batch], timeout=0.05)
            self.seen |= self._batch.result()
            self._batch = None
        return self.seen

    async def close(self) -> None:
        self.stop.set()
        if self._batch is not None:  # a read a failed wait left running: it ends too
            with contextlib.suppress(StopAsyncIteration):
                self.seen |= await asyncio.wait_for(self._batch, 10)
        assert await anext(self.batches, None) is None


def _paths(changes: fswatch.Changes) -> set[str]:
    return {path for _, path in changes}


async def _armed(watch: _Watch, root: Path) -> None:
    probe = root / "probe"
    await asyncio.wait_for(
        watch.until(lambda c: str(probe) in _paths(c), lambda: probe.write_text("p")), 10
    )
    watch.seen.clear()


def _overflow(folder: Path) -> None:
    """Events enough to overflow the queue. The loop is the caller's: held here, nothing
    reads the queue until its next await."""
    flip = folder / ".flip"
    flip.write_text("x")
    for _ in range(inotify_queue_size() // 2 + 100):  # two events a rename
        os.rename(flip, folder / ".flop")
        os.rename(folder / ".flop", flip)


async def test_a_folder_made_while_events_were_lost_is_watched(tmp_path: Path) -> None:
    watch = _Watch(tmp_path)
    await _armed(watch, tmp_path)
    try:
        _overflow(tmp_path)
        (tmp_path / "made" / "deeper").mkdir(parents=True)
        seen = await asyncio.wait_for(watch.until(lambda c: fswatch.LOST in c), 10)
        assert fswatch.LOST in seen
        watch.seen.clear()
        edited = tmp_path / "made" / "deeper" / "note.md"
        seen = await asyncio.wait_for(
            watch.until(lambda c: str(edited) in _paths(c), lambda: edited.write_text("n")), 10
        )
        assert str(edited) in _paths(seen)
    finally:
        await watch.close()


async def test_a_tree_moved_in_is_reported_and_watched_and_one_moved_out_is_not(
    tmp_path: Path,
) -> None:
    root = tmp_path / "team"
    root.mkdir()
    outside = tmp_path / "outside"
    (outside / "api" / "v2").mkdir(parents=True)
    (outside / "api" / "v2" / "old.md").write_text("filled before its watch existed")
    watch = _Watch(root)
    await _armed(watch, root)
    try:
        os.rename(outside / "api", root / "api")
        moved = root / "api" / "v2" / "old.md"
        assert str(moved) in _paths(
            await asyncio.wait_for(watch.until(lambda c: str(moved) in _paths(c)), 10)
        )
        watch.seen.clear()
        new = root / "api" / "v2" / "new.md"
        await asyncio.wait_for(
            watch.until(lambda c: str(new) in _paths(c), lambda: new.write_text("n")), 10
        )

        # The writes of new.md that `until` made after its batch was cut are still queued: a
        # late watcher (a loaded machine) gave them after the clear below, under api/ (where
        # they happened). Read up to a probe first, so only what follows the rename is seen.
        await _armed(watch, root)
        os.rename(root / "api", root / "renamed")  # within the tree: under its new name
        watch.seen.clear()
        renamed = root / "renamed" / "v2" / "new.md"
        seen = await asyncio.wait_for(
            watch.until(lambda c: str(renamed) in _paths(c), lambda: renamed.write_text("r")), 10
        )
        assert not any(p.startswith(str(root / "api") + os.sep) for p in _paths(seen))

        os.rename(root / "renamed", tmp_path / "gone")  # out of the tree: no longer reported
        (tmp_path / "gone" / "v2" / "new.md").write_text("edited outside")
        watch.seen.clear()
        probe = root / "probe"
        seen = await asyncio.wait_for(
            watch.until(lambda c: str(probe) in _paths(c), lambda: probe.write_text("q")), 10
        )
        assert all(p.startswith(str(root)) for p in _paths(seen)), seen
    finally:
        await watch.close()


async def test_a_symlinked_folder_inside_is_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "team"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "link").symlink_to(elsewhere, target_is_directory=True)
    watch = _Watch(root)
    await _armed(watch, root)
    try:
        (elsewhere / "secret.md").write_text("not the team's")
        probe = root / "probe"
        seen = await asyncio.wait_for(
            watch.until(lambda c: str(probe) in _paths(c), lambda: probe.write_text("q")), 10
        )
        assert not any("secret" in p for p in _paths(seen)), seen
    finally:
        await watch.close()


async def test_a_root_whose_name_now_holds_another_folder_is_reported(tmp_path: Path) -> None:
    # A root's watch follows the folder, not its name: the symlink retargeted, or removed and
    # a folder made in its place, went unseen and the old folder stayed watched.
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    root = tmp_path / "team"
    root.symlink_to(first, target_is_directory=True)
    watch = _Watch(root)
    await _armed(watch, root)
    try:
        (tmp_path / "link").symlink_to(second, target_is_directory=True)
        os.replace(tmp_path / "link", root)  # ln -sfn second team
        seen = await asyncio.wait_for(watch.until(lambda c: str(root) in _paths(c)), 10)
        assert (fswatch.Change.added, str(root)) in seen
        await watch.close()

        watch = _Watch(root)  # as the team watcher does: a new watch, on the new folder
        await _armed(watch, root)
        root.unlink()
        seen = await asyncio.wait_for(
            watch.until(lambda c: (fswatch.Change.deleted, str(root)) in c), 10
        )
        watch.seen.clear()
        root.mkdir()
        seen = await asyncio.wait_for(
            watch.until(lambda c: (fswatch.Change.added, str(root)) in c), 10
        )
    finally:
        await watch.close()


async def test_a_root_pointed_elsewhere_while_events_were_lost_is_reported(
    tmp_path: Path,
) -> None:
    # The parent's event for the root's name was lost with the rest: the walk after the
    # overflow went through the name into the new folder but kept the root's watch on the old
    # one, so the new folder's top level was never watched and no new watch was set up.
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    root = tmp_path / "team"
    root.symlink_to(first, target_is_directory=True)
    watch = _Watch(root)
    await _armed(watch, root)
    try:
        _overflow(first)
        (tmp_path / "link").symlink_to(second, target_is_directory=True)
        os.replace(tmp_path / "link", root)  # ln -sfn second team, unseen
        seen = await asyncio.wait_for(watch.until(lambda c: fswatch.LOST in c), 10)
        assert (fswatch.Change.added, str(root)) in seen  # the team watcher sets up a new watch
    finally:
        await watch.close()


async def test_the_watch_limit_reached_for_a_new_folder_ends_the_watch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The user's inotify watch limit (ENOSPC) is the watcher's problem, not the folder's: it
    # must end the watch (the team watcher restarts and pushes), not leave the folder unseen.
    import ctypes
    import errno

    real = fswatch._Libc()
    original = real.add_watch

    def add_watch(fd: int, path: bytes, mask: int) -> int:
        if path.endswith(b"/full"):
            ctypes.set_errno(errno.ENOSPC)
            return -1
        return int(original(fd, path, mask))

    monkeypatch.setattr(fswatch, "_libc", real)
    monkeypatch.setattr(real, "add_watch", add_watch)
    root = tmp_path / "team"
    root.mkdir()
    (tmp_path / "tree" / "full").mkdir(parents=True)
    watch = _Watch(root)
    await _armed(watch, root)
    os.rename(tmp_path / "tree", root / "tree")  # `full` is met walking the tree moved in
    with pytest.raises(OSError, match="inotify_add_watch") as info:
        await asyncio.wait_for(watch.until(lambda _: False), 10)
    assert info.value.errno == errno.ENOSPC
    watch._batch = None  # the generator ended with the error


async def test_a_folder_moved_out_while_events_were_lost_is_no_longer_reported(
    tmp_path: Path,
) -> None:
    # Its move unseen, its watch went on reporting its edits under the old name, inside the
    # tree: each one a push of a folder where nothing had changed.
    root = tmp_path / "team"
    (root / "old").mkdir(parents=True)
    watch = _Watch(root)
    await _armed(watch, root)
    try:
        _overflow(root)
        os.rename(root / "old", tmp_path / "archived")
        await asyncio.wait_for(watch.until(lambda c: fswatch.LOST in c), 10)
        watch.seen.clear()
        (tmp_path / "archived" / "note.md").write_text("edited outside the tree")
        probe = root / "probe"
        seen = await asyncio.wait_for(
            watch.until(lambda c: str(probe) in _paths(c), lambda: probe.write_text("q")), 10
        )
        assert not any(p.startswith(str(root / "old")) for p in _paths(seen)), seen
    finally:
        await watch.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fswatch's own inotify reader")
async def test_the_watches_are_set_up_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recursive watch walks the whole tree (a scandir and an inotify_add_watch per folder):
    250 ms at 20,000 folders, every other request of the daemon waiting (bench_team_watch.py).
    It runs in a thread; `ready` says when the watches are in place."""
    import threading

    (tmp_path / "a" / "b").mkdir(parents=True)
    threads: list[threading.Thread] = []
    real = fswatch._Inotify.__init__

    def recording(self: fswatch._Inotify, *args: object, **kwargs: object) -> None:
        threads.append(threading.current_thread())
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(fswatch._Inotify, "__init__", recording)
    stop, ready = asyncio.Event(), asyncio.Event()
    seen: list[fswatch.Changes] = []

    async def consume() -> None:
        async for batch in fswatch.watch(
            tmp_path, stop=stop, recursive=True, debounce_ms=20, step_ms=20, ready=ready
        ):
            seen.append(batch)
            stop.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(ready.wait(), 10)
    (tmp_path / "a" / "b" / "x.md").write_text("x\n")
    await asyncio.wait_for(task, 10)
    assert threads
    assert threads[0] is not threading.main_thread()
    assert (fswatch.Change.added, str(tmp_path / "a" / "b" / "x.md")) in seen[0]


async def test_a_watch_cancelled_while_set_up_closes_what_its_thread_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon closing, or the rules watcher dropping a generation, cancels a watch whose
    set-up thread cannot be stopped: its inotify instance, made after, must not stay open."""
    import threading

    held = threading.Event()
    made: list[fswatch._Inotify] = []
    closed: list[fswatch._Inotify] = []
    real_init, real_close = fswatch._Inotify.__init__, fswatch._Inotify.close

    def slow(self: fswatch._Inotify, *args: object, **kwargs: object) -> None:
        held.wait(10)  # the walk of a big tree, still under way at the cancel
        real_init(self, *args, **kwargs)  # type: ignore[arg-type]
        made.append(self)

    def close(self: fswatch._Inotify) -> None:
        closed.append(self)
        real_close(self)

    monkeypatch.setattr(fswatch._Inotify, "__init__", slow)
    monkeypatch.setattr(fswatch._Inotify, "close", close)
    stop = asyncio.Event()

    async def consume() -> None:
        async for _ in fswatch.watch(
            tmp_path, stop=stop, recursive=True, debounce_ms=20, step_ms=20
        ):
            pass

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.05)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    held.set()
    for _ in range(500):  # the thread ends, its result reaches the loop, the callback runs
        if closed:
            break
        await asyncio.sleep(0.01)
    assert made
    assert closed == made


# Run in a child: root reads every folder, so the child drops the capabilities that let it.
_UNREADABLE_AT_SETUP = """
import asyncio, json, sys
from pathlib import Path
from memoryd import fswatch

async def main() -> None:
    root = Path(sys.argv[1])
    sub = root / "sub"
    stop, ready = asyncio.Event(), asyncio.Event()
    batches = fswatch.watch(root, stop=stop, recursive=True, debounce_ms=50, step_ms=20, ready=ready)
    seen = set()
    batch = asyncio.ensure_future(anext(batches))
    await asyncio.wait_for(ready.wait(), 60)
    sub.chmod(0o755)
    edited = sub / "edited.md"
    deadline = asyncio.get_running_loop().time() + 60
    while str(edited) not in {p for _, p in seen} and asyncio.get_running_loop().time() < deadline:
        edited.write_text("e")
        if (await asyncio.wait([batch], timeout=0.1))[0]:
            seen |= batch.result()
            batch = asyncio.ensure_future(anext(batches))
    stop.set()
    batch.cancel()
    print(json.dumps(sorted([int(kind), path] for kind, path in seen)))

asyncio.run(main())
"""


@pytest.mark.skipif(
    os.geteuid() == 0 and shutil.which("setpriv") is None,
    reason="running as root without setpriv: file permissions do not bind",
)
def test_a_folder_unreadable_at_setup_is_watched_once_made_readable(tmp_path: Path) -> None:
    """A folder the walk could not watch (EACCES) stayed unwatched when made readable: the
    team's pushes missed every edit in it until the one-minute rescan."""
    root = tmp_path / "team"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "before.md").write_text("written before its watch existed")
    (root / "sub").chmod(0)
    drop = ("setpriv", *_DROP_DAC[1:]) if os.geteuid() == 0 else ()
    try:
        child = subprocess.run(
            [*drop, sys.executable, "-c", _UNREADABLE_AT_SETUP, str(root)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        (root / "sub").chmod(0o755)
    assert child.returncode == 0, child.stderr
    seen = {(fswatch.Change(kind), path) for kind, path in json.loads(child.stdout)}
    assert (fswatch.Change.added, str(root / "sub" / "before.md")) in seen
    assert str(root / "sub" / "edited.md") in _paths(seen)
