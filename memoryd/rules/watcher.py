"""Watching a growing set of folders (non-recursively) through `memoryd.fswatch`.

An OS watch takes its paths once, at the start, so a new folder means a new watcher: the
new generation starts, proves it is live — it must see a probe file this process writes
into a private folder it also watches — and only then replaces the old one. `armed` is
the set of folders a live watcher is known to cover (not those it could not watch: no
permission); a cache entry is trusted without re-statting only when all of its folders are
in it. When events may have been lost — the OS queue overflowed, or the live generation died —
`on_lost` is told: what was trusted must be checked again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from memoryd import fswatch

log = structlog.get_logger("memoryd.rules.watcher")

# Low debounce: an edit must reach the next `get_context` well within 300 ms.
DEBOUNCE_MS = 50
STEP_MS = 20
ARM_TIMEOUT_S = 5.0
_PROBE_EVERY_S = 0.025
_MAX_FAILURES = 3
# After that many failures in a row, the next attempt waits this long, doubling to the cap.
FALLBACK_RETRY_S = 5.0
FALLBACK_RETRY_CAP_S = 300.0
_PROBE_PREFIX = "memoryd-watch-"
# Folders watched beyond what the cached entries need before the set is cut back to them.
_RETAIN_SLACK = 64


def make_probe_dir(parent: Path | None = None) -> Path:
    """A private folder for the probe files, named by this process.

    A daemon that was killed never removes its own, so the probe folders of this user's
    processes that are gone are removed here first (a folder is in the system's temp folder,
    which may be cleared only at boot).
    """
    base = Path(parent if parent is not None else tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for entry in os.scandir(base):
            if entry.name.startswith(_PROBE_PREFIX) and _is_stale_probe_dir(entry):
                shutil.rmtree(entry.path, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{_PROBE_PREFIX}{os.getpid()}-", dir=base))


def _is_stale_probe_dir(entry: os.DirEntry[str]) -> bool:
    pid_text = entry.name[len(_PROBE_PREFIX) :].partition("-")[0]
    if not pid_text.isdigit():
        return False  # not one named by a process (an older version's): leave it
    try:
        if entry.is_symlink() or not entry.is_dir() or entry.stat().st_uid != os.getuid():
            return False
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):
        return False  # alive under another user, or unreadable: not ours to judge
    return False


@dataclass(eq=False)  # identity: generations live in a set
class _Generation:
    number: int
    dirs: frozenset[Path]
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    armed: asyncio.Event = field(default_factory=asyncio.Event)
    unwatched: set[Path] = field(default_factory=set)  # folders the OS would not watch
    task: asyncio.Task[None] | None = None


class DirWatcher:
    def __init__(
        self,
        on_change: Callable[[set[Path]], None],
        on_error: Callable[[str], Awaitable[None]],
        *,
        on_lost: Callable[[], None],
        debounce_ms: int = DEBOUNCE_MS,
        step_ms: int = STEP_MS,
        probe_parent: Path | None = None,
    ) -> None:
        self._on_change = on_change
        self._on_error = on_error
        self._on_lost = on_lost
        self._debounce_ms = debounce_ms
        self._step_ms = step_ms
        self._wanted: set[Path] = set()
        self.armed: frozenset[Path] = frozenset()
        self._armed_ancestors: frozenset[Path] = frozenset()  # and the armed folders
        self._dirty = asyncio.Event()
        self._closed = False
        self._numbers = 0
        self._current: _Generation | None = None
        self._live: set[_Generation] = set()  # every generation not finished yet
        self._supervisor: asyncio.Task[None] | None = None
        self._probe_dir = make_probe_dir(probe_parent)
        self.restarts = 0
        self.failed: str | None = None

    async def start(self) -> None:
        self._supervisor = asyncio.create_task(self._supervise(), name="rules-watcher")

    def covers(self, dirs: frozenset[Path]) -> bool:
        # And still wanted: folders let go of stay armed until the next generation arms.
        return dirs <= self.armed and dirs <= self._wanted

    @property
    def wanted(self) -> int:
        """How many folders it is asked to watch."""
        return len(self._wanted)

    def ensure(self, dirs: Iterable[Path]) -> None:
        """Watch these folders too (a restart, unless all are watched already)."""
        new = set(dirs) - self._wanted
        if new:
            self._wanted |= new
            self._dirty.set()

    def retain(self, dirs: Iterable[Path], *, now: bool = False) -> None:
        """Watch only these folders (those of the entries still cached), once the watched set
        is well over them (or `now`): a restart per dropped entry would be churn, never
        dropping a leak (every folder a client ever reported held an inotify watch for good)."""
        keep = set(dirs)
        if now or len(self._wanted) > 2 * len(keep) + _RETAIN_SLACK:
            self._wanted = keep
            self._dirty.set()

    async def close(self) -> None:
        self._closed = True
        tasks: list[asyncio.Task[None]] = []
        if self._supervisor is not None:
            self._supervisor.cancel()
            tasks.append(self._supervisor)
        for generation in list(self._live):
            generation.stop.set()
            if generation.task is not None:
                tasks.append(generation.task)
        await asyncio.gather(*tasks, return_exceptions=True)
        shutil.rmtree(self._probe_dir, ignore_errors=True)

    # -- generations ----------------------------------------------------------------------
    async def _supervise(self) -> None:
        failures = 0
        retry = FALLBACK_RETRY_S
        while not self._closed:
            await self._dirty.wait()
            self._dirty.clear()
            await asyncio.sleep(0.01)  # let a burst of ensure() calls coalesce
            self._dirty.clear()
            # A stat per folder, rarely (on restarts): not worth a thread hop.
            dirs = frozenset(d for d in self._wanted if os.path.isdir(d))  # noqa: ASYNC240
            self._wanted = set(dirs)
            generation = await self._start_generation(dirs)
            if generation is not None:
                if self.failed is not None:
                    log.info("the file watcher started again")
                failures = 0
                retry = FALLBACK_RETRY_S
                self.failed = None
                continue
            failures += 1
            if failures >= _MAX_FAILURES:
                # Told once while it lasts: the watch limit reached stays reached for hours,
                # and each retry told every subscriber again (a worker/error every 5 s).
                if self.failed is None:
                    self.failed = "the file watcher could not start; falling back to stat checks"
                    await self._on_error(self.failed)
                failures = 0
                await asyncio.sleep(retry)
                retry = min(retry * 2, FALLBACK_RETRY_CAP_S)
            else:
                await asyncio.sleep(0.1 * failures)
            self._dirty.set()

    async def _start_generation(self, dirs: frozenset[Path]) -> _Generation | None:
        self._numbers += 1
        generation = _Generation(self._numbers, dirs)
        generation.task = asyncio.create_task(
            self._run(generation), name=f"rules-watch-{generation.number}"
        )
        self._live.add(generation)
        generation.task.add_done_callback(lambda _: self._live.discard(generation))
        probe = self._probe_dir / f"gen-{generation.number}"
        deadline = asyncio.get_running_loop().time() + ARM_TIMEOUT_S
        tick = 0
        while not generation.armed.is_set() and not generation.task.done():
            if asyncio.get_running_loop().time() > deadline:
                break
            tick += 1
            with contextlib.suppress(OSError):
                probe.write_text(str(tick))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(generation.armed.wait(), _PROBE_EVERY_S)
        with contextlib.suppress(OSError):
            probe.unlink()
        if not generation.armed.is_set():
            generation.stop.set()
            with contextlib.suppress(Exception):
                await generation.task
            return None
        previous, self._current = self._current, generation
        self._set_armed(dirs - generation.unwatched)
        self.restarts += 1
        if previous is not None:
            previous.stop.set()
        return generation

    async def _run(self, generation: _Generation) -> None:
        probe_name = f"gen-{generation.number}"
        probe_dir = str(self._probe_dir)  # as the watch reports the paths in it
        try:
            async for changes in fswatch.watch(
                *generation.dirs,
                self._probe_dir,
                stop=generation.stop,
                recursive=False,
                debounce_ms=self._debounce_ms,
                step_ms=self._step_ms,
                unwatched=generation.unwatched,
            ):
                if fswatch.LOST in changes and generation is self._current:
                    log.warning("file events lost (the OS queue overflowed)")
                    self._on_lost()
                # Each path once, as text first: a file written is reported created and
                # modified, and a checkout's 20,000 files made 40,000 paths to parse.
                kinds: dict[str, bool] = {}  # path -> created, deleted or renamed
                for change, raw in changes:
                    if change != fswatch.Change.lost:
                        kinds[raw] = kinds.get(raw, False) or change != fswatch.Change.modified
                changed: set[Path] = set()
                moved: set[Path] = set()
                for raw, was_moved in kinds.items():
                    if os.path.dirname(raw) == probe_dir:
                        if os.path.basename(raw) == probe_name:
                            generation.armed.set()
                        continue
                    path = Path(raw)
                    changed.add(path)
                    if was_moved:
                        moved.add(path)
                if moved:
                    self._forget_moved(moved)
                if changed & generation.unwatched and generation is self._current:
                    self._dirty.set()  # a folder it could not watch changed: maybe it can now
                if changed:
                    self._on_change(changed)
        except Exception as exc:
            if self.failed is None:  # once the fallback is reported, retries fail quietly
                log.warning(
                    "watcher generation failed", generation=generation.number, error=str(exc)
                )
            if generation is self._current:
                self._set_armed(frozenset())
                self._on_lost()  # what changed until the next generation arms goes unseen
                self._dirty.set()

    def _set_armed(self, dirs: frozenset[Path]) -> None:
        self.armed = dirs
        self._armed_ancestors = with_parents(dirs)

    def _forget_moved(self, moved: set[Path]) -> None:
        """A watched folder created, deleted or renamed: its watch is gone or stale."""
        hits = {m for m in moved if m in self.armed or m in self._armed_ancestors}
        if not hits:
            return
        stale = {d for d in self.armed if any(d == m or d.is_relative_to(m) for m in hits)}
        self._set_armed(self.armed - stale)
        self._dirty.set()


def with_parents(dirs: Iterable[Path]) -> frozenset[Path]:
    """`dirs` and every folder above them. Each walk up stops at a folder already in: the
    parents of each of a 1,000-deep cwd's folders, listed whole, were half a million paths
    (seconds of every such `get_context`)."""
    found: set[Path] = set()
    for folder in dirs:
        while folder not in found:
            found.add(folder)
            folder = folder.parent
    return frozenset(found)
