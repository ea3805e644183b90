"""Running code that may never end (a reading gone quadratic on hostile input) in a process of
its own, so that it cannot hold the test run: done in a moment, or failed at the timeout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def output_of(code: str, timeout_s: float = 120) -> str:
    """What `code` (run by this Python, in the repository) prints, stripped."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=True,
        cwd=REPO,
    )
    return done.stdout.strip()
