"""Projects: a cwd resolved to its canonical root and git facts, cached per directory.

The cache entry for a cwd is re-validated by the mtimes of the git files it was read
from (`.git/HEAD`, `.git/config` and the files it includes, the worktree's `.git` file) and of
the user's and system's git config (where `safe.directory` is), so moving a worktree, changing the remote or trusting
another user's repository is seen at the next call without a watcher.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

from memoryd import gitfacts, gitsafe
from memoryd.automem.stamps import Stat, stat_stamp
from memoryd.core.project import Project

MAX_CACHED_DIRS = 4_096


def _stamp(facts: gitfacts.GitFacts, cwd: Path) -> tuple[Stat, ...]:
    """What the git files the facts came from look like (`stat_stamp`: mtime, ctime, size,
    inode): the mtime alone missed a change within one tick of a coarse clock, 1-2 s on some
    file systems, and after the clock was set back (git replaces HEAD and config by a
    rename)."""
    probes = [cwd / ".git", *gitsafe.config_files()]
    if facts.worktree_root is not None:
        probes.append(facts.worktree_root / ".git")
    if facts.git_dir is not None:
        probes += [facts.git_dir / "HEAD", facts.git_dir / "config"]
    # The files `.git/config` includes (a remote kept in one): an edit there changes the
    # remote without touching .git/config, and was never seen while the entry lasted.
    probes += facts.included
    return tuple(stat_stamp(probe) for probe in probes)


class Projects:
    def __init__(self) -> None:
        self._cache: OrderedDict[Path, tuple[tuple[Stat, ...], Project]] = OrderedDict()

    def resolve(self, cwd: str | Path) -> Project:
        path = Path(cwd)
        cached = self._cache.get(path)
        if cached is not None and _stamp(cached[1].facts, path) == cached[0]:
            self._cache.move_to_end(path)
            return cached[1]
        facts = gitfacts.discover(path)
        project = Project(path, facts.project_root, facts)
        self._cache[path] = (_stamp(facts, path), project)
        self._cache.move_to_end(path)
        while len(self._cache) > MAX_CACHED_DIRS:  # a long-lived daemon sees many cwds
            self._cache.popitem(last=False)
        return project

    def root_of(self, cwd: str | None) -> Path | None:
        """The project root of `cwd`, or None when no `cwd` was given (methods where it is
        optional)."""
        return None if cwd is None else self.resolve(cwd).root

    def known_roots(self) -> set[Path]:
        return {p.root for _, p in self._cache.values()}

    def status_extra(self) -> dict[str, int]:
        return {"projects": len(self.known_roots())}
