"""What memoryd's own folders shed at start-up: temp files of writers killed mid-write, and
the hook state and session memory records of sessions long over. Run in a thread once the
socket listens."""

from __future__ import annotations

import contextlib
import os
import time
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
    settings, session summaries). Only files older than this process: no writer alive owns
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
    `HOOK_SESSION_MAX_AGE_S`."""
    cutoff = (now or time.time()) - HOOK_SESSION_MAX_AGE_S
    removed, _ = _prune_old_json(paths.state_dir() / "hooks", cutoff)
    if removed:
        log.info("removed the hook state of sessions long over", count=len(removed))
    return removed


def prune_session_records(now: float | None = None) -> list[Path]:
    """Remove session memory's records (`<state>/sessions/<project key>/<session id>.json`)
    not written for SESSION_RECORD_MAX_AGE_S, and a project's folder left empty. A session
    resumed after that starts its thresholds afresh, as a missing record always meant."""
    root = paths.state_dir() / "sessions"
    cutoff = (now or time.time()) - SESSION_RECORD_MAX_AGE_S
    removed: list[Path] = []
    try:
        folders = [e for e in os.scandir(root) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return removed  # no session was ever recorded, or the folder is unreadable
    for folder in folders:
        gone, left = _prune_old_json(Path(folder.path), cutoff)
        removed += gone
        if not left:
            with contextlib.suppress(OSError):  # a record written meanwhile: the folder stays
                os.rmdir(folder.path)
    if removed:
        log.info("removed the session memory records of sessions long over", count=len(removed))
    return removed


def _prune_old_json(folder: Path, cutoff: float) -> tuple[list[Path], int]:
    """Remove the `*.json` regular files in `folder` last written before `cutoff`: (those
    removed, how many entries are left). A link or anything else there is not ours and
    stays; a folder that cannot be read is left as it is."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed, 1  # none yet, or unreadable: nothing to do, and not empty
    left = len(entries)
    for entry in entries:
        try:
            if (
                entry.name.endswith(".json")
                and entry.is_file(follow_symlinks=False)
                and entry.stat(follow_symlinks=False).st_mtime < cutoff
            ):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
                left -= 1
        except OSError:
            continue  # gone meanwhile, or not ours to remove
    return removed, left
