"""The warm view of each memory dir (`DirState`): first load and periodic sweep in the background.

On the event loop, a periodic full sweep that is due runs in the background (every file
stat'ed and compared in a thread, only the differences applied on the loop, in slices) instead
of on the request; the cheap directory check (created, deleted, replaced files) always runs on
the request, and so does the first load unless `warm` got there first. When that check finds
more than CATCH_UP_OVER files to read (a team pull), they are read in slices in the background
(`ready` waits for them).

At most MAX_WARM_DIRS dirs are kept loaded, the least recently used let go first (one not
loading): a dir's parsed memories and recall index take ~90 KB per memory, and a daemon that
runs for months sees hundreds of projects, most of them never again (deleted ones too). A
dir let go is loaded again, in the background as at first, when its project comes back.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

from memoryd.automem.recall.ranker import RankerParams
from memoryd.automem.store import DirState, Pending, Seen, scan_changes, scan_tree

WORKER = "automem"
WARM_SLICE_S = 0.004  # the first load of a memory dir yields to the event loop this often
# A file younger than this with no index line may be a writer's between its file and its
# index line (Claude Code writes both itself); the periodic sweep leaves it alone until then.
ORPHAN_GRACE_S = 10.0
# A readdir-only sweep (on any access) that finds more files than this to read leaves them to
# a background load in slices: a team pull's 10,000 new files held the loop 7.7 s.
CATCH_UP_OVER = 64
# Memory dirs kept loaded at once: a user's projects in use, with room to spare.
MAX_WARM_DIRS = 32

Spawn = Callable[[Coroutine[Any, Any, Any]], "asyncio.Task[Any]"]


class DirStates:
    def __init__(self, spawn: Spawn) -> None:
        self._spawn = spawn  # supervised background work (the host's, under WORKER)
        self.sweep_interval_s = 2.0
        self.ranker_params = RankerParams()
        self.states: OrderedDict[Path, DirState] = OrderedDict()  # least recently used first
        self.warming: dict[Path, asyncio.Task[Any]] = {}
        # Called with a dir let go (`MAX_WARM_DIRS`): views derived from it are dropped too.
        self.on_evict: list[Callable[[Path], None]] = []
        # Run on a dir's first access in this daemon's life (grace 0) and after each
        # background sweep (grace ORPHAN_GRACE_S): indexes files that have no index line.
        self.index_orphans: Callable[[Path, float], Coroutine[Any, Any, Any]] | None = None
        self._orphans_checked: set[Path] = set()

    def _state(self, memory_dir: Path) -> DirState:
        state = self.states.get(memory_dir)
        if state is None:
            state = DirState(
                memory_dir, sweep_interval_s=self.sweep_interval_s, params=self.ranker_params
            )
            self.states[memory_dir] = state
            self._evict(keep=memory_dir)
        else:
            self.states.move_to_end(memory_dir)
        state.sweep_interval_s = self.sweep_interval_s
        return state

    def _evict(self, *, keep: Path) -> None:
        """Let go of the least recently used dirs over MAX_WARM_DIRS (never `keep`, nor one
        loading: `ready` waits for that one's state)."""
        over = len(self.states) - MAX_WARM_DIRS
        for memory_dir in [d for d in self.states if d != keep and d not in self.warming]:
            if over <= 0:
                break
            del self.states[memory_dir]
            over -= 1
            for callback in self.on_evict:
                callback(memory_dir)

    def state(self, memory_dir: Path) -> DirState:
        """The dir's store, up to date (see the module's docstring for what runs where)."""
        state = self._state(memory_dir)
        if state.swept and state.sweep_interval_s > 0 and state.sweep_due() and on_loop():
            state.mark_sweep_started()
            self._spawn(self._sweep_in_background(state))
        # Many files to read (a team pull, a copy by hand): read in slices in the background,
        # which `ready` waits for; this call sees the dir as it was, less what is gone.
        pending = state.refresh(defer_over=CATCH_UP_OVER if state.swept and on_loop() else None)
        if pending:
            self._catch_up(state, pending)
        if self.index_orphans is not None and memory_dir not in self._orphans_checked and on_loop():
            # First access in this daemon's life (e.g. after a kill -9): files that a killed
            # writer left without an index line get one now, however young.
            self._orphans_checked.add(memory_dir)
            self._spawn(self.index_orphans(memory_dir, 0.0))
        return state

    def _catch_up(self, state: DirState, pending: Pending) -> None:
        memory_dir = state.memory_dir
        before = self.warming.get(memory_dir)

        async def load() -> None:
            try:
                if before is not None:
                    await asyncio.wait({before})
                await in_slices(state.load_pending_steps(pending))
            finally:
                if self.warming.get(memory_dir) is task:
                    del self.warming[memory_dir]

        task = self.warming[memory_dir] = self._spawn(load())

    async def _sweep_in_background(self, state: DirState) -> None:
        changes = await asyncio.to_thread(scan_changes, state.memory_dir, state.snapshot())
        await in_slices(state.apply_steps(changes))
        if self.index_orphans is not None:
            await self.index_orphans(state.memory_dir, ORPHAN_GRACE_S)

    def warm(self, memory_dir: Path) -> None:
        """Load a memory dir that was never loaded, in the background, in slices that leave
        the event loop free (the first full load parses every file: ~0.2 s per 1,000)."""
        if memory_dir in self.warming or not on_loop():
            return
        state = self._state(memory_dir)
        if not state.swept:
            self.warming[memory_dir] = self._spawn(self._warm(state))

    async def _warm(self, state: DirState) -> None:
        try:
            started = time.monotonic()
            seen = await asyncio.to_thread(_scan_with_numpy, state.memory_dir)
            await in_slices(state.load_steps(seen, started))
        finally:
            self.warming.pop(state.memory_dir, None)

    async def ready(self, memory_dir: Path) -> DirState:
        """`state`, after waiting for a background first load of the dir to finish (rather
        than doing the rest of it at once on this call)."""
        task = self.warming.get(memory_dir)
        if task is None and memory_dir in self.states and self.states[memory_dir].swept:
            self.state(memory_dir)  # files to read in slices (`state`): waited for too
            task = self.warming.get(memory_dir)
        if task is not None:
            await asyncio.wait({task})
        return self.state(memory_dir)

    def invalidate(self, memory_dir: Path | None = None) -> None:
        """Forget what is known of one dir's files (every dir's with None)."""
        if memory_dir is None:
            for state in self.states.values():
                state.invalidate()
        elif memory_dir in self.states:
            self.states[memory_dir].invalidate()


def _scan_with_numpy(memory_dir: Path) -> Seen:
    """`scan_tree`, and numpy imported when it found memories: the recall index imports it
    with its first memory (lazily, for the daemon's idle memory), which held the event loop
    43-69 ms in one step; in this thread the loop waits ~20 ms at most."""
    seen = scan_tree(memory_dir)
    if seen:
        import numpy  # noqa: F401

    return seen


async def in_slices(steps: Iterator[None]) -> None:
    """Run `steps`, yielding to the event loop every WARM_SLICE_S."""
    deadline = time.perf_counter() + WARM_SLICE_S
    for _ in steps:
        if time.perf_counter() >= deadline:
            await asyncio.sleep(0)
            deadline = time.perf_counter() + WARM_SLICE_S


def on_loop() -> bool:
    """Is an event loop running in this thread (background work can be spawned)?"""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
