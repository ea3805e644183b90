"""`fsutil.flock_tries`: the one lock-file wait of the writer locks, the team sync state and
the vector store (each had a loop of its own)."""

from __future__ import annotations

import fcntl
import itertools
import os
from pathlib import Path

import pytest

from memoryd.fsutil import flock_tries, open_lock_file


def test_it_waits_doubling_while_another_holds_it_and_ends_once_taken(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "a.lock"
    other = open_lock_file(path)  # another open file description: another holder to flock
    mine = open_lock_file(path)
    third = open_lock_file(path)
    try:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        tries = flock_tries(mine, first_s=0.001, most_s=0.004)
        assert list(itertools.islice(tries, 4)) == [0.001, 0.002, 0.004, 0.004]
        os.close(other)  # the holder lets go: the next try takes it
        other = -1
        assert next(tries, None) is None
        with pytest.raises(BlockingIOError):  # held by `mine` now
            fcntl.flock(third, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert list(flock_tries(mine, first_s=1.0, most_s=1.0)) == []  # held: taken at once
    finally:
        for fd in (other, mine, third):
            if fd >= 0:
                os.close(fd)
