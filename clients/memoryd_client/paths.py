"""Where the user's config home is: the rule clients and the daemon share. Standard library only.

A variable naming a folder counts only when it is an absolute path: a relative HOME or
CLAUDE_CONFIG_DIR named a folder under each process's working directory, so the daemon kept
memory under wherever it was started and its replies carried relative paths.
"""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """$HOME when absolute, else the home folder of the user's entry in the password database.
    RuntimeError when neither is there."""
    value = os.environ.get("HOME")
    if value and os.path.isabs(value):
        return Path(value)
    import pwd  # only on this fallback path

    try:
        return Path(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        raise RuntimeError(
            f"HOME is {'not set' if not value else f'relative ({value!r})'} and uid "
            f"{os.getuid()} has no entry in the password database: set HOME to an absolute path"
        ) from None


def expand_home(value: str) -> str:
    """`value` with a leading `~` or `~/` made `home()` (`~user` as the system has it)."""
    if value == "~" or value.startswith("~/"):
        return str(home()) + value[1:]
    return os.path.expanduser(value)


def xdg_dir(name: str) -> Path | None:
    """`$name` (an XDG base directory) when set to an absolute path; the XDG spec has a
    relative one ignored, as it would name a different folder from every working directory."""
    value = os.environ.get(name)
    return Path(value) if value and os.path.isabs(value) else None


def state_dir() -> Path:
    """memoryd's own per-user state (approvals, sync state, history, hook state, logs)."""
    return (xdg_dir("XDG_STATE_HOME") or home() / ".local" / "state") / "memoryd"


def config_dir() -> Path:
    """The config home: user instruction files, projects/, settings.json. $CLAUDE_CONFIG_DIR
    (`~` expanded) when it names an absolute path, else ~/.claude."""
    configured = expand_home(os.environ.get("CLAUDE_CONFIG_DIR", ""))
    return Path(configured) if os.path.isabs(configured) else home() / ".claude"
