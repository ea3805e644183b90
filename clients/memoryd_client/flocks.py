"""Taking a lock file's `flock` by polling it: the one wait shared by the daemon's locks (the
writer locks, the team sync state, the vector store, the model conversion) and `memctl`'s start
lock, each of which had a loop of its own. Standard library only, as every client module."""

from __future__ import annotations

import fcntl
import time
from collections.abc import Iterator


def flock_tries(fd: int, *, first_s: float, most_s: float) -> Iterator[float]:
    """Take `fd`'s exclusive `flock` without blocking in it: while another process holds it,
    yields how long to wait before the next try (from `first_s`, doubling to `most_s`); ends
    once it is taken. The caller waits (an event loop's sleep or a thread's), or gives up by
    leaving the loop: a blocking flock could be neither cancelled nor bounded, and a holder
    stopped (Ctrl-Z) holds it for ever. Another error of flock's (ENOLCK) is raised."""
    delay = first_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        yield delay  # outside the except: a caller's own error is not chained to it
        delay = min(delay * 2, most_s)


def flock_within(fd: int, seconds: float, *, most_s: float = 0.05) -> bool:
    """Take `fd`'s exclusive `flock` in a thread (`flock_tries`, sleeping between tries at
    most `most_s`), waiting at most `seconds`; whether it was taken. The caller that gives
    up says so: a holder stopped (Ctrl-Z) held a blocking flock's thread for ever."""
    deadline = time.monotonic() + seconds
    for delay in flock_tries(fd, first_s=min(0.05, most_s), most_s=most_s):
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(delay, left))
    return True
