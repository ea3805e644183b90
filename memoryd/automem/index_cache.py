"""MEMORY.md (or team/MEMORY.md) cut to its caps as `get_context` shows it, kept per file stat.

Bounded: the most recently used MAX_CACHED_INDEXES indexes (a daemon that runs for months
sees hundreds of projects), and an index found gone is dropped at once.
"""

from __future__ import annotations

import os
import stat
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from memoryd.automem import index as index_mod
from memoryd.automem.layout import index_path, read_index
from memoryd.automem.stamps import Stat, stamp_of

MAX_CACHED_INDEXES = 128  # each up to the index caps' 25 KB of text


@dataclass(frozen=True)
class IndexText:
    """MEMORY.md (or team/MEMORY.md) as it enters `get_context`."""

    path: Path
    text: str  # after the line/byte cut, with the warning when cut
    truncated: bool


class IndexTexts:
    def __init__(self) -> None:
        self._cache: OrderedDict[Path, tuple[Stat, IndexText]] = OrderedDict()

    def get(self, memory_dir: Path, *, team: bool = False) -> IndexText | None:
        """The cut index; None when it is not a file. A warm call costs one `stat`."""
        path = index_path(memory_dir, team=team)
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            self._cache.pop(path, None)
            return None
        except OSError:
            self._cache.pop(path, None)
            read_index(path)  # raises what reading it raises, as it always did
            return None
        if not stat.S_ISREG(st.st_mode):
            self._cache.pop(path, None)
            read_index(path)  # a directory raises; anything else is no index
            return None
        stamp = stamp_of(st)
        cached = self._cache.get(path)
        if cached is not None and cached[0] == stamp:
            self._cache.move_to_end(path)
            return cached[1]
        cut = index_mod.truncate(read_index(path), st.st_size)
        view = IndexText(path, cut.text, cut.truncated)
        self._cache[path] = (stamp, view)
        self._cache.move_to_end(path)
        while len(self._cache) > MAX_CACHED_INDEXES:
            self._cache.popitem(last=False)
        return view

    def forget(self, memory_dir: Path) -> None:
        """Drop the dir's indexes (own and team), when the dir itself is let go of."""
        for team in (False, True):
            self._cache.pop(index_path(memory_dir, team=team), None)

    def __len__(self) -> int:
        return len(self._cache)
