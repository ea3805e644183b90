"""One line of human text per daemon notification (`memctl watch`, the memory UI), and what a
client subscribing needs to read of the daemon's answers."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence


def _name(path: Any) -> str:
    return os.path.basename(str(path)) if path else "?"


def describe(message: dict[str, Any]) -> str:
    """'memory saved: x.md' and friends; unknown events are shown with their raw params."""
    event = str(message.get("method", "?"))
    params = message.get("params")
    p: dict[str, Any] = params if isinstance(params, dict) else {}
    if event == "memory/saved":
        return f"memory saved: {_name(p.get('path'))}"
    if event == "session/summary_updated":
        return f"session summary updated: {p.get('session_id', '?')}"
    if event == "team/synced":
        return f"team synced: {p.get('repo', '?')} (pushed {p.get('pushed', 0)}, pulled {p.get('pulled', 0)})"
    if event == "team/secret_blocked":
        return (
            f"team: {_name(p.get('path'))} not uploaded — secret matched rule {p.get('rule', '?')}"
        )
    if event == "team/conflict":
        return f"team conflict: {_name(p.get('path'))} kept as {_name(p.get('saved_as'))}"
    if event == "magicdoc/updated":
        return f"magic doc updated: {_name(p.get('path'))}"
    if event == "worker/error":
        return f"worker error ({p.get('worker', '?')}): {p.get('message', '')}"
    if event == "context/changed":
        return _context_changed(p)
    return f"{event}: {p}"


def _context_changed(params: dict[str, Any]) -> str:
    """'context changed: /src/app (CLAUDE.md, .claude/rules/go.md and 3 more)'."""
    project = str(params.get("project", "?"))
    paths = params.get("paths")
    shown = [_within(project, str(p)) for p in paths] if isinstance(paths, list) else []
    if not shown:
        return f"context changed: {project} (events were lost: which files is not known)"
    more = params.get("more")
    tail = f" and {more} more" if isinstance(more, int) and more > 0 else ""
    return f"context changed: {project} ({', '.join(shown)}{tail})"


def _within(project: str, path: str) -> str:
    """The path relative to the project when it is in it (a user or managed file is not)."""
    if path.startswith(project.rstrip(os.sep) + os.sep):
        return path[len(project.rstrip(os.sep)) + 1 :]
    return path


def known_events(message: str, wanted: Sequence[str]) -> list[str] | None:
    """The events of `wanted` a daemon knows, read from its refusal of a `subscribe` naming
    some it does not (-32602 `…; known: a, b`: one older than context/changed refuses the whole
    set); None when the message is no such refusal or leaves nothing out. The editors read it
    the same way (Neovim's init.lua, VS Code's knownEvents)."""
    known = re.search(r"; known: (.+)$", message)
    if known is None:
        return None
    names = set(re.split(r"[,\s]+", known.group(1)))
    kept = [event for event in wanted if event in names]
    return kept if len(kept) < len(wanted) else None


def concerns(project: Any, cwd: str) -> bool:
    """Whether a notification's `project` (the daemon's real path of a project root) is the
    project of `cwd`: the folder is the project or below it, as opened or through its links."""
    if not isinstance(project, str) or not project:
        return False
    prefix = project if project.endswith(os.sep) else project + os.sep

    def within(folder: str) -> bool:
        return folder == project or folder.startswith(prefix)

    try:
        return within(cwd) or within(os.path.realpath(cwd))
    except (OSError, ValueError):
        return False
