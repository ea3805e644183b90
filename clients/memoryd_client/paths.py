"""Where the user's config home is: the rule clients and the daemon share. Standard library only."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def xdg_dir(name: str) -> Path | None:
    """`$name` (an XDG base directory) when set to an absolute path; the XDG spec has a
    relative one ignored, as it would name a different folder from every working directory."""
    value = os.environ.get(name)
    return Path(value) if value and os.path.isabs(value) else None


def state_dir() -> Path:
    """memoryd's own per-user state (approvals, sync state, history, hook state, logs)."""
    return (xdg_dir("XDG_STATE_HOME") or home() / ".local" / "state") / "memoryd"


def config_dir() -> Path:
    """The config home: user instruction files, projects/, settings.json."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured).expanduser() if configured else home() / ".claude"
