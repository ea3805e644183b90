"""`os.stat` facts that change whenever a file's content or identity does: cache keys."""

from __future__ import annotations

import os
from pathlib import Path

Stat = tuple[int, int, int, int, int] | tuple[str, int]


def stamp_of(st: os.stat_result) -> Stat:
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_dev)


def stat_stamp(path: Path) -> Stat:
    """The stamp of `path`, or of the error that stat-ing it raised (a missing file too)."""
    try:
        return stamp_of(os.stat(path))
    except OSError as exc:
        return (type(exc).__name__, exc.errno or 0)
