"""The AutoMemory daemon service: one per daemon, state per memory directory.

Every writer of a memory directory (this service, the extraction and dream agents) holds
`writer_lock(memory_dir)` while it writes files there or `MEMORY.md`, so writes are
serialised per directory and the index never loses a line.

The request path stays cheap: the checked memory dir is kept per project (settings re-read
only when a settings file's stat changes; the real path re-checked on every call), the
index text for `get_context` per MEMORY.md stat, and a memory dir's periodic full sweep and
first load run in the background (`state`, `warm`).
"""

from __future__ import annotations

import asyncio
import os
import stat
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryd import paths
from memoryd import settings as settings_mod
from memoryd.automem import index as index_mod
from memoryd.automem import location, naming
from memoryd.automem.dedupe import find_near_duplicate, memory_text
from memoryd.automem.history import History, Version
from memoryd.automem.manifest import MemoryHeader
from memoryd.automem.memfile import file_name_for, render_memory
from memoryd.automem.ranker import RankerParams
from memoryd.automem.store import TEAM_DIR, DirState, scan_tree
from memoryd.errors import FeatureUnavailable, ForbiddenPath, InvalidParams, NotFound
from memoryd.fsutil import atomic_write_bytes, atomic_write_text, ensure_private_dir, open_dirs

if TYPE_CHECKING:
    from memoryd.core.project import Project
    from memoryd.daemon.app import Daemon


@dataclass(frozen=True)
class WriteResult:
    path: Path
    created: bool
    merged_into: Path | None


@dataclass(frozen=True)
class IndexView:
    path: Path
    text: str  # after the line/byte cut, with the warning when cut
    truncated: bool
    cap: str | None
    dangling: tuple[str, ...]  # index lines pointing at files that do not exist


@dataclass(frozen=True)
class IndexText:
    """MEMORY.md (or team/MEMORY.md) as it enters `get_context`."""

    path: Path
    text: str  # after the line/byte cut, with the warning when cut
    truncated: bool


WORKER = "automem"
WARM_SLICE_S = 0.004  # the first load of a memory dir yields to the event loop this often

# os.stat facts that change whenever a file's content or identity does.
_Stat = tuple[int, int, int, int, int] | tuple[str, int]


class AutoMemory:
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.sweep_interval_s = 2.0
        self.ranker_params = RankerParams()
        self.history = History(paths.state_dir() / "history")
        self._choices: dict[Path, location.MemoryDirChoice] = {}
        self._states: dict[Path, DirState] = {}
        self._locks: dict[Path, asyncio.Lock] = {}
        # Index lines waiting to be written, per memory dir: {key: (title, hook)}. Writers
        # queued behind one lock get their lines written in one MEMORY.md rewrite.
        self._pending_index: dict[Path, dict[str, tuple[str, str]]] = {}
        self.warnings: list[str] = []
        self._known_dirs: set[Path] = set()  # every memory dir handed out, for `snapshot`
        # Per project root: the settings with the stats of the files they were read from.
        self._settings_cache: dict[
            Path, tuple[tuple[_Stat | None, ...], settings_mod.EffectiveSettings]
        ] = {}
        # Per project root: the memory dir checked by `check_safe`, with what the check saw
        # (the dir's real path, home, config dir); re-checked when any of those moves.
        self._checked: dict[Path, tuple[tuple[str, Path, Path], Path]] = {}
        self._index_texts: dict[Path, tuple[_Stat, IndexText]] = {}
        self._warming: dict[Path, asyncio.Task[Any]] = {}

    # -- where, and whether -----------------------------------------------------------------
    def _settings(self, project: Project) -> settings_mod.EffectiveSettings:
        """`settings.load` for the project, re-read only when one of its files' stat changed."""
        root = project.root
        flag = self.daemon.config.flag_settings
        files = (
            settings_mod.policy_settings_path(),
            flag,
            settings_mod.user_settings_path(),
            settings_mod.project_settings_path(root),
            settings_mod.local_settings_path(root),
        )
        stamp = tuple(None if f is None else _stat_stamp(f) for f in files)
        cached = self._settings_cache.get(root)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        settings = settings_mod.load(root, flag)
        self._settings_cache[root] = (stamp, settings)
        return settings

    def enabled(self, project: Project) -> bool:
        return location.enabled(os.environ, self._settings(project))

    def _choice(self, project: Project) -> location.MemoryDirChoice:
        # The path is fixed per project root for the daemon's life (SPEC: cached, never dropped).
        choice = self._choices.get(project.root)
        if choice is None:
            default = paths.config_dir() / "projects" / project.key / "memory"
            choice = location.choose_memory_dir(
                env=os.environ, settings=self._settings(project), default=default, home=paths.home()
            )
            self.warnings.extend(choice.warnings)
            self._choices[project.root] = choice
        return choice

    def memory_dir(self, project: Project) -> Path:
        """The project's memory dir (not created here). FeatureUnavailable when auto memory
        is off; ForbiddenPath when it resolves somewhere memory must never be."""
        if not self.enabled(project):
            raise FeatureUnavailable(
                "auto memory is off: set autoMemoryEnabled to true in user settings "
                f"(`memctl call settings.set ...`) and unset {location.ENV_DISABLE}"
            )
        choice = self._choice(project)
        home, config_dir = paths.home(), paths.config_dir()
        # The check depends on where the dir really is: a symlink swapped in later is seen.
        seen = (os.path.realpath(choice.path), home, config_dir)
        checked = self._checked.get(project.root)
        if checked is not None and checked[0] == seen:
            return checked[1]
        location.check_safe(choice, home=home, config_dir=config_dir)
        memory_dir = Path(unicodedata.normalize("NFC", str(choice.path)))
        self._known_dirs.add(memory_dir)
        self._checked[project.root] = (seen, memory_dir)
        return memory_dir

    def team_dir(self, project: Project) -> Path:
        return self.memory_dir(project) / TEAM_DIR

    def _state(self, memory_dir: Path) -> DirState:
        state = self._states.get(memory_dir)
        if state is None:
            state = DirState(
                memory_dir, sweep_interval_s=self.sweep_interval_s, params=self.ranker_params
            )
            self._states[memory_dir] = state
        state.sweep_interval_s = self.sweep_interval_s
        return state

    def state(self, memory_dir: Path) -> DirState:
        """The dir's store, up to date. On the event loop, a periodic full sweep that is due
        runs in the background (stat in a thread, changes applied on the loop) instead of
        on this call; the cheap directory check (created, deleted, replaced files) always
        runs here, and so does the first load unless `warm` got there first."""
        state = self._state(memory_dir)
        if state.swept and state.sweep_interval_s > 0 and state.sweep_due() and _on_loop():
            state.mark_sweep_started()
            self.daemon.spawn(self._sweep_in_background(state), worker=WORKER)
        state.refresh()
        return state

    async def _sweep_in_background(self, state: DirState) -> None:
        before = state.stamps()
        seen = await asyncio.to_thread(scan_tree, state.memory_dir)
        state.apply_scan(before, seen)

    def warm(self, memory_dir: Path) -> None:
        """Load a memory dir that was never loaded, in the background, in slices that leave
        the event loop free (the first full load parses every file: ~0.2 s per 1,000)."""
        if memory_dir in self._warming or not _on_loop():
            return
        state = self._state(memory_dir)
        if not state.swept:
            task = self.daemon.spawn(self._warm(state), worker=WORKER)
            self._warming[memory_dir] = task

    async def _warm(self, state: DirState) -> None:
        try:
            started = time.monotonic()
            seen = await asyncio.to_thread(scan_tree, state.memory_dir)
            deadline = time.perf_counter() + WARM_SLICE_S
            for _ in state.load_steps(seen, started):
                if time.perf_counter() >= deadline:
                    await asyncio.sleep(0)
                    deadline = time.perf_counter() + WARM_SLICE_S
        finally:
            self._warming.pop(state.memory_dir, None)

    async def ready(self, memory_dir: Path) -> DirState:
        """`state`, after waiting for a background first load of the dir to finish (rather
        than doing the rest of it at once on this call)."""
        task = self._warming.get(memory_dir)
        if task is not None:
            await asyncio.wait({task})
        return self.state(memory_dir)

    def writer_lock(self, memory_dir: Path) -> asyncio.Lock:
        return self._locks.setdefault(memory_dir, asyncio.Lock())

    def invalidate(self, project: Project | None = None) -> None:
        if project is None:
            for state in self._states.values():
                state.invalidate()
            return
        choice = self._choices.get(project.root)
        if choice is not None and choice.path in self._states:
            self._states[choice.path].invalidate()

    # -- reading ----------------------------------------------------------------------------
    def manifest(self, project: Project) -> list[MemoryHeader]:
        return self.state(self.memory_dir(project)).headers()

    def resolve_file(self, project: Project, path: str, *, must_exist: bool) -> tuple[Path, str]:
        """(absolute path, key relative to the memory dir) of a memory file named by an
        absolute path or one relative to the memory dir; ForbiddenPath outside it."""
        memory_dir = self.memory_dir(project)
        return _resolve_inside(memory_dir, path, must_exist=must_exist)

    def read_index(self, project: Project, *, team: bool = False) -> IndexView:
        """MEMORY.md (or team/MEMORY.md) as it enters a prompt: cut, with dangling lines."""
        memory_dir = self.memory_dir(project)
        path = (memory_dir / TEAM_DIR if team else memory_dir) / index_mod.INDEX_NAME
        text = _read_text(path)
        state = self.state(memory_dir)
        existing = [_index_file(k, team) for k in state.entries if _is_team(k) == team]
        cut = index_mod.truncate(text)
        missing = tuple(e.file for e in index_mod.dangling(text, existing))
        return IndexView(path, cut.text, cut.truncated, cut.cap, missing)

    def index_text(self, memory_dir: Path, *, team: bool = False) -> IndexText | None:
        """MEMORY.md (or team/MEMORY.md) cut to its caps, as `get_context` shows it; None when
        it is not a file. Kept per the file's stat, so a warm call costs one `stat`."""
        path = (memory_dir / TEAM_DIR if team else memory_dir) / index_mod.INDEX_NAME
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError:
            _read_text(path)  # raises what reading it raises, as it always did
            return None
        if not stat.S_ISREG(st.st_mode):
            _read_text(path)  # a directory raises; anything else is no index
            return None
        stamp = _stamp_of(st)
        cached = self._index_texts.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        cut = index_mod.truncate(_read_text(path))
        view = IndexText(path, cut.text, cut.truncated)
        self._index_texts[path] = (stamp, view)
        return view

    def search(
        self, project: Project, query: str, limit: int, exclude: set[str]
    ) -> list[MemoryHeader]:
        """The local ranker's best memories; `exclude` holds absolute paths or keys."""
        memory_dir = self.memory_dir(project)
        state = self.state(memory_dir)
        excluded = set()
        for item in exclude:
            key = item
            if os.path.isabs(item):
                try:
                    key = Path(item).relative_to(memory_dir).as_posix()
                except ValueError:
                    continue
            if key in state.entries:
                excluded.add(key)
        hits = state.index.search(query, limit, excluded)
        return [state.entries[k].header for k, _ in hits if k in state.entries]

    # -- writing ----------------------------------------------------------------------------
    async def write_memory(
        self,
        project: Project,
        *,
        type: str,
        name: str,
        description: str,
        body: str,
        team: bool = False,
        file: str | None = None,
    ) -> WriteResult:
        text = render_memory(type, name, description, body)  # validates first, before any I/O
        memory_dir = self.memory_dir(project)
        folder = memory_dir / TEAM_DIR if team else memory_dir
        async with self.writer_lock(memory_dir):
            state = self.state(memory_dir)
            merged_into: Path | None = None
            if file is not None:
                target, key = _resolve_inside(folder, file, must_exist=False)
                key = f"{TEAM_DIR}/{key}" if team else key
            else:
                key, merged = self._key_for_name(state, type, name, description, body, team)
                target = memory_dir / key
                merged_into = target if merged else None
            _check_target(memory_dir, target)
            created = not target.exists()
            if not created:
                self._snapshot_sync(memory_dir, key, target, "overwrite")
            ensure_private_dir(memory_dir)
            if team:
                ensure_private_dir(folder)
            ensure_private_dir(target.parent)
            atomic_write_text(target, text)
            state.note_written(key, target)
            self._pending_index.setdefault(memory_dir, {})[key] = (name, description)
        await self._flush_index(memory_dir)
        await self.daemon.notify(
            "memory/saved", {"path": str(target), "project": str(project.root)}
        )
        return WriteResult(target, created, merged_into)

    @staticmethod
    def _key_for_name(
        state: DirState, type: str, name: str, description: str, body: str, team: bool
    ) -> tuple[str, bool]:
        """(key, merged) for a write by name: the file of the memory with this name, else a
        near duplicate's (a reported merge), else a free file name (suffixed when another
        memory already has the name's file), so a different memory is never replaced."""
        base = (f"{TEAM_DIR}/" if team else "") + file_name_for(type, name)
        names = {k: e.header.name for k, e in state.entries.items()}
        own = naming.own_file(base, name, names)
        if own is not None:
            return own, False
        same_place = [e.candidate for k, e in state.entries.items() if _is_team(k) == team]
        duplicate = find_near_duplicate(type, memory_text(name, description, body), same_place)
        if duplicate is not None:
            return duplicate, True
        taken = lambda key: key in names or os.path.lexists(state.memory_dir / key)  # noqa: E731
        return naming.free_file(base, taken), False

    async def delete_memory(self, project: Project, path: str | Path) -> Path:
        memory_dir = self.memory_dir(project)
        async with self.writer_lock(memory_dir):
            target, key = _resolve_inside(memory_dir, str(path), must_exist=True)
            if naming.is_index_name(target.name):
                raise ForbiddenPath(f"{target.name} is the index; delete memories, not the index")
            state = self.state(memory_dir)
            self._snapshot_sync(memory_dir, key, target, "delete")
            target.unlink()
            self._remove_index_line(memory_dir, key)
            self._pending_index.get(memory_dir, {}).pop(key, None)
            state.note_deleted(key, target)
        return target

    async def snapshot(self, path: Path) -> Version | None:
        """Keep the current content of a memory file before someone overwrites or deletes it."""
        for memory_dir in sorted(self._known_dirs, key=lambda p: len(str(p)), reverse=True):
            try:
                target, key = _resolve_inside(memory_dir, str(path), must_exist=False)
            except ForbiddenPath:
                continue
            if not target.is_file():
                return None
            return self._snapshot_sync(memory_dir, key, target, "overwrite")
        raise ForbiddenPath(f"{path} is not in a known memory directory")

    def _snapshot_sync(
        self, memory_dir: Path, key: str, target: Path, reason: str
    ) -> Version | None:
        try:
            content = target.read_bytes()
        except FileNotFoundError:
            return None
        return self.history.save(memory_dir, key, content, reason)

    def versions(self, project: Project, path: str) -> tuple[Path, list[Version]]:
        memory_dir = self.memory_dir(project)
        target, key = _resolve_inside(memory_dir, path, must_exist=False)
        return target, self.history.versions(memory_dir, key)

    async def restore(self, project: Project, path: str, version: str) -> Path:
        memory_dir = self.memory_dir(project)
        async with self.writer_lock(memory_dir):
            target, key = _resolve_inside(memory_dir, path, must_exist=False)
            _check_target(memory_dir, target)  # not the index, not through a symlink
            content = self.history.read(memory_dir, key, version)
            state = self.state(memory_dir)
            self._snapshot_sync(memory_dir, key, target, "restore")
            ensure_private_dir(target.parent)
            atomic_write_bytes(target, content)
            state.note_written(key, target)
            entry = state.entries[key]
            self._pending_index.setdefault(memory_dir, {})[key] = (
                entry.header.name,
                entry.header.description,
            )
        await self._flush_index(memory_dir)
        await self.daemon.notify(
            "memory/saved", {"path": str(target), "project": str(project.root)}
        )
        return target

    # -- the index --------------------------------------------------------------------------
    def _index_parts(self, memory_dir: Path, key: str) -> tuple[Path, str]:
        if key.startswith(f"{TEAM_DIR}/"):
            return memory_dir / TEAM_DIR / index_mod.INDEX_NAME, key[len(TEAM_DIR) + 1 :]
        return memory_dir / index_mod.INDEX_NAME, key

    async def _flush_index(self, memory_dir: Path) -> None:
        """Write every pending index line of `memory_dir` (one rewrite per index file)."""
        async with self.writer_lock(memory_dir):
            pending = self._pending_index.pop(memory_dir, None)
            if not pending:
                return  # an earlier writer's flush already wrote ours
            state = self.state(memory_dir)
            for team in (False, True):
                lines = {
                    _index_file(k, team): index_mod.index_line(title, _index_file(k, team), hook)
                    for k, (title, hook) in pending.items()
                    if _is_team(k) == team
                }
                if not lines:
                    continue
                index_path = (
                    memory_dir / TEAM_DIR / index_mod.INDEX_NAME
                    if team
                    else memory_dir / index_mod.INDEX_NAME
                )
                text = _read_text(index_path)
                present = {_index_file(k, team) for k in state.entries if _is_team(k) == team}
                new = index_mod.apply(text, lines, present | set(lines))
                if new != text or not index_path.exists():
                    atomic_write_text(index_path, new)
                state.note_written_dir(index_path.parent)

    def _remove_index_line(self, memory_dir: Path, key: str) -> None:
        index_path, file = self._index_parts(memory_dir, key)
        text = _read_text(index_path)
        new = index_mod.remove(text, file)
        if new != text:
            atomic_write_text(index_path, new)

    async def reconcile_index(self, project: Project) -> dict[str, int]:
        """Bring MEMORY.md (and team/MEMORY.md) in step with the files after external writes."""
        memory_dir = self.memory_dir(project)
        added = removed = 0
        async with self.writer_lock(memory_dir):
            state = self.state(memory_dir)
            state.refresh(force=True)
            for team in (False, True):
                index_path = memory_dir / (f"{TEAM_DIR}/" if team else "") / index_mod.INDEX_NAME
                files = {
                    _index_file(k, team): (e.header.name, e.header.description)
                    for k, e in state.entries.items()
                    if _is_team(k) == team
                }
                text = _read_text(index_path)
                if not files and not text:
                    continue
                before = {e.file for e in index_mod.parse_index(text)}
                new = index_mod.reconcile(text, files)
                after = {e.file for e in index_mod.parse_index(new)}
                added += len(after - before)
                removed += len(before - after)
                if new != text:
                    atomic_write_text(index_path, new)
            state.invalidate()
        return {"added": added, "removed": removed}

    # -- daemon status ----------------------------------------------------------------------
    def feature_status(self) -> dict[str, Any]:
        return {
            "auto_memory": {
                "enabled": location.env_enabled(os.environ),
                "memory_dirs": len(self._states),
                "memories": sum(len(s.entries) for s in self._states.values()),
                "warnings": self.warnings[-5:],
                "open_dirs": [
                    {"path": str(path), "mode": f"{mode:04o}"}
                    for path, mode in open_dirs(self._private_dirs())
                ],
            }
        }

    def _private_dirs(self) -> list[Path]:
        """The folders memoryd writes in and keeps 0700: each memory dir with its parents up
        to the config dir, and the history under the state dir."""
        config_dir = paths.config_dir()
        found = {self.history.root, self.history.root.parent}
        for memory_dir in self._known_dirs:
            found.add(memory_dir)
            if config_dir in memory_dir.parents:
                found.update(p for p in memory_dir.parents if config_dir in p.parents)
                found.add(config_dir)
        return sorted(found)


def _on_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _stamp_of(st: os.stat_result) -> _Stat:
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_dev)


def _stat_stamp(path: Path) -> _Stat:
    try:
        return _stamp_of(os.stat(path))
    except OSError as exc:
        return (type(exc).__name__, exc.errno or 0)


def _is_team(key: str) -> bool:
    return key.startswith(f"{TEAM_DIR}/")


def _index_file(key: str, team: bool) -> str:
    """The key as the index of its folder names it (team keys lose their `team/`)."""
    return key[len(TEAM_DIR) + 1 :] if team else key


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, NotADirectoryError):
        return ""


def _resolve_inside(folder: Path, path: str, *, must_exist: bool) -> tuple[Path, str]:
    """A memory file path checked against `folder` on its real path (symlinks resolved)."""
    if not path or "\x00" in path:
        raise InvalidParams("path: must be a non-empty path without NUL bytes")
    raw = unicodedata.normalize("NFC", path)
    candidate = Path(raw) if os.path.isabs(raw) else folder / raw
    lexical = Path(os.path.normpath(candidate))
    base = Path(os.path.normpath(folder))
    if base not in lexical.parents:
        raise ForbiddenPath(f"{path} is outside the memory directory {folder}")
    real_base = base.resolve()
    real = lexical.resolve()
    if real_base not in real.parents:
        raise ForbiddenPath(f"{path} resolves to {real}, outside the memory directory {folder}")
    if lexical.suffix != ".md":
        raise InvalidParams(f"path: memory files end in .md, got {lexical.name!r}")
    if must_exist and not lexical.is_file():
        raise NotFound(f"no memory file {lexical}")
    key = lexical.relative_to(base).as_posix()
    return lexical, key


def _check_target(memory_dir: Path, target: Path) -> None:
    if naming.is_index_name(target.name):
        raise InvalidParams(
            f"file: {target.name} names the index ({index_mod.INDEX_NAME}), not a memory"
        )
    if target.is_symlink():
        raise ForbiddenPath(f"{target} is a symlink; refusing to write through it")
    _resolve_inside(memory_dir, str(target), must_exist=False)
