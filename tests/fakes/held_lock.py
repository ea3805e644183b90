"""Another daemon holding a lock file, stopped (Ctrl-Z): an exclusive flock taken on another
open file of the lock, which this process's own flock on the file is refused as another
process's would be. And a call made meanwhile, in a thread, so that one that waits for ever
fails the test instead of hanging it.

    with held_lock(folder / "x.lock"):
        outcome = outcome_of(lambda: save(...))   # its result, or the exception it raised
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


@contextmanager
def held_lock(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # and the lock with it


def outcome_of(call: Callable[[], T], deadline_s: float = 60.0) -> T | Exception:
    """`call()`'s result or the exception it raised, run in a thread; the test fails when it
    has not returned within `deadline_s` (a generous bound: the calls give up far sooner)."""
    outcome: list[T | Exception] = []

    def run() -> None:
        try:
            outcome.append(call())
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(deadline_s)
    assert not thread.is_alive(), "still waiting on the lock"
    return outcome[0]
