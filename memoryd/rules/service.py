"""The daemon's instruction-file cache: one loaded context per (cwd, touched-path set).

An entry is dropped as soon as anything it was built from changes: the watcher reports
a change to one of its paths, or — when it is not (yet) covered by a live watcher — a
re-stat of every path it recorded finds a difference. `compact`, the memory UI and
include approvals drop entries explicitly with `drop`.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryd import paths, settings
from memoryd.rules import approvals, assembly, realfs
from memoryd.rules.loader import load_context
from memoryd.rules.model import ContextRequest, ContextResult
from memoryd.rules.watcher import DirWatcher

if TYPE_CHECKING:
    from memoryd.core.host import Host
    from memoryd.core.project import Project

MAX_ENTRIES = 256
# Folders one entry may have watched: more (a session that touched files in 4,000 folders)
# and it is checked by `stat` on each call instead of holding the user's inotify watches.
MAX_WATCHED_PER_ENTRY = 500
MAX_INCLUDE_DEPTH_CAP = 20

_Key = tuple[Path, Path, frozenset[Path]]


@dataclass
class CachedContext:
    project_root: Path
    result: ContextResult
    sections: list[str]  # rendered file sections, ready to assemble
    involvement: realfs.Involvement
    trusted: bool = False
    # The wire form of files/skipped, made once by the RPC layer and reused on every hit.
    wire: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None = None
    # The watched folders and every folder above them. One of these renamed, removed or
    # relinked (`docs/` moved away, `.claude/` turned off, a `shared` link pointed elsewhere)
    # is reported by its parent's watch: no file the load read, but all of them went with it.
    folders: frozenset[Path] = field(init=False)

    def __post_init__(self) -> None:
        dirs = self.involvement.watch_dirs
        self.folders = frozenset({*dirs, *(p for d in dirs for p in d.parents)})


def _settings_paths(project_root: Path, flag: Path | None) -> list[Path]:
    found = [
        settings.policy_settings_path(),
        settings.user_settings_path(),
        settings.project_settings_path(project_root),
        settings.local_settings_path(project_root),
    ]
    return [*found, flag] if flag is not None else found


def build(
    cwd: Path, project: Project, touched: frozenset[Path], flag: Path | None
) -> CachedContext:
    """Read settings and approvals, then load every file. Blocking: run it in a thread."""
    fs = realfs.RealFS()
    # Project settings are checked into the branch: a linked worktree's own, not the main
    # checkout's (another branch's working tree).
    settings_root = project.facts.worktree_root or project.root
    # Stamp before reading, so an edit racing with this load is seen as a change later.
    for path in _settings_paths(settings_root, flag):
        fs.note(path)
    fs.note(approvals.approvals_path())
    effective = settings.load(settings_root, flag)
    warnings = [f"settings file {f.path}: {f.error}" for f in effective.files if f.error]
    depth = effective.get("maxIncludeDepth")
    if not 0 <= depth <= MAX_INCLUDE_DEPTH_CAP:
        warnings.append(f"maxIncludeDepth {depth} is outside 0..{MAX_INCLUDE_DEPTH_CAP}; clamped")
        depth = min(max(depth, 0), MAX_INCLUDE_DEPTH_CAP)
    request = ContextRequest(
        cwd=cwd,
        project_root=project.root,
        worktree_root=project.facts.worktree_root,
        config_dir=paths.config_dir(),
        managed_dir=paths.managed_dir(),
        home=paths.home(),
        touched=touched,
        excludes=tuple(effective.get("claudeMdExcludes") or ()),
        agents_md_fallback=bool(effective.get("agentsMdFallback")),
        max_include_depth=depth,
        external_approved=approvals.is_approved(project.root),
    )
    result = load_context(request, fs)
    if warnings:
        result = ContextResult(result.files, result.skipped, (*warnings, *result.warnings))
    return CachedContext(
        project.root, result, assembly.render_files(result.files), fs.involvement()
    )


def _watchable(entry: CachedContext) -> bool:
    return len(entry.involvement.watch_dirs) <= MAX_WATCHED_PER_ENTRY


class InstructionFiles:
    def __init__(self, host: Host, *, flag_settings: Path | None, watch_files: bool) -> None:
        self.host = host
        self.flag_settings = flag_settings
        self.watch_files = watch_files
        self._started = False
        self._entries: OrderedDict[_Key, CachedContext] = OrderedDict()
        self._building: dict[_Key, asyncio.Future[CachedContext]] = {}
        self._epoch = 0  # bumped by every drop, so a load that raced a drop is not kept
        self._watcher: DirWatcher | None = None
        self.hits = 0
        self.misses = 0

    async def ensure_started(self) -> None:
        """Start the file watcher, once (on the first `get_context`)."""
        if self._started:
            return
        self._started = True
        if self.watch_files:
            self._watcher = DirWatcher(self._on_change, self._watch_error)
            await self._watcher.start()

    async def close(self) -> None:
        if self._watcher is not None:
            await self._watcher.close()

    async def _watch_error(self, message: str) -> None:
        await self.host.report_worker_error("rules-watcher", message)

    # -- lookups --------------------------------------------------------------------------
    async def get(
        self, cwd: Path, project: Project, touched: frozenset[Path]
    ) -> tuple[CachedContext, bool]:
        """The context for cwd and touched paths, and whether it came from the cache."""
        key: _Key = (cwd, project.root, touched)
        entry = self._entries.get(key)
        if entry is not None and self._still_valid(key, entry):
            self._entries.move_to_end(key)
            self.hits += 1
            return entry, True
        pending = self._building.get(key)
        if pending is not None:
            return await asyncio.shield(pending), False
        future: asyncio.Future[CachedContext] = asyncio.get_running_loop().create_future()
        self._building[key] = future
        epoch = self._epoch
        try:
            self.misses += 1
            flag = self.flag_settings
            entry = await asyncio.to_thread(build, cwd, project, touched, flag)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here, so a lone waiter-less failure is not logged
            raise
        finally:
            self._building.pop(key, None)
        if epoch == self._epoch:
            self._store(key, entry)
        future.set_result(entry)
        return entry, False

    def _store(self, key: _Key, entry: CachedContext) -> None:
        self._entries[key] = entry
        self._entries.move_to_end(key)
        evicted = False
        while len(self._entries) > MAX_ENTRIES:
            self._entries.popitem(last=False)
            evicted = True
        if self._watcher is not None:
            if _watchable(entry):
                self._watcher.ensure(entry.involvement.watch_dirs)
            if evicted:
                self._release_watches()

    def _release_watches(self) -> None:
        """Let the watcher drop folders no cached entry needs any more."""
        if self._watcher is not None:
            self._watcher.retain(
                {
                    d
                    for e in self._entries.values()
                    if _watchable(e)
                    for d in e.involvement.watch_dirs
                }
            )

    def _still_valid(self, key: _Key, entry: CachedContext) -> bool:
        if entry.trusted:
            return True
        if not realfs.unchanged(entry.involvement.stamps):
            self._entries.pop(key, None)
            return False
        # Stamps match now; from here on a live watcher over every folder sees any change.
        if (
            self._watcher is not None
            and _watchable(entry)
            and self._watcher.covers(entry.involvement.watch_dirs)
        ):
            entry.trusted = True
        return True

    # -- invalidation ---------------------------------------------------------------------
    def _on_change(self, changed: set[Path]) -> None:
        dropped = False
        for key, entry in list(self._entries.items()):
            involvement = entry.involvement
            if any(
                p in involvement.involved or p.parent in involvement.listed or p in entry.folders
                for p in changed
            ):
                del self._entries[key]
                dropped = True
        if dropped:
            self._release_watches()

    def drop(self, project_root: Path | None = None) -> int:
        """Forget cached contexts (of one project, or all); the count dropped."""
        self._epoch += 1
        doomed = [
            k
            for k, e in self._entries.items()
            if project_root is None or e.project_root == project_root
        ]
        for key in doomed:
            del self._entries[key]
        if doomed:
            self._release_watches()
        return len(doomed)

    # -- status ---------------------------------------------------------------------------
    def feature_status(self) -> dict[str, Any]:
        watcher = self._watcher
        return {
            "instruction_files": {
                "enabled": True,
                "watching": watcher is not None and watcher.failed is None,
                "watched_dirs": len(watcher.armed) if watcher is not None else 0,
                "reason": (
                    watcher.failed
                    if watcher is not None
                    else "file watching starts with the first project"
                    if self.watch_files
                    else "file watching is off (--no-watch)"
                ),
                "cached": len(self._entries),
                "trusted": sum(1 for e in self._entries.values() if e.trusted),
                "hits": self.hits,
                "misses": self.misses,
            }
        }
