"""Projects: a cwd resolved to its canonical root and git facts, cached per directory.

The cache entry for a cwd is re-validated by the mtimes of the git files it was read
from (`.git/HEAD`, `.git/config` and the files it includes, the worktree's `.git` file), of
the user's and system's git config (where `safe.directory` is), of the `.git` of every folder
between the cwd and its worktree root (every folder above it outside git), and by the
identity of the folder the cwd names, so moving a worktree, changing the remote, trusting
another user's repository, a `git init` above the cwd or a symbolic link in the cwd pointed
elsewhere is seen at the next call without a watcher.
"""

from __future__ import annotations

import itertools
import os
from collections import OrderedDict
from pathlib import Path

from memoryd import gitfacts, gitsafe
from memoryd.automem.stamps import Stat, stat_stamp
from memoryd.core.project import Project

MAX_CACHED_DIRS = 4_096
# Folders above the cwd whose `.git` is stat'ed on each call: a `git init` further up than
# this (under a cwd hundreds of folders deep) is seen once the entry leaves the cache.
MAX_PARENT_PROBES = 64

_Identity = tuple[int, int] | None


def _probes(facts: gitfacts.GitFacts, cwd: Path, real: Path) -> list[Path]:
    """The paths whose stat tells whether `facts` still hold for `cwd` (`real`: its real
    path). Made again on each call rather than kept: 4,096 entries' lists were 7 MB."""
    probes = [cwd / ".git", *gitsafe.config_files()]
    # A `.git` made (or removed) in a folder between the cwd and its worktree root, or above
    # a cwd outside git, moves the root: the walk up would stop there now. Without these a
    # daemon kept the root it first found (and its memory dir) for the rest of its run.
    for folder in itertools.islice(real.parents, MAX_PARENT_PROBES):
        if folder == facts.worktree_root:
            break
        probes.append(folder / ".git")
    if facts.worktree_root is not None:
        probes.append(facts.worktree_root / ".git")
    if facts.git_dir is not None:
        probes += [facts.git_dir / "HEAD", facts.git_dir / "config"]
    # The files `.git/config` includes (a remote kept in one): an edit there changes the
    # remote without touching .git/config, and was never seen while the entry lasted.
    probes += facts.included
    return probes


def _stamp(facts: gitfacts.GitFacts, cwd: Path, real: Path) -> tuple[Stat, ...]:
    """What the git files the facts came from look like (`stat_stamp`: mtime, ctime, size,
    inode): the mtime alone missed a change within one tick of a coarse clock, 1-2 s on some
    file systems, and after the clock was set back (git replaces HEAD and config by a
    rename)."""
    return tuple(stat_stamp(probe) for probe in _probes(facts, cwd, real))


def _identity(cwd: Path) -> _Identity:
    """Which folder `cwd` names (not its mtime: a file made in it changes nothing here). A
    symbolic link on the way pointed at another folder changes it: outside git the root is
    the real cwd, and the first target's was kept."""
    try:
        info = os.stat(cwd)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


class Projects:
    def __init__(self) -> None:
        # cwd -> (its real path, the stamps, its folder's identity, the project)
        self._cache: OrderedDict[Path, tuple[Path, tuple[Stat, ...], _Identity, Project]] = (
            OrderedDict()
        )

    def resolve(self, cwd: str | Path) -> Project:
        path = Path(cwd)
        cached = self._cache.get(path)
        if cached is not None:
            real, stamps, identity, project = cached
            if _identity(path) == identity and _stamp(project.facts, path, real) == stamps:
                self._cache.move_to_end(path)
                return project
        identity = _identity(path)
        facts = gitfacts.discover(path)
        project = Project(path, facts.project_root, facts)
        try:
            real = path.resolve()
        except (OSError, RuntimeError):
            real = path
        self._cache[path] = (real, _stamp(facts, path, real), identity, project)
        self._cache.move_to_end(path)
        while len(self._cache) > MAX_CACHED_DIRS:  # a long-lived daemon sees many cwds
            self._cache.popitem(last=False)
        return project

    def root_of(self, cwd: str | None) -> Path | None:
        """The project root of `cwd`, or None when no `cwd` was given (methods where it is
        optional)."""
        return None if cwd is None else self.resolve(cwd).root

    def known_roots(self) -> set[Path]:
        return {entry[3].root for entry in self._cache.values()}

    def status_extra(self) -> dict[str, int]:
        return {"projects": len(self.known_roots())}
