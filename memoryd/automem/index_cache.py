"""MEMORY.md (or team/MEMORY.md) cut to its caps as `get_context` shows it, kept per file stat."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from memoryd.automem import index as index_mod
from memoryd.automem.layout import index_path, read_index
from memoryd.automem.stamps import Stat, stamp_of


@dataclass(frozen=True)
class IndexText:
    """MEMORY.md (or team/MEMORY.md) as it enters `get_context`."""

    path: Path
    text: str  # after the line/byte cut, with the warning when cut
    truncated: bool


class IndexTexts:
    def __init__(self) -> None:
        self._cache: dict[Path, tuple[Stat, IndexText]] = {}

    def get(self, memory_dir: Path, *, team: bool = False) -> IndexText | None:
        """The cut index; None when it is not a file. A warm call costs one `stat`."""
        path = index_path(memory_dir, team=team)
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError:
            read_index(path)  # raises what reading it raises, as it always did
            return None
        if not stat.S_ISREG(st.st_mode):
            read_index(path)  # a directory raises; anything else is no index
            return None
        stamp = stamp_of(st)
        cached = self._cache.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        cut = index_mod.truncate(read_index(path), st.st_size)
        view = IndexText(path, cut.text, cut.truncated)
        self._cache[path] = (stamp, view)
        return view
