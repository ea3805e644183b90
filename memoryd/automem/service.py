"""The AutoMemory daemon service: one per daemon, state per memory directory.

It puts together the parts, each in its own module: `settings_cache` (settings re-read only
when a settings file's stat changes), `dirs` (which dir, is it on, is it safe), `warmup`
(first load and periodic sweep of a dir in the background), `index_cache` (the index text
for `get_context` per MEMORY.md stat), `writes` (write, delete, history, restore),
`index_writer` (flush queued index lines, reconcile) and `locks` (one writer lock per dir,
held by every writer of the dir — this service, the extraction and dream agents — in
every memoryd process of the user).
"""

from __future__ import annotations

import os
import posixpath
import time
from collections.abc import Awaitable, Collection, Container
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryd import paths
from memoryd.automem import index as index_mod
from memoryd.automem import location
from memoryd.automem.dirs import MemoryDirs, resolve_inside
from memoryd.automem.embeddings.semantic import SemanticRecall
from memoryd.automem.history import History
from memoryd.automem.index_cache import IndexText, IndexTexts
from memoryd.automem.index_writer import IndexWriter
from memoryd.automem.layout import (
    IndexIsAFolder,
    index_file,
    index_path,
    is_team,
    on_disk,
    read_index,
)
from memoryd.automem.locks import WriterLocks
from memoryd.automem.manifest import MemoryHeader
from memoryd.automem.recall.explain import Why, explain
from memoryd.automem.recall.query import query_excerpt
from memoryd.automem.recall.ranker import LexicalScores, RankerParams, RecallIndex, Semantic
from memoryd.automem.settings_cache import SettingsCache
from memoryd.automem.stamps import Stat, stat_stamp
from memoryd.automem.store import TEAM_DIR, DirState
from memoryd.automem.warmup import WORKER, DirStates, Spawn, on_loop
from memoryd.automem.writes import MemoryWrites, WriteResult
from memoryd.fsutil import open_dirs

if TYPE_CHECKING:
    from memoryd.automem.embeddings.semantic import QueryEmbedding
    from memoryd.core.host import Host
    from memoryd.core.project import Project

__all__ = ["AutoMemory", "IndexText", "IndexView", "WriteResult"]

OPEN_DIRS_TTL = 2.0  # seconds a too-open-folders report is reused by `status`


@dataclass(frozen=True)
class Ranking:
    """What the local ranker returned for a query, and what it ranked by (`recall/explain.py`)."""

    headers: list[MemoryHeader]
    memory_dir: Path
    index: RecallIndex
    lexical: LexicalScores
    semantic: Semantic | None  # the semantic scores fused in (hybrid ranking)
    cosines: Semantic | None  # every memory's pooled cosine on the floors' scale
    floors: bool = True  # whether the ranking applied the relevance floors to the cosines

    def why(self, headers: list[MemoryHeader]) -> dict[str, Why]:
        """What the ranker saw in each of `headers` (`recall/explain.py`; those it
        returned, or those a model chose), by path."""
        keys = {
            str(h.path): h.path.relative_to(self.memory_dir).as_posix()
            for h in headers
            if h.path.is_relative_to(self.memory_dir)
        }
        whys = explain(
            self.index,
            self.lexical,
            list(keys.values()),
            self.semantic,
            self.cosines,
            floors=self.floors,
        )
        return {path: whys[key] for path, key in keys.items()}


@dataclass(frozen=True)
class IndexView:
    path: Path
    text: str  # after the line/byte cut, with the warning when cut
    truncated: bool
    cap: str | None
    dangling: tuple[str, ...]  # index lines pointing at files that do not exist
    orphans: tuple[str, ...] = ()  # memory files no index line points at
    problem: str | None = None  # why there is no index to read (a folder in its place)


_UNTIDY_ENDS = ("/", "/.", "/..")


def surfaced_keys(items: Collection[str], memory_dir: Path, entries: Container[str]) -> set[str]:
    """The keys of `entries` that `items` (a recall's `already_surfaced`: absolute paths or
    keys) name. Strings only, compared once each: the list may hold 100,000 paths and this runs
    on the event loop, where a `Path.relative_to` each held every other request 0.7 s."""
    prefix = str(memory_dir) + "/"
    found: set[str] = set()
    for item in items:
        key = item
        if item.startswith("/"):
            if "//" in item or "/./" in item or "/../" in item or item.endswith(_UNTIDY_ENDS):
                item = posixpath.normpath(item)  # read as a path: "a//b", "a/./b", "a/../b"
            if not item.startswith(prefix):
                continue
            key = item[len(prefix) :]
        if key in entries:
            found.add(key)
    return found


class AutoMemory:
    def __init__(self, host: Host, *, flag_settings: Path | None) -> None:
        self.settings = SettingsCache(flag_settings)
        self.dirs = MemoryDirs(self.settings)
        self._spawn: Spawn = lambda coro: host.spawn(coro, worker=WORKER)
        self.states = DirStates(self._spawn)
        # Held across processes (a second daemon of this user on another socket); what another
        # process wrote meanwhile is looked for again.
        self.writer_lock = WriterLocks(paths.state_dir() / "locks", self.states.invalidate)
        self.index_writer = IndexWriter(self.states, self.writer_lock, self.dirs.recheck)
        self.states.index_orphans = self.index_writer.index_orphans
        self.index_texts = IndexTexts()
        # (memory dir, team) → ((generation, index stamp, its folder's stamp), view)
        self._index_views: dict[tuple[Path, bool], tuple[tuple[int, Stat, Stat], IndexView]] = {}
        self.semantic = SemanticRecall()  # loads nothing until a memory dir is used
        self._embedding: set[Path] = set()  # dirs whose memories `warm` sent to the model
        self.states.on_evict.append(self._forget_dir)
        self.writes = MemoryWrites(
            self.dirs,
            self.states,
            self.writer_lock,
            self.index_writer,
            History(paths.state_dir() / "history"),
            host.notify,
        )
        # Writing is the `writes` part's; the service offers its methods as its own.
        self.write_memory = self.writes.write_memory
        self.delete_memory = self.writes.delete_memory
        self.snapshot = self.writes.snapshot  # keeps a version before an outside overwrite
        self.versions = self.writes.versions
        self.restore = self.writes.restore
        self.state = self.states.state
        self.ready = self.states.ready
        # (when, how many dirs were known, the report): `status` is polled by status lines
        # many times a second, and a stat per folder per poll was a fifth of its cost.
        self._open_dirs: tuple[float, int, list[dict[str, str]]] = (-OPEN_DIRS_TTL, -1, [])
        # (config dir, history root) they were found under, memory dirs looked at, the folders
        self._private: tuple[tuple[Path, Path] | None, set[Path], set[Path]] = (None, set(), set())
        self._private_sorted: list[Path] | None = None

    # -- where, and whether -----------------------------------------------------------------
    @property
    def warnings(self) -> list[str]:
        return self.dirs.warnings

    @property
    def history(self) -> History:
        return self.writes.history

    def enabled(self, project: Project) -> bool:
        return self.dirs.enabled(project)

    def memory_dir(self, project: Project) -> Path:
        """The project's memory dir (not created here). FeatureUnavailable when auto memory
        is off; ForbiddenPath when it resolves somewhere memory must never be."""
        return self.dirs.memory_dir(project)

    def team_dir(self, project: Project) -> Path:
        return self.memory_dir(project) / TEAM_DIR

    # -- the warm view of a dir -------------------------------------------------------------
    @property
    def sweep_interval_s(self) -> float:
        return self.states.sweep_interval_s

    @sweep_interval_s.setter
    def sweep_interval_s(self, value: float) -> None:
        self.states.sweep_interval_s = value

    @property
    def ranker_params(self) -> RankerParams:
        return self.states.ranker_params

    def invalidate(self, project: Project | None = None) -> None:
        if project is None:
            self.states.invalidate()
            return
        chosen = self.dirs.chosen(project)
        if chosen is not None:
            self.states.invalidate(chosen)

    def warm(self, memory_dir: Path) -> None:
        """Load a memory dir never loaded, in the background (`DirStates.warm`). With
        embeddings wanted, then load the model and embed the dir's memories too: a session's
        first prompt comes seconds after its `get_context`, and its recall is hybrid only if
        the model is loaded by then (a daemon started by that session's first hook has not
        loaded it yet)."""
        self.states.warm(memory_dir)
        if memory_dir in self._embedding or not self.semantic.wanted or not on_loop():
            return
        self._embedding.add(memory_dir)
        self._spawn(self._embed_when_loaded(memory_dir))

    def _forget_dir(self, memory_dir: Path) -> None:
        """A dir let go of (`warmup.MAX_WARM_DIRS`): what was derived from it goes too, its
        vector stores included, and its memories are sent to the model again when it is
        loaded again (only those without a stored vector are embedded)."""
        for team in (False, True):
            self._index_views.pop((memory_dir, team), None)
        self.index_texts.forget(memory_dir)
        self._embedding.discard(memory_dir)
        self.semantic.forget(memory_dir)

    async def _embed_when_loaded(self, memory_dir: Path) -> None:
        state = await self.states.ready(memory_dir)
        self.semantic.sync(memory_dir, state.generation, state.embed_texts)

    # -- reading ----------------------------------------------------------------------------
    async def loaded(self, project: Project) -> None:
        """Once the project's memory dir is loaded. A dir never loaded before is loaded in the
        background, in event-loop slices, so the daemon keeps answering other requests
        meanwhile (10,000 files take seconds to parse)."""
        await self._loaded(self.memory_dir(project))

    async def _loaded(self, memory_dir: Path) -> DirState:
        self.warm(memory_dir)
        return await self.ready(memory_dir)

    def manifest(self, project: Project) -> list[MemoryHeader]:
        return self.state(self.memory_dir(project)).headers()

    def resolve_file(self, project: Project, path: str, *, must_exist: bool) -> tuple[Path, str]:
        """(absolute path, key relative to the memory dir) of a memory file named by an
        absolute path or one relative to the memory dir; ForbiddenPath outside it."""
        return resolve_inside(self.memory_dir(project), path, must_exist=must_exist)

    def read_index(self, project: Project, *, team: bool = False) -> IndexView:
        """MEMORY.md (or team/MEMORY.md) as it enters a prompt: cut, with dangling lines and
        orphans (files without a line)."""
        memory_dir = self.memory_dir(project)
        path = index_path(memory_dir, team=team)
        state = self.state(memory_dir)
        # Kept while the memories, the index and its folder (a file a line links to) stay as
        # they are: each warm `memory.list` parsed the whole index twice on the event loop
        # (180-510 ms at 10,000 memories).
        seen = (state.generation, stat_stamp(path), stat_stamp(path.parent))
        cached = self._index_views.get((memory_dir, team))
        if cached is not None and cached[0] == seen:
            return cached[1]
        view = self._index_view(path, state, team)
        self._index_views[(memory_dir, team)] = (seen, view)
        return view

    @staticmethod
    def _index_view(path: Path, state: DirState, team: bool) -> IndexView:
        existing = [index_file(k, team) for k in state.entries if is_team(k) == team]
        try:
            text = read_index(path)
        except IndexIsAFolder as exc:
            # The memories are still listed; every file is an orphan until the folder moves.
            return IndexView(path, "", False, None, (), tuple(sorted(existing)), str(exc))
        try:
            file_size: int | None = os.stat(path, follow_symlinks=False).st_size
        except OSError:
            file_size = None
        cut = index_mod.truncate(text, file_size)
        exists = on_disk(path.parent, set(existing))
        dangling, unlisted = index_mod.dangling_and_unlisted(text, sorted(existing), exists)
        missing, orphans = tuple(e.file for e in dangling), tuple(unlisted)
        return IndexView(path, cut.text, cut.truncated, cut.cap, missing, orphans)

    def index_text(self, memory_dir: Path, *, team: bool = False) -> IndexText | None:
        """MEMORY.md (or team/MEMORY.md) cut to its caps, as `get_context` shows it; None when
        it is not a file. Kept per the file's stat, so a warm call costs one `stat`."""
        return self.index_texts.get(memory_dir, team=team)

    async def ranking(
        self,
        project: Project,
        query: str,
        limit: int,
        exclude: set[str],
        query_vector: Awaitable[QueryEmbedding | None] | None = None,
        *,
        floors: bool = True,
    ) -> Ranking:
        """The local ranker's best memories and the signals they were ranked by; `exclude`
        holds absolute paths or keys. `query_vector` (`semantic.embed_query` running in a
        thread) makes it hybrid: it is awaited only once the lexical scores are made, so the
        two are computed at once; then memories too unlike the query are not returned, unless
        `floors` is False (candidates for the model to judge). A dir never loaded is first
        loaded as `loaded` does it."""
        memory_dir = self.memory_dir(project)
        state = await self._loaded(memory_dir)
        if self.semantic.wanted:
            self.semantic.sync(memory_dir, state.generation, state.embed_texts)
        excluded = surfaced_keys(exclude, memory_dir, state.entries)
        # the clock read here, at the edge: "yesterday" in a query counts from today
        lexical = state.index.lexical(query_excerpt(query), excluded, date.today())
        vector = await query_vector if query_vector is not None else None
        similar = None
        if vector is not None:  # embeddings on: numpy and the model are loaded already
            from memoryd.automem.embeddings.late_interaction import CANDIDATES

            lexical_best = state.index.best(lexical, CANDIDATES)
            similar = self.semantic.similarities(memory_dir, vector, lexical_best)
        semantic = similar.scores if similar is not None else None
        cosines = similar.cosines if similar is not None else None
        hits = state.index.rank(lexical, limit, semantic, cosines if floors else None)
        headers = [state.entries[k].header for k, _ in hits if k in state.entries]
        return Ranking(headers, memory_dir, state.index, lexical, semantic, cosines, floors)

    async def reconcile_index(self, project: Project) -> dict[str, Any]:
        """Bring MEMORY.md (and team/MEMORY.md) in step with the files after external writes."""
        return await self.index_writer.reconcile(self.memory_dir(project))

    async def close(self) -> None:
        """Stop the embedding thread (after the batch it is on): a stopped daemon leaves no
        thread running behind it."""
        self.semantic.close()

    # -- daemon status ----------------------------------------------------------------------
    def feature_status(self) -> dict[str, Any]:
        states = self.states.states
        return {
            "auto_memory": {
                "enabled": location.env_enabled(os.environ),
                "memory_dirs": len(states),
                "memories": sum(len(s.entries) for s in states.values()),
                "orphans_indexed": self.index_writer.orphans_indexed,
                "warnings": self.warnings[-5:],
                "ranker": self.semantic.status(),
                "embeddings": self.semantic.report(),
                "open_dirs": self._open_dirs_report(),
            }
        }

    def _open_dirs_report(self) -> list[dict[str, str]]:
        now, known = time.monotonic(), len(self.dirs.known)
        checked_at, checked_known, report = self._open_dirs
        if now - checked_at >= OPEN_DIRS_TTL or known != checked_known:
            report = [
                {"path": str(path), "mode": f"{mode:04o}"}
                for path, mode in open_dirs(self._private_dirs())
            ]
            self._open_dirs = (now, known, report)
        return report

    def _private_dirs(self) -> list[Path]:
        """The folders memoryd writes in and keeps 0700: each memory dir with its parents up
        to the config dir, and the history under the state dir. Each dir is looked at once:
        `known` holds every project the daemon ever saw, and asking each dir's `parents` of
        each other's took 150 ms of the event loop per `status` at 4,000."""
        config_dir, history = paths.config_dir(), self.history.root
        roots, done, found = self._private
        if roots != (config_dir, history):
            done, found = set(), {history, history.parent}
            self._private = ((config_dir, history), done, found)
            self._private_sorted = None
        new = self.dirs.known - done
        if not new and self._private_sorted is not None:
            return self._private_sorted
        for memory_dir in new:
            done.add(memory_dir)
            found.add(memory_dir)
            if memory_dir != config_dir and memory_dir.is_relative_to(config_dir):
                found.add(config_dir)
                parent = memory_dir.parent
                while parent != config_dir:
                    found.add(parent)
                    parent = parent.parent
        self._private_sorted = sorted(found, key=str)
        return self._private_sorted
