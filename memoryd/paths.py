"""Where things live. Every root is overridable through the environment (docs/protocol.md)."""

from __future__ import annotations

import os
from pathlib import Path

from memoryd_client.client import default_socket_path as client_default_socket_path

# Defined once, in the stdlib-only client package, so memctl and the daemon always agree.
from memoryd_client.paths import config_dir as config_dir
from memoryd_client.paths import expand_home as expand_home
from memoryd_client.paths import home as home
from memoryd_client.paths import state_dir as state_dir
from memoryd_client.paths import xdg_dir as xdg_dir

DEFAULT_MANAGED_DIR = Path("/etc/claude-code")


def managed_dir() -> Path:
    """$MEMORYD_MANAGED_DIR (`~` expanded) when it names an absolute path, else
    /etc/claude-code. An empty or relative value named a folder under the daemon's working
    directory: `MEMORYD_MANAGED_DIR=` (a unit's Environment= line, a shell profile) and a
    daemon started inside a cloned repository made that repository's CLAUDE.md and
    managed-settings.json the user's *policy*, above every other source."""
    # expand_home, not os.path.expanduser: `~` is `home()`, which passes a relative HOME over
    # (expanduser took it, so `~/policy` under HOME=rel became relative and was dropped).
    value = expand_home(os.environ.get("MEMORYD_MANAGED_DIR", ""))
    return Path(value) if os.path.isabs(value) else DEFAULT_MANAGED_DIR


def data_dir() -> Path:
    return (xdg_dir("XDG_DATA_HOME") or home() / ".local" / "share") / "memoryd"


def default_socket_path() -> Path:
    """$MEMORYD_SOCKET; on macOS ~/Library/Caches/memoryd; else $XDG_RUNTIME_DIR (when a runtime
    folder of the user's, else passed over with a warning), $XDG_CACHE_HOME, /tmp.

    Defined once, in the stdlib-only client package, so clients and daemon always agree.
    """
    return client_default_socket_path()


def status_file_for(socket_path: Path) -> Path:
    return socket_path.with_name(socket_path.name + ".status.json")


def log_file_for(socket_path: Path) -> Path:
    return socket_path.with_name("memoryd.log")
