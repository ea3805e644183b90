"""The daemon's instruction-file cache: one loaded context per (cwd, what touched paths activate).

An entry is dropped as soon as anything it was built from changes: the watcher reports
a change to one of its paths, or — when it is not (yet) covered by a live watcher — a
re-stat of every path it recorded finds a difference. `compact` and include approvals drop
entries explicitly with `drop`; `memory.list` re-stats a trusted entry first
(`methods/context.context_now`), so an edit the watcher has not reported yet is shown.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryd import paths, settings
from memoryd.rules import approvals, assembly, globs, realfs
from memoryd.rules.loader import load_context, nested_dirs
from memoryd.rules.model import (
    ALL_SOURCES,
    Condition,
    ContextRequest,
    ContextResult,
    SettingSource,
)
from memoryd.rules.sessions import off_loop
from memoryd.rules.watcher import DirWatcher, with_parents

if TYPE_CHECKING:
    from memoryd.core.host import Host
    from memoryd.core.project import Project


MAX_ENTRIES = 256
# Folders one entry may have watched: more (a session that touched files in 4,000 folders)
# and it is checked by `stat` on each call instead of holding the user's inotify watches.
MAX_WATCHED_PER_ENTRY = 500
MAX_INCLUDE_DEPTH_CAP = 20
# Folders watched for all loads together: an inotify watch each from the user's budget (twice
# that for a moment while the watcher restarts), and past the budget the watcher fails as a
# whole. Past this, only the newest loads' folders, up to half of it, stay watched; older
# loads are checked by `stat` (256 sessions of 500 folders each held 128,000 watches).
MAX_WATCHED_TOTAL = 4_096

# (cwd, project root, nested folders the touched paths open, which `paths:` rules they match):
# what a load depends on of the touched paths. Keyed by the raw touched set, a session that
# touched 20,000 files and one more per call missed on every call and kept a ~10 MB entry each.
# (cwd, project root, setting sources, nested folders, which `paths:` rules matched)
_Key = tuple[Path, Path, frozenset[SettingSource], frozenset[Path], tuple[bool, ...]]
_Prefix = tuple[Path, Path, frozenset[SettingSource], frozenset[Path]]
_BuildKey = tuple[Path, Path, frozenset[SettingSource], frozenset[Path]]
# Recorded paths of an entry re-stat'ed on the event loop; more go to a thread. An entry
# over MAX_WATCHED_PER_ENTRY is re-stat'ed on every call: a session that touched files in
# 3,000 folders recorded ~30,000 paths, and each `get_context` held every client ~0.15 s.
INLINE_STAMPS = 1_000
# The last touched sets seen (of any cwd and root; each session's, the latest of those grown
# from another), so an unchanged or grown set is judged cheaply: kept per (cwd, root) alone,
# a poll with other paths in between made a session of 50,000 judge them all again.
MAX_SEEN = 8
# `context/changed`: at most one per project per interval (a checkout of 10,000 files
# rewritten sends a handful), naming at most this many of the changed paths.
CHANGED_INTERVAL_S = 0.25
MAX_CHANGED_PATHS = 20


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
        self.folders = with_parents(self.involvement.watch_dirs)


def _settings_paths(project_root: Path, flag: Path | None) -> list[Path]:
    found = [
        settings.policy_settings_path(),
        settings.user_settings_path(),
        settings.project_settings_path(project_root),
        settings.local_settings_path(project_root),
    ]
    return [*found, flag] if flag is not None else found


def build(
    cwd: Path,
    project: Project,
    touched: frozenset[Path],
    flag: Path | None,
    sources: frozenset[SettingSource] = ALL_SOURCES,
) -> CachedContext:
    """Read settings and approvals, then load every file. Blocking: run it in a thread."""
    fs = realfs.RealFS()
    settings_root = project.settings_root
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
        sources=sources,
        excludes=tuple(effective.get("claudeMdExcludes") or ()),
        agents_md_fallback=bool(effective.get("agentsMdFallback")),
        max_include_depth=depth,
        external_approved=approvals.is_approved(project.root),
    )
    result = load_context(request, fs)
    if warnings:
        result = ContextResult(
            result.files, result.skipped, (*warnings, *result.warnings), result.conditions
        )
    return CachedContext(
        project.root, result, assembly.render_files(result.files), fs.involvement()
    )


@dataclass(frozen=True)
class _Loaded:
    """What a client loaded, kept past its cache entry's drop: a later edit of the same files
    is still told (`context/changed`), even before a client loads the project again."""

    project_root: Path
    involvement: realfs.Involvement
    folders: frozenset[Path]


@dataclass(frozen=True)
class _Seen:
    touched: frozenset[Path]
    key: _Key
    # The load `key` named when the set was judged: another stored under the same key since
    # (rules edited in between) answers for flags judged by other rules, not for these. Weak:
    # an evicted load (megabytes of text) is not held here.
    entry: weakref.ref[CachedContext]

    def cached_in(self, entries: Mapping[_Key, CachedContext]) -> CachedContext | None:
        """The load the set was judged for, while `entries` holds it under its key."""
        entry = self.entry()
        return entry if entry is not None and entries.get(self.key) is entry else None


def _base(candidates: list[_Seen], now: frozenset[Path]) -> tuple[_Seen, frozenset[Path]] | None:
    """The largest of `candidates` that `now` holds all of, and what `now` adds to it. An
    unrelated set is told apart at once (another size, or its first path missing)."""
    for seen in sorted(candidates, key=lambda s: len(s.touched), reverse=True):
        if len(seen.touched) <= len(now) and seen.touched <= now:
            return seen, now - seen.touched
    return None


def _nested(cwd: Path, touched: Iterable[Path]) -> frozenset[Path]:
    """The nested folders touched paths open (stats only; nothing recorded)."""
    return frozenset(nested_dirs(cwd, touched, realfs.RealFS()))


def _matched(conditions: tuple[Condition, ...], touched: Iterable[Path]) -> tuple[bool, ...]:
    # Grouped by folder once for all the conditions, not once a condition.
    ordered = globs.TouchedPaths(sorted(p.as_posix() for p in touched))
    return tuple(globs.matches_any(c.patterns, c.base, ordered) for c in conditions)


def _hit(
    loaded: _Loaded,
    changed: set[Path],
    by_parent: dict[Path, set[Path]],
    now_folders: dict[Path, bool],
) -> set[Path]:
    """The changed paths a load depends on: each test a set operation over its smaller side.
    Path by path, a checkout of 20,000 files into a watched folder was 5 million tests
    against 256 loads, the event loop held ~6 s."""
    involvement = loaded.involvement
    hit = changed & involvement.involved
    hit |= changed & loaded.folders
    for folder in involvement.listed:
        hit |= by_parent.get(folder, set())
    stamps = involvement.stamps
    fewer = changed if len(changed) < len(stamps) else stamps.keys()
    hit.update(
        p
        for p in fewer
        if p in changed and p in stamps and realfs.became_folder(stamps, p, now_folders)
    )
    return hit


def _watchable(involvement: realfs.Involvement) -> bool:
    return len(involvement.watch_dirs) <= MAX_WATCHED_PER_ENTRY


class InstructionFiles:
    def __init__(self, host: Host, *, flag_settings: Path | None, watch_files: bool) -> None:
        self.host = host
        self.flag_settings = flag_settings
        self.watch_files = watch_files
        self._started = False
        self._entries: OrderedDict[_Key, CachedContext] = OrderedDict()
        self._building: dict[_BuildKey, asyncio.Future[CachedContext]] = {}
        # The `paths:` rules the last load of each prefix judged, in its order.
        self._conditions: OrderedDict[_Prefix, tuple[Condition, ...]] = OrderedDict()
        # The last touched sets, with their keys and loads, by the id of the set (each holds it).
        self._seen: OrderedDict[int, _Seen] = OrderedDict()
        self._epoch = 0  # bumped by every drop, so a load that raced a drop is not kept
        # The dependencies of each load stored, cached or not (as many as cache entries).
        self._loaded: OrderedDict[_Key, _Loaded] = OrderedDict()
        # `context/changed` per project root: when last sent, and the paths held back since.
        self._changed_at: dict[Path, float] = {}
        self._changed_held: dict[Path, set[Path]] = {}
        self._watcher: DirWatcher | None = None
        self.hits = 0
        self.misses = 0

    async def ensure_started(self) -> None:
        """Start the file watcher, once (on the first `get_context`)."""
        if self._started:
            return
        self._started = True
        if self.watch_files:
            self._watcher = DirWatcher(self._on_change, self._watch_error, on_lost=self._on_lost)
            await self._watcher.start()

    async def close(self) -> None:
        if self._watcher is not None:
            await self._watcher.close()

    async def _watch_error(self, message: str) -> None:
        await self.host.report_worker_error("rules-watcher", message)

    # -- lookups --------------------------------------------------------------------------
    async def get(
        self,
        cwd: Path,
        project: Project,
        touched: frozenset[Path],
        sources: frozenset[SettingSource] = ALL_SOURCES,
    ) -> tuple[CachedContext, bool]:
        """The context for cwd and touched paths (with these setting sources' files), and
        whether it came from the cache."""
        key, nested = await self._key(cwd, project.root, sources, touched)
        entry = self._entries.get(key) if key is not None else None
        if key is not None and entry is not None and await self._still_valid(key, entry):
            self._entries.move_to_end(key)
            self._loaded.move_to_end(key)  # in step: a cached load is a watched one
            self._remember(touched, key, entry)
            self.hits += 1
            return entry, True
        build_key: _BuildKey = (cwd, project.root, sources, touched)
        pending = self._building.get(build_key)
        if pending is not None:
            return await asyncio.shield(pending), False
        future: asyncio.Future[CachedContext] = asyncio.get_running_loop().create_future()
        self._building[build_key] = future
        epoch = self._epoch
        try:
            self.misses += 1
            flag = self.flag_settings
            entry = await asyncio.to_thread(build, cwd, project, touched, flag, sources)
            if nested is None:
                nested = await off_loop(len(touched), _nested, cwd, touched)
            conditions = entry.result.conditions
            flags = await off_loop(len(touched), _matched, conditions, touched)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here, so a lone waiter-less failure is not logged
            raise
        finally:
            # Not this load's any more: a change to the project while it ran (`_on_change`).
            superseded = self._building.get(build_key) is not future
            if not superseded:
                del self._building[build_key]
        key = (cwd, project.root, sources, nested, flags)
        self._conditions[key[:4]] = conditions
        self._conditions.move_to_end(key[:4])
        while len(self._conditions) > MAX_ENTRIES:
            self._conditions.popitem(last=False)
        self._remember(touched, key, entry)
        if epoch == self._epoch and not superseded:
            self._store(key, entry)
        future.set_result(entry)
        return entry, False

    async def _key(
        self, cwd: Path, root: Path, sources: frozenset[SettingSource], touched: frozenset[Path]
    ) -> tuple[_Key | None, frozenset[Path] | None]:
        """The key of the load these touched paths make (None when not known without one),
        and the nested folders they open (None when not judged: the key was known)."""
        prefix = (cwd, root, sources)
        candidates = [
            s
            for s in self._seen.values()
            if s.key[:3] == prefix and s.cached_in(self._entries) is not None
        ]
        for seen in candidates:
            if seen.touched is touched:  # a session's kept set (`SessionPaths.view`)
                return seen.key, None
        # A session's set of 50,000 paths: a comparison hashes and compares them all.
        found = await off_loop(len(touched), _base, candidates, touched) if candidates else None
        if found is not None:
            seen, added = found
            self._seen.pop(id(seen.touched), None)  # `touched` takes its place
            # Its nested folders are those of its paths now only while its load holds: a
            # touched name made a folder since opens one more, and the folders before, as a
            # key, gave the new load to sets that do not open it, or took another's load.
            base = seen.cached_in(self._entries)
            if base is None or not await self._still_valid(seen.key, base):
                found = None
            elif not added:
                return seen.key, None
            else:
                # A session's set grows: judge only what is new (its nested folders are those
                # of the paths before and of the new ones; 50,000 judged again cost ~0.5 s).
                nested = seen.key[3] | await off_loop(len(added), _nested, cwd, added)
                if nested == seen.key[3]:
                    judged_by = base.result.conditions  # the rules of its flags
                    flags = await off_loop(len(added), _matched, judged_by, added)
                    if len(flags) == len(seen.key[4]):  # else its flags were judged by other rules
                        return (
                            *seen.key[:4],
                            tuple(a or b for a, b in zip(seen.key[4], flags, strict=True)),
                        ), nested
        if found is None:
            nested = await off_loop(len(touched), _nested, cwd, touched)
        conditions = self._conditions.get((cwd, root, sources, nested))
        if conditions is None:
            return None, nested
        flags = await off_loop(len(touched), _matched, conditions, touched)
        return (cwd, root, sources, nested, flags), nested

    def _remember(self, touched: frozenset[Path], key: _Key, entry: CachedContext) -> None:
        self._seen[id(touched)] = _Seen(touched, key, weakref.ref(entry))
        self._seen.move_to_end(id(touched))
        while len(self._seen) > MAX_SEEN:
            self._seen.popitem(last=False)

    def _store(self, key: _Key, entry: CachedContext) -> None:
        self._entries[key] = entry
        self._entries.move_to_end(key)
        self._loaded[key] = _Loaded(entry.project_root, entry.involvement, entry.folders)
        self._loaded.move_to_end(key)
        evicted = False
        # One bound for both: every cached key is a loaded one (both are stored here, and a
        # load leaves `_loaded` only below, with its entry), and both are touched together,
        # so the cache is never the longer and its oldest is the list's oldest.
        while len(self._loaded) > MAX_ENTRIES:
            # What is no longer watched for is not cached either: nothing would drop it.
            self._entries.pop(self._loaded.popitem(last=False)[0], None)
            evicted = True
        if self._watcher is not None:
            if _watchable(entry.involvement):
                self._watcher.ensure(entry.involvement.watch_dirs)
            if evicted or self._watcher.wanted > MAX_WATCHED_TOTAL:
                self._release_watches()

    def _release_watches(self) -> None:
        """Let the watcher drop folders no loaded context needs any more, and, over
        MAX_WATCHED_TOTAL, those of the loads used longest ago."""
        watcher = self._watcher
        if watcher is None:
            return
        over = watcher.wanted > MAX_WATCHED_TOTAL
        keep: set[Path] = set()
        for loaded in reversed(self._loaded.values()):  # the newest first
            if not _watchable(loaded.involvement):
                continue
            dirs = loaded.involvement.watch_dirs
            if over and len(keep) + len(dirs - keep) > MAX_WATCHED_TOTAL // 2:
                break
            keep |= dirs
        for entry in self._entries.values():
            if entry.trusted and not entry.involvement.watch_dirs <= keep:
                entry.trusted = False  # no watch reports its changes now: stat it again
        watcher.retain(keep, now=over)

    async def _still_valid(self, key: _Key, entry: CachedContext) -> bool:
        if entry.trusted:
            return True
        stamps = entry.involvement.stamps
        if len(stamps) <= INLINE_STAMPS:
            same = realfs.unchanged(stamps)
        else:
            same = await asyncio.to_thread(realfs.unchanged, stamps)
            if self._entries.get(key) is not entry:
                return False  # dropped (a change reported) or replaced while it was checked
        if not same:
            self._entries.pop(key, None)
            return False
        # Stamps match now; from here on a live watcher over every folder sees any change.
        if (
            self._watcher is not None
            and _watchable(entry.involvement)
            and self._watcher.covers(entry.involvement.watch_dirs)
        ):
            entry.trusted = True
        return True

    # -- invalidation ---------------------------------------------------------------------
    def _on_change(self, changed: set[Path]) -> None:
        # No watch is released here: the entry is loaded again at once, needing the same ones.
        # A touched file is no dependency, but its turning into a folder is: its folder is
        # watched (cwd or a nested folder the load probed), and an entry trusted to the
        # watcher is never re-stat'ed, so only this event can tell.
        now_folders: dict[Path, bool] = {}
        hits: dict[Path, set[Path]] = {}
        by_parent: dict[Path, set[Path]] = {}
        for path in changed:
            by_parent.setdefault(path.parent, set()).add(path)
        for key, loaded in list(self._loaded.items()):
            hit = _hit(loaded, changed, by_parent, now_folders)
            if hit:
                self._entries.pop(key, None)
                hits.setdefault(loaded.project_root, set()).update(hit)
        for root, paths_hit in hits.items():
            # A load of the project running now may have read the old text: a client asking
            # again on the notice starts a new one rather than joining it, and it is not cached.
            for build_key in [k for k in self._building if k[1] == root]:
                del self._building[build_key]
            self._context_changed(root, paths_hit)

    def _on_lost(self) -> None:
        """Changes went unreported: every entry is re-stat'ed before it is served again, and
        every loaded project is told its context may have changed (no paths: not known)."""
        for entry in self._entries.values():
            entry.trusted = False
        for root in {loaded.project_root for loaded in self._loaded.values()}:
            self._context_changed(root, set())

    def _context_changed(self, root: Path, changed: set[Path]) -> None:
        """Tell subscribers at once, or hold the paths until CHANGED_INTERVAL_S after the last
        one for this project (then one notification carries all that came meanwhile)."""
        held = self._changed_held.get(root)
        if held is not None:
            held |= changed
            return
        wait = self._changed_at.get(root, -CHANGED_INTERVAL_S) + CHANGED_INTERVAL_S
        wait -= time.monotonic()
        if wait <= 0:
            self._send_changed(root, changed)
            return
        self._changed_held[root] = set(changed)
        asyncio.get_running_loop().call_later(wait, self._send_held, root)

    def _send_held(self, root: Path) -> None:
        held = self._changed_held.pop(root, None)
        if held is not None:
            self._send_changed(root, held)

    def _send_changed(self, root: Path, changed: set[Path]) -> None:
        self._changed_at[root] = time.monotonic()
        if len(self._changed_at) > MAX_ENTRIES:  # projects unheard of for long go first
            oldest = min(self._changed_at, key=self._changed_at.__getitem__)
            del self._changed_at[oldest]
        shown = sorted(str(p) for p in changed)[:MAX_CHANGED_PATHS]
        more = len(changed) - len(shown)
        told = self.host.notify(
            "context/changed", {"project": str(root), "paths": shown, "more": more}
        )
        self.host.spawn(told, worker="rules-watcher")

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
