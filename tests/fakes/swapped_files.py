"""Files swapped after a scan, for the tests of every reader that opens what a scan found:
a FIFO (whose open would block forever) and a symbolic link out of the folder."""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

# What the FIFO gives a reader that opened it: a memory index line, so a test sees it arrive.
FIFO_LINE = b"- [Read through a FIFO](fifo.md)\n"


def fifo_released_later(path: Path, after_s: float = 3.0) -> Path:
    """A FIFO at `path`. A reader that opens it blocking would hang for good; so that a test
    of such a reader fails instead of hanging, a writer feeds every reader one line, from
    `after_s` on, for 30 s, or until the path is no FIFO any more (removed, or replaced by the
    reader's own file: a write would land in it)."""
    os.mkfifo(path, 0o600)

    def release() -> None:
        time.sleep(after_s)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if not stat.S_ISFIFO(os.lstat(path).st_mode):
                    return
            except OSError:
                return
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: nobody reading (the reader refused it), or it is gone
                time.sleep(0.05)
                continue
            with contextlib.suppress(OSError):
                os.write(fd, FIFO_LINE)
            os.close(fd)
            time.sleep(0.05)

    threading.Thread(target=release, daemon=True).start()
    return path


@contextlib.contextmanager
def fifo_readers_freed(fifo: Path, after_s: float = 30.0) -> Iterator[list[int]]:
    """For a test that a reader never waits on the FIFO `fifo` (an open that blocks until a
    writer comes): from `after_s` on, while the block runs, opens and closes the FIFO's write
    end every 0.05 s, which fails (ENXIO) unless a reader has it open, and frees a reader
    blocked on it (end of file), so the test fails instead of hanging. Yields the list of the
    opens that found a reader: empty unless a reader was still at the FIFO after `after_s`.
    What shows the bug is that count, not how long the reader took."""
    freed: list[int] = []
    done = threading.Event()

    def free_readers() -> None:
        if done.wait(after_s):
            return
        while not done.wait(0.05):
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: no reader
                continue
            os.close(fd)
            freed.append(fd)

    thread = threading.Thread(target=free_readers, daemon=True)
    thread.start()
    try:
        yield freed
    finally:
        done.set()
        thread.join()


def symlink_out(path: Path, outside: Path) -> Path:
    """`path` becomes a symbolic link to `outside` (a file the reader must never show)."""
    outside.write_text("SECRET outside the folder\n")
    path.unlink(missing_ok=True)
    path.symlink_to(outside)
    return path
