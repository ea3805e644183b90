"""How a memory dir is laid out: keys relative to it, `team/` inside it, a MEMORY.md in each."""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TypeVar

from memoryd.agent.modes import protected_refusal, rewrite_mode
from memoryd.automem import index as index_mod
from memoryd.automem.store import TEAM_DIR
from memoryd.errors import ForbiddenPath, TooLarge
from memoryd.fsutil import (
    ChangedMeanwhile,
    NotRegularFile,
    atomic_write_bytes,
    put_back_unless,
    read_regular_file,
    save_stamp,
    unchanged_since,
)


def is_team(key: str) -> bool:
    return key.startswith(f"{TEAM_DIR}/")


def index_file(key: str, team: bool) -> str:
    """The key as the index of its folder names it (team keys lose their `team/`)."""
    return key[len(TEAM_DIR) + 1 :] if team else key


def index_path(memory_dir: Path, *, team: bool) -> Path:
    """MEMORY.md, or team/MEMORY.md."""
    return (memory_dir / TEAM_DIR if team else memory_dir) / index_mod.INDEX_NAME


def on_disk(folder: Path, known: Collection[str] = ()) -> index_mod.Exists:
    """Whether a name an index line gives exists in the index's `folder` (a name of `known`,
    the memories loaded, is taken to without a `stat`); a link to itself or a folder counts."""

    def exists(name: str) -> bool:
        if name in known:
            return True
        try:
            return os.path.lexists(folder / name)
        except (OSError, ValueError):  # a NUL in the name, a name too long
            return False

    return exists


class IndexIsAFolder(ForbiddenPath):
    """A folder where MEMORY.md belongs: never read as an index, never replaced by one."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            f"{path} is a folder where the index belongs; memoryd will not replace it with one: "
            "move it away, then write again"
        )


def _index_bytes(path: Path) -> bytes:
    """MEMORY.md's bytes, at most MAX_INDEX_READ_BYTES + 1, opened without following a symlink
    or blocking on a FIFO swapped in for it (either is no index: b""); a folder in its place
    raises IndexIsAFolder."""
    try:
        return read_regular_file(path, index_mod.MAX_INDEX_READ_BYTES)
    except IsADirectoryError as exc:
        raise IndexIsAFolder(path) from exc
    except (FileNotFoundError, NotADirectoryError, NotRegularFile):
        return b""
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return b""
        raise


def read_index(path: Path) -> str:
    """MEMORY.md as far as a prompt can need it (its cut keeps far less than the read cap);
    "" when there is none."""
    return _index_bytes(path)[: index_mod.MAX_INDEX_READ_BYTES].decode("utf-8", errors="replace")


def check_index_size(path: Path) -> None:
    """TooLarge for a MEMORY.md over MAX_INDEX_READ_BYTES: memoryd never rewrites (so never
    cuts) an index it does not read whole; the user trims it, nothing is lost meanwhile."""
    try:
        size = os.stat(path, follow_symlinks=False).st_size
    except OSError:
        return
    if size > index_mod.MAX_INDEX_READ_BYTES:
        raise TooLarge(
            f"{path} is {size:,} bytes; memoryd keeps an index of at most "
            f"{index_mod.MAX_INDEX_READ_BYTES:,} bytes up to date: trim it (one short line per "
            "memory), then write again"
        )


def read_index_for_rewrite(path: Path) -> str:
    """The whole of MEMORY.md before a rewrite (TooLarge over the cap, never cut). Bytes that
    are not UTF-8 (a line saved in cp1252) are kept as they are: decoded with surrogateescape,
    written back by `update_index` (they became U+FFFD for good)."""
    raw = _index_bytes(path)
    if len(raw) > index_mod.MAX_INDEX_READ_BYTES:
        check_index_size(path)
    return raw.decode("utf-8", errors="surrogateescape")


def _check_rewrite_size(path: Path, new: str) -> None:
    """TooLarge, before anything is written, for a rewrite that would take the index past
    MAX_INDEX_READ_BYTES: written, it was refused by every later rewrite (`check_index_size`),
    and the 2,000 generated lines of a dream's or the orphan check's rebuild left a 2 MB index
    that failed each write of its folder."""
    size = len(new.encode("utf-8", errors="surrogateescape"))
    if size > index_mod.MAX_INDEX_READ_BYTES:
        raise TooLarge(
            f"{path} would be {size:,} bytes; memoryd keeps an index of at most "
            f"{index_mod.MAX_INDEX_READ_BYTES:,} bytes up to date: retire memories or trim it "
            "(one short line per memory), then write again"
        )


def kept_mode(path: Path) -> int:
    """The permission bits a rewrite of `path` gives the new file: the file's own, as an
    editor keeps them (a 0664 memory of a group-shared memory folder stays readable by the
    group, a 0644 one the user opened up stays so), 0600 for a new file. A rewrite made
    every file it replaced 0600, and the user's teammates lost the memories they wrote.
    Never writable by others (`agent.modes.rewrite_mode`, the agents' rule too)."""
    try:
        return rewrite_mode(os.lstat(path))
    except OSError:
        return 0o600


# Rewrites of a file that changed under us (an index, a memory), each read again: the first at
# once, then (`patient`, off the event loop) after a wait that doubles up to _BACKOFF_MAX_S,
# ~1 s in all, so that an editor saving again and again gets between them. The last one went
# ahead regardless before session 21, and dropped the save that changed it (a line written by
# hand, a heading): now nothing is written and ChangedMeanwhile says why (a flush keeps its
# lines queued for the next one).
_UPDATE_TRIES = 5
_PATIENT_TRIES = 16
_BACKOFF_FIRST_S = 0.002
_BACKOFF_MAX_S = 0.2

T = TypeVar("T")


Stamp = tuple[int, ...] | None


def while_changed(path: Path, attempt: Callable[[Stamp], T], *, patient: bool = True) -> T:
    """`attempt(stamp)` (`stamp`: `path` as it was just before the try, which reads it and
    writes with `still=unchanged_since(path, stamp)`), tried again while ChangedMeanwhile
    says someone who takes no lock (Claude Code, an editor) saved `path` meanwhile: their save
    is read again and kept, not replaced by what was made from the earlier read.
    ChangedMeanwhile when it changed under every try (`patient`: with waits between them;
    pass False on the event loop)."""
    tries = 1
    while True:
        try:
            return attempt(save_stamp(path, follow_links=False))
        except ChangedMeanwhile as exc:
            if tries >= (_PATIENT_TRIES if patient else _UPDATE_TRIES):
                raise ChangedMeanwhile(
                    errno.EAGAIN,
                    f"it changed under each of {tries} rewrites (another program writing it "
                    "again and again); nothing was written, it is tried again later",
                    str(path),
                ) from exc
            if patient and tries >= _UPDATE_TRIES:
                time.sleep(min(_BACKOFF_FIRST_S * 2 ** (tries - _UPDATE_TRIES), _BACKOFF_MAX_S))
            tries += 1


class ProtectedIndex(PermissionError):
    """An index its owner made read-only (`chmod 444`), or another user's that memoryd's user
    may not write: left as it is, as a protected memory is and as memoryd's agents leave it.
    A rename needs only the folder writable, so every write, delete and reconcile replaced
    it (and kept it 444), though the docs said a read-only MEMORY.md was not rewritten."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(errno.EACCES, why, str(path))


def check_index_writable(path: Path) -> None:
    """ProtectedIndex when the index at `path` is one its owner protected from writes. The
    owner's write bit alone decides for a file of ours: a 0664 index made `chmod u-w` (0464)
    is read-only to its owner, group bits or not."""
    refusal = protected_refusal(path, let_flags_fail=True)
    if refusal is not None:
        raise ProtectedIndex(path, refusal)


def update_index(
    path: Path, change: Callable[[str], str], *, create: bool = False, patient: bool = True
) -> tuple[str, str]:
    """Read MEMORY.md, `change` its text and write the result back (with `create`, also an
    unchanged text when there is no file); (the text read, the text written). Writers outside
    memoryd (Claude Code, an editor) take no lock: when the file changed after it was read
    (an agent's line added, an editor's save half done: it truncates, then writes), it is
    read and changed again (`while_changed`), so their edit is kept; a rewrite of what was
    read dropped it, or kept only the lines of our own batch when the read fell between the
    truncate and the write."""

    def attempt(before: Stamp) -> tuple[str, str]:
        text = read_index_for_rewrite(path)
        new = change(text)
        if new == text and not (create and before is None):
            return text, new
        _check_rewrite_size(path, new)
        check_index_writable(path)
        atomic_write_bytes(
            path,
            new.encode("utf-8", errors="surrogateescape"),
            kept_mode(path),
            still=unchanged_since(path, before),
            came_out=put_back_unless(before),
        )
        return text, new

    return while_changed(path, attempt, patient=patient)
