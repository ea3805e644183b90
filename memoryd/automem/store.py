"""The warm view of one memory directory: headers, recall index, dedupe candidates.

Kept correct without watchers: every access stats the directories (creating, deleting or
atomically replacing a file changes its directory's mtime), and a full per-file stat sweep
runs when a directory changed or `sweep_interval_s` has passed (catches in-place edits).
Only files whose (mtime, size) changed are re-read, so a changed file costs one parse and
one index update.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from memoryd.automem.dates import first_date
from memoryd.automem.dedupe import Candidate, memory_text
from memoryd.automem.index import INDEX_NAME
from memoryd.automem.manifest import MemoryHeader
from memoryd.automem.memfile import MAX_FILE_BYTES, parse_memory
from memoryd.automem.ranker import RankerParams, RecallIndex

TEAM_DIR = "team"
_MAX_TEAM_DEPTH = 8


@dataclass(frozen=True)
class Entry:
    header: MemoryHeader
    stamp: tuple[int, int, int]  # (mtime_ns, size, inode)
    candidate: Candidate


class DirState:
    def __init__(
        self, memory_dir: Path, *, sweep_interval_s: float = 2.0, params: RankerParams | None = None
    ) -> None:
        self.memory_dir = memory_dir
        self.sweep_interval_s = sweep_interval_s
        self.index = RecallIndex(params)
        self.entries: dict[str, Entry] = {}
        self._dir_stamps: dict[Path, int] = {}
        self._last_sweep = float("-inf")
        self.generation = 0  # bumps on every change, for callers that cache derived views
        self.updates = 0  # files (re)analysed, for status and the benchmark

    # -- freshness --------------------------------------------------------------------------
    def _dirs_changed(self) -> bool:
        if not self._dir_stamps:
            return True
        for directory, stamp in self._dir_stamps.items():
            try:
                if os.stat(directory).st_mtime_ns != stamp:
                    return True
            except OSError:
                return True
        # A team/ folder that appeared since the last sweep.
        team = self.memory_dir / TEAM_DIR
        return team not in self._dir_stamps and team.is_dir()

    def refresh(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last_sweep >= self.sweep_interval_s:
            self._sweep(full=True)
            self._last_sweep = now
        elif self._dirs_changed():
            # Names and inodes come from readdir without a stat per file: a created, deleted
            # or atomically replaced file (new inode) is found; only those files are read.
            self._sweep(full=False)

    def invalidate(self) -> None:
        self._dir_stamps.clear()

    def _sweep(self, *, full: bool) -> None:
        seen: dict[str, tuple[str, tuple[int, int, int]]] = {}
        stamps: dict[Path, int] = {}
        self._scan(self.memory_dir, "", seen, stamps, depth=0, team=False, full=full)
        self._dir_stamps = stamps
        changed = False
        for key in [k for k in self.entries if k not in seen]:
            self._drop(key)
            changed = True
        for key, (path, stamp) in seen.items():
            entry = self.entries.get(key)
            if entry is None or entry.stamp != stamp:
                self._load(key, Path(path), stamp)
                changed = True
        if changed:
            self.generation += 1

    def _scan(
        self,
        directory: Path,
        prefix: str,
        seen: dict[str, tuple[str, tuple[int, int, int]]],
        stamps: dict[Path, int],
        *,
        depth: int,
        team: bool,
        full: bool,
    ) -> None:
        try:
            stamps[directory] = os.stat(directory).st_mtime_ns
            iterator = os.scandir(directory)
        except OSError:
            return
        with iterator:
            for item in iterator:
                name = item.name
                if name.startswith("."):
                    continue
                try:
                    # Symlinks are not followed: a link could point anywhere (e.g. ~/.ssh).
                    if item.is_dir(follow_symlinks=False):
                        if (team or (depth == 0 and name == TEAM_DIR)) and depth < _MAX_TEAM_DEPTH:
                            self._scan(
                                Path(item.path),
                                f"{prefix}{name}/",
                                seen,
                                stamps,
                                depth=depth + 1,
                                team=True,
                                full=full,
                            )
                        continue
                    if (
                        not name.endswith(".md")
                        or name == INDEX_NAME
                        or not item.is_file(follow_symlinks=False)
                    ):
                        continue
                    key = prefix + name
                    known = self.entries.get(key)
                    if not full and known is not None and known.stamp[2] == item.inode():
                        seen[key] = (item.path, known.stamp)
                        continue
                    st = item.stat(follow_symlinks=False)
                except OSError:
                    continue
                seen[key] = (item.path, (st.st_mtime_ns, st.st_size, st.st_ino))

    def _load(self, key: str, path: Path, stamp: tuple[int, int, int]) -> None:
        try:
            with open(path, "rb") as handle:
                raw = handle.read(MAX_FILE_BYTES * 2)
        except OSError:
            self._drop(key)
            return
        text = raw.decode("utf-8", errors="replace")
        fallback = key.rsplit("/", 1)[-1].removesuffix(".md")
        parsed = parse_memory(text, fallback)
        header = MemoryHeader(
            path=path,
            name=parsed.name,
            description=parsed.description,
            type=parsed.type,
            mtime=stamp[0] / 1e9,
            team=key.startswith(f"{TEAM_DIR}/"),
            problem=parsed.problem,
            file=key,
        )
        candidate = Candidate.of(
            key, parsed.type, memory_text(parsed.name, parsed.description, parsed.body)
        )
        self.entries[key] = Entry(header, stamp, candidate)
        when = first_date(parsed.body) or first_date(parsed.description)
        self.index.upsert(key, parsed.name, parsed.description, parsed.body, when)
        self.updates += 1

    def _drop(self, key: str) -> None:
        self.entries.pop(key, None)
        self.index.remove(key)

    def note_written(self, key: str, path: Path) -> None:
        """After our own write: analyse just that file, now."""
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            self._drop(key)
        else:
            self._load(key, path, (st.st_mtime_ns, st.st_size, st.st_ino))
        self.generation += 1
        self._restamp(path.parent)

    def note_deleted(self, key: str, path: Path) -> None:
        self._drop(key)
        self.generation += 1
        self._restamp(path.parent)

    def note_written_dir(self, directory: Path) -> None:
        """After our own write of a non-memory file (the index) in `directory`."""
        self._restamp(directory)

    def _restamp(self, directory: Path) -> None:
        # Our own write changed this directory's mtime; the caller refreshed just before
        # writing (under the writer lock), so nothing else is hiding behind the new stamp.
        if directory not in self._dir_stamps:
            self.invalidate()
            return
        try:
            self._dir_stamps[directory] = os.stat(directory).st_mtime_ns
        except OSError:
            self.invalidate()

    def headers(self) -> list[MemoryHeader]:
        return sorted((e.header for e in self.entries.values()), key=lambda h: (h.team, h.file))
