"""Where the user's config home is: the rule clients and the daemon share. Standard library only."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def state_dir() -> Path:
    """memoryd's own per-user state (approvals, sync state, history, hook state, logs)."""
    base = os.environ.get("XDG_STATE_HOME")
    return (Path(base) if base else home() / ".local" / "state") / "memoryd"


def config_dir() -> Path:
    """The config home: user instruction files, projects/, settings.json."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured).expanduser() if configured else home() / ".claude"
