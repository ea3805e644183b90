"""File-change events, read through watchfiles with the options every memoryd watcher uses.

Both watchers in the daemon (the rules' folder watcher, each team folder's) read changes
through `watch`: no filter (each decides what it ignores), folders it may not read skipped,
debounce and step in milliseconds, stopped by an event. watchfiles is imported on first use,
so a daemon that watches nothing never loads it.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import AsyncIterator
from pathlib import Path


class Change(enum.IntEnum):
    """The kind of a change; the same values as `watchfiles.Change`."""

    added = 1
    modified = 2
    deleted = 3


Changes = set[tuple[Change, str]]  # (kind, path as the OS reported it)


async def watch(
    *paths: Path, stop: asyncio.Event, recursive: bool, debounce_ms: int, step_ms: int
) -> AsyncIterator[Changes]:
    """Batches of changes under `paths` until `stop` is set. Raises what watchfiles raises
    (RuntimeError, OSError) when the OS watch cannot be set up or dies."""
    import watchfiles

    async for batch in watchfiles.awatch(
        *paths,
        stop_event=stop,
        watch_filter=None,
        debounce=debounce_ms,
        step=step_ms,
        recursive=recursive,
        ignore_permission_denied=True,
    ):
        yield {(Change(int(kind)), path) for kind, path in batch}
