"""Folders memoryd and its clients create are 0700, parents included (docs/security.md). One
function for the daemon (`memoryd.fsutil`) and memctl; standard library only.

`Path.mkdir(parents=True, mode=0o700)` gives the mode to the last folder only: the parents it
creates get the umask's default (0755 under 022), so `~/.config` of a fresh account was readable
by every user.
"""

from __future__ import annotations

import contextlib
from pathlib import Path


def make_private_dirs(path: Path, mode: int = 0o700) -> list[Path]:
    """Create `path` and each missing folder above it with exactly `mode` (0700); folders that
    exist keep their mode (they are not ours to change). The folders created, outermost first.
    OSError when one cannot be created (a file in the way: FileExistsError)."""
    missing: list[Path] = []
    current = path
    while not current.is_dir() and current.parent != current:
        missing.append(current)
        current = current.parent
    created: list[Path] = []
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=mode)
        except FileExistsError:
            if not folder.is_dir():
                raise
            continue  # made meanwhile by someone else: theirs, left as it is
        with contextlib.suppress(PermissionError):
            folder.chmod(mode)  # the umask may have taken bits off
        created.append(folder)
    return created
