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


def backup(path: Path, folder: Path | None = None) -> Path:
    """Copy `path` to `<folder>/<name>.memctl-backup-<time>` (default: beside it) and return the
    copy's path. The copy is created with the original's mode (O_EXCL, never through a link), so
    a private file's backup is never readable by others, not even while it is being written."""
    import time

    folder = path.parent if folder is None else folder
    stamp = time.strftime("%Y%m%d-%H%M%S")
    source = os.stat(path)
    data = path.read_bytes()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    counter = 1
    while True:
        suffix = "" if counter == 1 else f"-{counter}"
        target = folder / f"{path.name}.memctl-backup-{stamp}{suffix}"
        try:
            fd = os.open(target, flags, source.st_mode & 0o777)
        except FileExistsError:
            counter += 1
            continue
        break
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), source.st_mode & 0o777)  # the umask took bits off
            handle.write(data)
        os.utime(target, ns=(source.st_atime_ns, source.st_mtime_ns))
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    return target
