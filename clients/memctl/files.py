"""Writing the user's files safely: atomically, keeping a backup, never through a symlink.

`memctl service` and `memctl claude-code` write into the user's config (unit files, Claude Code
settings). A write goes to a temporary file in the same directory and is renamed over the
target, so a crash leaves the old file or the new one, never half of either.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_atomic(
    path: Path, text: str, mode: int = 0o644, dir_mode: int = 0o755, *, durable: bool = True
) -> None:
    """Replace `path` with `text`; `durable` also syncs it to disk first (skip for caches)."""
    import tempfile  # only when something is written: slow to import

    path.parent.mkdir(parents=True, exist_ok=True, mode=dir_mode)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_text(path: Path) -> str | None:
    """The file's text, None when it does not exist."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def backup(path: Path) -> Path:
    """Copy `path` to `path.memctl-backup-<time>` (mode kept) and return the copy's path."""
    import shutil
    import time

    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.memctl-backup-{stamp}")
    counter = 1
    while target.exists():
        counter += 1
        target = path.with_name(f"{path.name}.memctl-backup-{stamp}-{counter}")
    shutil.copy2(path, target)
    return target
