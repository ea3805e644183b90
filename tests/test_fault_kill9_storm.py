"""The kill -9 write storm (`bench/fault_kill9_storm.py`), two rounds, against the real daemon:
no acknowledged write lost, no torn file, no orphan left unindexed after a restart."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_a_killed_write_storm_loses_tears_and_orphans_nothing() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "fault_kill9_storm.py"), "--rounds", "2"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    summary = done.stdout.strip().splitlines()[-1]
    found = re.search(
        r"(\d+) writes acknowledged: acknowledged writes lost (\d+), torn files (\d+), "
        r"orphans left unindexed after restart (\d+)",
        summary,
    )
    assert found, done.stdout + done.stderr
    acknowledged, lost, torn, orphans = map(int, found.groups())
    assert acknowledged > 0  # the storm did write before it was killed
    assert (lost, torn, orphans) == (0, 0, 0), done.stdout
    assert done.returncode == 0
