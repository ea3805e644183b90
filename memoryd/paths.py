"""Where things live. Every root is overridable through the environment (docs/protocol.md)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def config_dir() -> Path:
    """The config home: user instruction files, projects/, settings.json."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured).expanduser() if configured else home() / ".claude"


def managed_dir() -> Path:
    return Path(os.environ.get("MEMORYD_MANAGED_DIR", "/etc/claude-code"))


def state_dir() -> Path:
    """memoryd's own per-user state (approvals, sync state, history). Never in a repository."""
    base = os.environ.get("XDG_STATE_HOME")
    return (Path(base) if base else home() / ".local" / "state") / "memoryd"


def data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME")
    return (Path(base) if base else home() / ".local" / "share") / "memoryd"


def default_socket_path() -> Path:
    configured = os.environ.get("MEMORYD_SOCKET")
    if configured:
        return Path(configured)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "memoryd" / "memoryd.sock"
    cache = os.environ.get("XDG_CACHE_HOME")
    if cache:
        return Path(cache) / "memoryd" / "memoryd.sock"
    # AF_UNIX paths are limited to ~108 bytes; a per-user dir under the temp root stays short.
    return Path(tempfile.gettempdir()) / f"memoryd-{os.getuid()}" / "memoryd.sock"


def status_file_for(socket_path: Path) -> Path:
    return socket_path.with_name(socket_path.name + ".status.json")


def log_file_for(socket_path: Path) -> Path:
    return socket_path.with_name("memoryd.log")
