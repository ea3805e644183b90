"""How a memory dir is laid out: keys relative to it, `team/` inside it, a MEMORY.md in each."""

from __future__ import annotations

from pathlib import Path

from memoryd.automem import index as index_mod
from memoryd.automem.store import TEAM_DIR


def is_team(key: str) -> bool:
    return key.startswith(f"{TEAM_DIR}/")


def index_file(key: str, team: bool) -> str:
    """The key as the index of its folder names it (team keys lose their `team/`)."""
    return key[len(TEAM_DIR) + 1 :] if team else key


def index_path(memory_dir: Path, *, team: bool) -> Path:
    """MEMORY.md, or team/MEMORY.md."""
    return (memory_dir / TEAM_DIR if team else memory_dir) / index_mod.INDEX_NAME


def read_text(path: Path) -> str:
    """A file's text; "" when it does not exist."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, NotADirectoryError):
        return ""
