"""What memoryd's own folders shed at start-up: temp files of writers killed mid-write, and
the hook state and session memory records of sessions long over. Run in a thread once the
socket listens."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import structlog

from memoryd import paths, settings
from memoryd.fsutil import remove_stale_staged, remove_stale_staged_tree

log = structlog.get_logger("memoryd.daemon")

# `memctl hook` keeps one small file per Claude Code session (memories already shown, a
# compact summary to hand over). A session resumed after this long starts its list afresh;
# kept for ever, a year of sessions left thousands of files behind.
HOOK_SESSION_MAX_AGE_S = 90 * 86_400


# Session memory keeps one record per session (`<state>/sessions/<project key>/<session id>.json`,
# `session/state.py`): kept for ever, a year of sessions left thousands behind as well.
SESSION_RECORD_MAX_AGE_S = HOOK_SESSION_MAX_AGE_S


def tidy_state() -> None:
    remove_stale_temp_files()
    prune_hook_sessions()
    prune_session_records()


def remove_stale_temp_files() -> list[Path]:
    """The temp files of atomic writes that a process killed mid-write (kill -9, power loss)
    left in the folders memoryd writes outside memory folders (those are cleaned at their
    first use, `IndexWriter.index_orphans`): all of memoryd's state folder (include
    approvals, history, hook sessions, team sync state, dream, models, vectors), and in
    Claude Code's folders only the temp files of the files memoryd writes there (user
    settings, session summaries). Only files last written over LIVE_WRITE_MARGIN_S before
    this process started (`fsutil.STALE_BEFORE`, the sweeps' default): no writer alive owns
    them. Nothing renamed them into place, so nothing is lost."""
    removed = remove_stale_staged_tree(paths.state_dir())
    user_settings = settings.user_settings_path()
    removed += remove_stale_staged(user_settings.parent, names=(user_settings.name,))
    # <config>/projects/<key>/<session id>/session-memory/: the summary and its draft
    # (`session/service.py`).
    for folder in paths.config_dir().glob("projects/*/*/session-memory"):
        removed += remove_stale_staged(folder, names=("summary.md", ".summary.draft.md"))
    if removed:
        log.warning(
            "removed temp files a killed writer left",
            count=len(removed),
            files=[str(p) for p in removed[:20]],
        )
    return removed


def prune_hook_sessions(now: float | None = None) -> list[Path]:
    """Remove the hook state files (`<state>/hooks/<session id>.json`) not written for
    `HOOK_SESSION_MAX_AGE_S` (`_clock_believed`: never every one of them)."""
    cutoff = (now or time.time()) - HOOK_SESSION_MAX_AGE_S
    folder = paths.state_dir() / "hooks"
    found = _json_files(folder)
    if found is None or not _clock_believed(found, cutoff, "hook state"):
        return []
    removed, _ = _remove_old(found, cutoff)
    if removed:
        log.info("removed the hook state of sessions long over", count=len(removed))
    return removed


def prune_session_records(now: float | None = None) -> list[Path]:
    """Remove session memory's records (`<state>/sessions/<project key>/<session id>.json`)
    not written for SESSION_RECORD_MAX_AGE_S, and a project's folder left empty
    (`_clock_believed`: never every record of every project). A session resumed after that
    starts its thresholds afresh, as a missing record always meant."""
    root = paths.state_dir() / "sessions"
    cutoff = (now or time.time()) - SESSION_RECORD_MAX_AGE_S
    try:
        folders = [e for e in os.scandir(root) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []  # no session was ever recorded, or the folder is unreadable
    listed = [(folder, _json_files(Path(folder.path))) for folder in folders]
    every = [f for _, found in listed if found is not None for f in found.files]
    if not _clock_believed(_Found(every, len(every)), cutoff, "session memory records"):
        return []
    removed: list[Path] = []
    for folder, found in listed:
        if found is None:
            continue  # unreadable: left as it is
        gone, left = _remove_old(found, cutoff)
        removed += gone
        if not left:
            with contextlib.suppress(OSError):  # a record written meanwhile: the folder stays
                os.rmdir(folder.path)
    if removed:
        log.info("removed the session memory records of sessions long over", count=len(removed))
    return removed


@dataclass(frozen=True)
class _Found:
    files: list[tuple[Path, float]]  # the `*.json` regular files and their mtimes
    entries: int  # everything in the folder, those files included


def _json_files(folder: Path) -> _Found | None:
    """The `*.json` regular files in `folder` with their mtimes (a link or anything else
    there is not ours), or None when the folder cannot be read (none yet, unreadable)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return None
    files: list[tuple[Path, float]] = []
    for entry in entries:
        try:
            if entry.name.endswith(".json") and entry.is_file(follow_symlinks=False):
                files.append((Path(entry.path), entry.stat(follow_symlinks=False).st_mtime))
        except OSError:
            continue  # gone meanwhile
    return _Found(files, len(entries))


def _clock_believed(found: _Found, cutoff: float, what: str) -> bool:
    """Whether the clock may say which files are old: not when every file is past the
    cutoff. A clock set far ahead (a dead RTC battery, a VM restored with the wrong time,
    2100) made every session's files look long over, and start-up removed them all; so did
    a return after months away, when the sessions most recently used count the most. Then
    nothing is removed until a session writes its file again."""
    if not found.files or any(mtime >= cutoff for _, mtime in found.files):
        return True
    newest = max(mtime for _, mtime in found.files)
    log.warning(
        f"no {what} removed: every file is older than the age limit, so the clock (or a long "
        "absence) cannot tell which sessions are over",
        files=len(found.files),
        newest=datetime.fromtimestamp(newest, UTC).isoformat(timespec="seconds"),
    )
    return False


def _remove_old(found: _Found, cutoff: float) -> tuple[list[Path], int]:
    """Remove the files of `found` last written before `cutoff`: (those removed, how many
    entries of the folder are left)."""
    removed: list[Path] = []
    left = found.entries
    for path, mtime in found.files:
        if mtime >= cutoff:
            continue
        try:
            os.unlink(path)
        except OSError:
            continue  # gone meanwhile, or not ours to remove
        removed.append(path)
        left -= 1
    return removed, left
