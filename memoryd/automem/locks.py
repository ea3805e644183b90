"""One writer lock per memory dir.

Every writer of a memory directory (the service, the extraction and dream agents) holds it
while it writes files there or `MEMORY.md`, so writes are serialised per directory and the
index never loses a line.
"""

from __future__ import annotations

import asyncio
from pathlib import Path


class WriterLocks:
    def __init__(self) -> None:
        self._locks: dict[Path, asyncio.Lock] = {}

    def __call__(self, memory_dir: Path) -> asyncio.Lock:
        return self._locks.setdefault(memory_dir, asyncio.Lock())
