"""A project: a cwd resolved to its canonical root and git facts, and the key that names it."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from memoryd import gitfacts, paths

_UNSAFE = re.compile(r"[^A-Za-z0-9]")
# Characters outside the BMP: two UTF-16 code units each (a surrogate pair).
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def sanitize_key(path: Path | str) -> str:
    """Every character outside [A-Za-z0-9] as one '-': the names of memoryd's own files
    (history, team sync state). A project's folder under projects/ is `project_key`."""
    return _UNSAFE.sub("-", str(path))


def project_key(root: Path | str) -> str:
    """The projects/ folder name Claude Code gives a root: JavaScript's
    `path.replace(/[^a-zA-Z0-9]/g, '-')`, which replaces UTF-16 code units, so a character
    outside the BMP (an emoji, CJK extension B) becomes two dashes: `app🚀` -> `app--`."""
    return sanitize_key(_ASTRAL.sub("--", str(root)))


@dataclass(frozen=True)
class Project:
    cwd: Path
    root: Path  # canonical: main worktree root, or cwd outside git
    facts: gitfacts.GitFacts

    @property
    def key(self) -> str:
        """The root's folder under `<config>/projects/`: Claude Code's name (`project_key`).

        memoryd used to give a character outside the BMP one dash (`sanitize_key`), so a project
        with one in its path may have memories under that earlier name: while it has a
        `memory/` folder and the new name has none, the earlier name stays, so they are not
        left behind (Claude Code's folder under the new name may exist for its transcripts).
        """
        key = project_key(self.root)
        earlier = sanitize_key(self.root)
        if earlier != key:
            projects = paths.config_dir() / "projects"
            if os.path.lexists(projects / earlier / "memory") and not os.path.lexists(
                projects / key / "memory"
            ):
                return earlier
        return key

    @property
    def settings_root(self) -> Path:
        """Where the project's `.claude/settings*.json` are: the worktree cwd is in. Project
        settings are checked into the branch, so a linked worktree has its own; the main
        checkout's are another branch's working tree."""
        return self.facts.worktree_root or self.root
