"""A project: a cwd resolved to its canonical root and git facts, and the key that names it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from memoryd import gitfacts

_UNSAFE = re.compile(r"[^A-Za-z0-9]")


def sanitize_key(path: Path | str) -> str:
    """The projects/ folder name of a root: every character outside [A-Za-z0-9] becomes '-'."""
    return _UNSAFE.sub("-", str(path))


@dataclass(frozen=True)
class Project:
    cwd: Path
    root: Path  # canonical: main worktree root, or cwd outside git
    facts: gitfacts.GitFacts

    @property
    def key(self) -> str:
        return sanitize_key(self.root)

    @property
    def settings_root(self) -> Path:
        """Where the project's `.claude/settings*.json` are: the worktree cwd is in. Project
        settings are checked into the branch, so a linked worktree has its own; the main
        checkout's are another branch's working tree."""
        return self.facts.worktree_root or self.root
