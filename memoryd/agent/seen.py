"""What one background agent run has seen of each file: a write needs a fresh read first.

As Claude Code's own Write and Edit: the agent may replace, edit or retire a file that exists
only if it read it in this run (or the caller put its text in the prompt and noted it) and the
file is unchanged since. A write built from a stale read would silently revert what someone
else wrote meanwhile (a `memory.write` made while the model was thinking). A file that does not
exist needs no read. A file is known by its stamp `(mtime_ns, size, inode)`, taken just before
it is read and just after the agent's own write.
"""

from __future__ import annotations

import os
from pathlib import Path

Stamp = tuple[int, int, int]  # (mtime_ns, size, inode)


def stamp_of(path: Path) -> Stamp | None:
    """The stamp of the file at `path` (a link is not followed); None when nothing is there."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class SeenFiles:
    """The stamps of the files one agent run read or wrote, by real path."""

    __slots__ = ("_stamps",)

    def __init__(self) -> None:
        self._stamps: dict[Path, Stamp] = {}

    def note(self, path: Path, stamp: Stamp | None) -> None:
        """The agent has seen `path` as `stamp` (None: it is gone, e.g. the agent removed it)."""
        if stamp is None:
            self._stamps.pop(path, None)
        else:
            self._stamps[path] = stamp

    def note_now(self, path: Path) -> None:
        self.note(path, stamp_of(path))

    def problem(self, path: Path, *, shown: Path | None = None) -> str | None:
        """Why the agent may not write or remove `path` now, or None; the reason names it
        `shown` if given (as the model gave it, not its real path). Asked under the writer
        lock right before the write, so no other writer comes between the check and it."""
        now = stamp_of(path)
        seen = self._stamps.get(path)
        named = shown or path
        if seen is None:
            if now is None:
                return None  # a new file: nothing to overwrite
            return (
                f"{named} exists and you have not read it in this run: Read it first, then make "
                "your change on what it says"
            )
        if now == seen:
            return None
        if now is None:
            return f"{named} was deleted since you read it (by someone else): leave it deleted"
        return (
            f"{named} changed since you read it (someone else wrote it meanwhile): Read it "
            "again, then make your change on what it says now"
        )
