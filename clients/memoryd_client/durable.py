"""Making a rename durable: one `fsync_dir` for the daemon (`memoryd.fsutil`) and memctl's
atomic writes (`memctl.files`). Standard library only, so memctl stays light.

A file synced and renamed into place is not on disk until its folder is synced too: a power
cut right after the rename can take it back.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink in `path` durable (best effort: some filesystems refuse)."""
    with contextlib.suppress(OSError):
        # O_DIRECTORY | O_NONBLOCK: a FIFO swapped in for the folder (a pull fsyncs its folders
        # at the end of a page) would hold a plain open for ever; now it is refused at once.
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
