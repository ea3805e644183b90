"""The warm view of one memory directory: headers, recall index, dedupe candidates.

Kept correct without watchers: every access stats the directories (creating, deleting or
atomically replacing a file changes its directory's mtime), and a full per-file stat sweep
runs when a directory changed or `sweep_interval_s` has passed (catches in-place edits).
Only files whose (mtime, size) changed are re-read, so a changed file costs one parse and
one index update.

The daemon keeps the periodic sweep off the request path: `scan_changes` (stat every file and
compare with a snapshot of the entries; touches no state) runs in a thread and
`apply_changes` folds in only the differences on the event loop, leaving alone any file the
loop re-read or dropped meanwhile. A directory's first load can be spread
over event-loop slices with `load_steps`.
"""

from __future__ import annotations

import itertools
import os
import re
import time
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path

from memoryd.automem.dedupe import Candidate, CandidateFields, memory_text
from memoryd.automem.embeddings.semantic import embedding_text
from memoryd.automem.manifest import MemoryHeader
from memoryd.automem.memfile import MAX_FILE_BYTES, parse_memory
from memoryd.automem.naming import is_index_name
from memoryd.automem.recall.dates import first_date
from memoryd.automem.recall.keysets import KeySets
from memoryd.automem.recall.ranker import RankerParams, RecallIndex
from memoryd.fsutil import looks_binary, read_regular_file
from memoryd.team.protocol import ignored_name

TEAM_DIR = "team"
# Subfolders are read as deep as this (Claude Code scans the memory dir recursively).
MAX_DEPTH = 8

Stamp = tuple[int, int, int]  # (mtime_ns, size, inode)
Seen = dict[str, tuple[str, Stamp]]  # what a scan found: {key: (absolute path, stamp)}
# Files a sweep found and left to read: {key: (absolute path, stamp, the entry's stamp then)}.
Pending = dict[str, tuple[str, Stamp, Stamp | None]]


BINARY_PROBLEM = (
    "a binary file (a NUL byte in its first 8 KiB; UTF-16 text is one too), not a memory: "
    "nothing of it is recalled; save it as UTF-8 text or move it out of the memory folder"
)


def is_team_folder(memory_dir: Path, name: str) -> bool:
    """Whether the folder `name` in `memory_dir` is its `team/`: that name, or a case variant
    of it that is the same folder (`Team/` on a case-insensitive filesystem: macOS, Windows),
    not a link to it. On a case-sensitive one `Team/` is another folder, as for Claude Code."""
    if name == TEAM_DIR:
        return True
    if name.casefold() != TEAM_DIR:
        return False
    variant = memory_dir / name
    try:
        return not variant.is_symlink() and os.path.samefile(variant, memory_dir / TEAM_DIR)
    except OSError:
        return False


def never_read(name: str, *, team: bool, folder: bool) -> bool:
    """Whether a file or folder of this name in a memory dir is never read as a memory.

    The names team sync skips (`team.protocol.ignored_name`, a pure name rule): for a `.md`
    file, hidden (temp files of atomic writes among them) or a conflict copy a team pull set
    aside (`x.conflict-<time>.md`, anywhere: it only exists on this machine); in `team/` also
    its folders' (editor backups, temp files), so what is read there is what the team shares.
    A folder outside `team/` is skipped only when hidden. Read, a conflict copy was listed,
    recalled beside the memory it copies and given a line in team/MEMORY.md, pushed to the
    team."""
    if folder and not team:
        return name.startswith(".")
    return ignored_name(name)


_GENERATIONS = itertools.count(1)

# Before this, a file's time is a tool's (the epoch, zip's first day), not when anyone wrote it.
_FIRST_WRITE_DAY = date(1980, 1, 2)


def _file_day(mtime_ns: int) -> date | None:
    """The local day of a file's last write; None for a time no date can hold (beyond the
    year 9999) or no write was made at (before 1980: a build tool's or an archive's stamp)."""
    try:
        day = date.fromtimestamp(mtime_ns / 1e9)
    except (ValueError, OverflowError, OSError):
        return None
    return day if day >= _FIRST_WRITE_DAY else None


@dataclass(frozen=True)
class Entry:
    header: MemoryHeader
    stamp: Stamp
    # The Candidate's fields as a plain tuple: the collector stops tracking a tuple of strings
    # (and of tuples of them), not a subclass of tuple, so a full collection walks one object
    # less a memory.
    dedupe: CandidateFields

    @property
    def candidate(self) -> Candidate:
        return Candidate._make(self.dedupe)


class DirState:
    def __init__(
        self, memory_dir: Path, *, sweep_interval_s: float = 2.0, params: RankerParams | None = None
    ) -> None:
        self.memory_dir = memory_dir
        self.sweep_interval_s = sweep_interval_s
        self.index = RecallIndex(params)
        self.embed_texts: dict[str, str] = {}  # key → the text its embedding is made of
        self.entries: dict[str, Entry] = {}
        self._dir_stamps: dict[Path, int] = {}
        self._last_sweep = float("-inf")
        self.swept = False  # a full sweep has loaded the whole directory at least once
        # Changes on every change, for callers that cache derived views. Drawn from one counter
        # for all states: a dir let go and loaded again (`warmup.MAX_WARM_DIRS`) never repeats
        # a generation its earlier state had, so no view cached by it is taken as current.
        self.generation = next(_GENERATIONS)
        self.updates = 0  # files (re)analysed, for status and the benchmark
        self._headers: list[MemoryHeader] | None = None  # sorted; None once entries change
        # Kept with the entries, so a write by name looks at a few of them, not all 10,000:
        # keys by family stem (`x` → x.md, x_2.md …), by name, and by dedupe token.
        self._families: KeySets[str, str] = KeySets()
        self._by_name: KeySets[str, str] = KeySets()
        self._postings: KeySets[tuple[str | None, str], str] = KeySets()

    def _changed(self) -> None:
        self.generation = next(_GENERATIONS)

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

    def sweep_due(self) -> bool:
        return time.monotonic() - self._last_sweep >= self.sweep_interval_s

    def refresh(self, *, force: bool = False, defer_over: int | None = None) -> Pending | None:
        """`defer_over`: when a readdir-only sweep finds more files than this to read (a team
        pull's thousands), they are not read here but returned, for `load_pending_steps`."""
        now = time.monotonic()
        if force or now - self._last_sweep >= self.sweep_interval_s:
            self._sweep(full=True)
            self._last_sweep = now
        elif self._dirs_changed():
            # Names and inodes come from readdir without a stat per file: a created, deleted
            # or atomically replaced file (new inode) is found; only those files are read.
            return self._sweep(full=False, defer_over=defer_over)
        return None

    def mark_sweep_started(self) -> None:
        """A periodic sweep is on its way elsewhere: not due again for `sweep_interval_s`."""
        self._last_sweep = time.monotonic()

    def invalidate(self) -> None:
        self._dir_stamps.clear()

    def _sweep(self, *, full: bool, defer_over: int | None = None) -> Pending | None:
        seen: Seen = {}
        stamps: dict[Path, int] = {}
        known = None if full else self.entries
        _scan(self.memory_dir, "", seen, stamps, known, depth=0)
        self._dir_stamps = stamps
        changed = False
        for key in [k for k in self.entries if k not in seen]:
            self._drop(key)
            changed = True
        todo = {
            key: (path, stamp)
            for key, (path, stamp) in seen.items()
            if (entry := self.entries.get(key)) is None or entry.stamp != stamp
        }
        pending: Pending | None = None
        if defer_over is not None and len(todo) > defer_over:
            pending = {
                key: (path, stamp, entry.stamp if (entry := self.entries.get(key)) else None)
                for key, (path, stamp) in todo.items()
            }
            todo = {}
        for key, (path, stamp) in todo.items():
            self._load(key, Path(path), stamp)
            changed = True
        if changed:
            self._changed()
        self.swept = True
        return pending

    def load_pending_steps(self, pending: Pending) -> Iterator[None]:
        """Read the files a deferring sweep left (`refresh(defer_over=…)`), one per step, so the
        caller can spread them over event-loop slices. A file the loop re-read or dropped
        meanwhile is left as the loop has it."""
        for key, (path, stamp, before) in pending.items():
            entry = self.entries.get(key)
            if (entry.stamp if entry is not None else None) == before:
                self._load(key, Path(path), stamp)
                self._changed()
            yield

    # -- sweeps whose I/O ran elsewhere -------------------------------------------------------
    def snapshot(self) -> dict[str, Entry]:
        """The entries as they are now; give them to `scan_changes` (in a thread, started
        later), then its result to `apply_changes`."""
        return dict(self.entries)

    def apply_changes(self, changes: ScanChanges) -> None:
        """`apply_steps`, all at once."""
        for _ in self.apply_steps(changes):
            pass

    def apply_steps(self, changes: ScanChanges) -> Iterator[None]:
        """Fold in what a full stat scan found different from its snapshot, one file read per
        step (a team pull can bring thousands), so the caller can spread it over slices.

        A file the event loop re-read or dropped since the snapshot is left as the loop has it
        (its view is at least as new as the scan's); every other difference is applied as a
        full sweep would. Only the differences are visited here: the comparison of every file
        ran in the scan's thread. Directory stamps stay with the per-access directory check.
        """
        dropped = False
        for key in changes.vanished:
            entry = self.entries.get(key)
            if entry is not None and entry.stamp == changes.before[key].stamp:
                self._drop(key)
                dropped = True
        if dropped:
            self._changed()
        # Also every file seen that the loop does not hold: dropped by the loop meanwhile,
        # `_load` reads what is there now.
        keys = changes.changed | (changes.seen.keys() - self.entries.keys())
        for key in sorted(keys, key=changes.order.__getitem__):  # in the scan's order
            path, stamp = changes.seen[key]
            entry = self.entries.get(key)
            old = changes.before.get(key)
            if entry is None or (
                entry.stamp != stamp and old is not None and entry.stamp == old.stamp
            ):
                self._load(key, Path(path), stamp)
                self._changed()
                yield

    def load_steps(self, seen: Mapping[str, tuple[str, Stamp]], started: float) -> Iterator[None]:
        """The directory's first load from a scan (`scan_tree`) started at monotonic time
        `started`, one file per step, so the caller can spread it over event-loop slices.

        Stops as soon as a sweep on the request path has loaded the directory. The last step
        is a readdir-only sweep, so a file created, deleted or replaced while loading is seen
        as on any access; one edited in place after it was read waits for the periodic sweep,
        as always.
        """
        for key, (path, stamp) in seen.items():
            if self.swept:
                return
            entry = self.entries.get(key)
            if entry is None or entry.stamp != stamp:
                self._load(key, Path(path), stamp)
            yield
        if self.swept:
            return
        self._sweep(full=False)
        self._last_sweep = started
        self._changed()

    # -- one file ---------------------------------------------------------------------------
    def _load(self, key: str, path: Path, stamp: Stamp) -> None:
        fallback = key.rsplit("/", 1)[-1].removesuffix(".md")
        unreadable = False
        try:
            # Found by a scan: no following a link, no blocking on a FIFO swapped in since.
            raw = read_regular_file(path, MAX_FILE_BYTES * 2 - 1)
        except PermissionError as exc:
            # Still a memory (left by another user, a `sudo` session): listed with why it
            # cannot be read, its index line kept; nothing of it is recalled.
            parsed = replace(
                parse_memory("", fallback), problem=f"unreadable by memoryd: {exc.strerror}"
            )
            unreadable = True
        except OSError:
            self._drop(key)
            return
        else:
            if looks_binary(raw):
                # An image saved as .md, a UTF-16 note: ranked by its name, its bytes went
                # into the prompt as a memory. Listed with why, never recalled (as unreadable).
                parsed = replace(parse_memory("", fallback), problem=BINARY_PROBLEM)
                unreadable = True
            else:
                parsed = parse_memory(raw.decode("utf-8", errors="replace"), fallback)
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
        old = self.entries.get(key)
        if old is not None:
            self._unlink(key, old)
        entry = self.entries[key] = Entry(header, stamp, candidate.fields())
        self._link(key, entry)
        self._headers = None
        if unreadable:
            self.index.remove(key)
            self.embed_texts.pop(key, None)
            self.updates += 1
            return
        when = first_date(parsed.body) or first_date(parsed.description)
        # A memory whose text names no date (written by hand, by Claude Code, by quick-add) is
        # dated by its file's last write, as its staleness is: "what did we decide yesterday?"
        # finds it. Not a team memory: its file's time is when it was synced, not written.
        by_file = when is None and not header.team
        if by_file:
            when = _file_day(stamp[0])
        self.index.upsert(
            key, parsed.name, parsed.description, parsed.body, when, dated_by_file=by_file
        )
        self.embed_texts[key] = embedding_text(parsed.description, parsed.body)
        self.updates += 1

    def _drop(self, key: str) -> None:
        old = self.entries.pop(key, None)
        if old is not None:
            self._unlink(key, old)
            self._headers = None
        self.index.remove(key)
        self.embed_texts.pop(key, None)

    def note_written(self, key: str, path: Path) -> None:
        """After our own write: analyse just that file, now."""
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            self._drop(key)
        else:
            self._load(key, path, (st.st_mtime_ns, st.st_size, st.st_ino))
        self._changed()
        self._restamp(path.parent)

    def note_deleted(self, key: str, path: Path) -> None:
        self._drop(key)
        self._changed()
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

    # -- lookups for writes by name -------------------------------------------------------------
    def _link(self, key: str, entry: Entry) -> None:
        for root in _family_roots(key):
            self._families.add(root, key)
        self._by_name.add(_name_key(entry.header.name), key)
        _, kind, _, tokens, *_ = entry.dedupe
        for token in tokens:
            self._postings.add((kind, token), key)

    def _unlink(self, key: str, entry: Entry) -> None:
        _, kind, _, tokens, *_ = entry.dedupe
        self._by_name.discard(_name_key(entry.header.name), key)
        for root in _family_roots(key):
            self._families.discard(root, key)
        for token in tokens:
            self._postings.discard((kind, token), key)

    def family(self, base: str) -> list[str]:
        """`base` and its suffixed siblings among the keys (`naming.family`), sorted."""
        return sorted(self._families.get(base.removesuffix(".md")))

    def has_name(self, name: str) -> bool:
        """Whether a memory is called `name` (`naming.same_name`)."""
        return _name_key(name) in self._by_name

    def near_duplicate_keys(self, type_: str | None, tokens: frozenset[str]) -> list[str]:
        """The keys of every memory of `type_` whose dedupe tokens may overlap `tokens` enough
        to be a near duplicate (Jaccard ≥ dedupe's 0.5 prefilter), sorted; no other is. Such
        a memory holds at least half of `tokens`, so it holds one of any
        len - ceil(len / 2) + 1 of them: the rarest are looked up."""
        if not tokens:
            return sorted(k for k, e in self.entries.items() if e.dedupe[1] == type_)
        need = len(tokens) - (len(tokens) + 1) // 2 + 1
        postings = [self._postings.get((type_, t)) for t in tokens]
        found: set[str] = set()
        for keys in sorted(postings, key=len)[:need]:
            found.update(keys)
        return sorted(found)

    def headers(self) -> list[MemoryHeader]:
        """Every header, own files first then team/, each by file. The same list object comes
        back while nothing changed (callers use that to skip work): do not mutate it."""
        if self._headers is None:
            self._headers = sorted(
                (e.header for e in self.entries.values()), key=lambda h: (h.team, h.file)
            )
        return self._headers


_SUFFIXED = re.compile(r"(.*)_\d+", re.DOTALL)


def _family_roots(key: str) -> tuple[str, ...]:
    """The stems whose family (`naming.family`: `x.md`, `x_<n>.md`) holds `key`."""
    stem = key.removesuffix(".md")
    suffixed = _SUFFIXED.fullmatch(stem)
    return (stem, suffixed.group(1)) if suffixed else (stem,)


def _name_key(name: str) -> str:
    return unicodedata.normalize("NFC", name.strip())  # as `naming.same_name` compares


@dataclass(frozen=True)
class ScanChanges:
    """A full stat scan compared with a snapshot of the entries (`scan_changes`)."""

    before: Mapping[str, Entry]  # the snapshot
    seen: Seen  # the scan
    order: Mapping[str, int]  # each seen key's place in the scan
    vanished: list[str]  # in the snapshot, not found
    changed: set[str]  # found, and new or with another stamp than in the snapshot


def scan_changes(memory_dir: Path, before: Mapping[str, Entry]) -> ScanChanges:
    """`scan_tree`, and its comparison with `before` (`DirState.snapshot`): the part of a full
    sweep that touches no state, to run in a thread."""
    seen = scan_tree(memory_dir)
    changed = set()
    for key, (_, stamp) in seen.items():
        entry = before.get(key)
        if entry is None or entry.stamp != stamp:
            changed.add(key)
    return ScanChanges(
        before=before,
        seen=seen,
        order={key: place for place, key in enumerate(seen)},
        vanished=[key for key in before if key not in seen],
        changed=changed,
    )


def scan_tree(memory_dir: Path) -> Seen:
    """Every memory file under `memory_dir`, freshly stat'ed: a full sweep's I/O. Touches no
    state, so it can run in a thread."""
    seen: Seen = {}
    _scan(memory_dir, "", seen, {}, None, depth=0)
    return seen


def _scan(
    directory: Path,
    prefix: str,
    seen: Seen,
    stamps: dict[Path, int],
    known: Mapping[str, Entry] | None,
    *,
    depth: int,
) -> None:
    """`known` None: stat every file. Otherwise a file whose inode matches its known entry
    keeps that entry's stamp without a stat (so created, deleted and replaced files are
    found, and in-place edits are left to a full sweep)."""
    try:
        stamps[directory] = os.stat(directory).st_mtime_ns
        iterator = os.scandir(directory)
    except OSError:
        return
    with iterator:
        in_team = prefix.startswith(f"{TEAM_DIR}/")
        for item in iterator:
            name = item.name
            if name.startswith("."):
                continue
            try:
                if known is not None:
                    # The same inode is the same regular file a scan accepted before: its
                    # known stamp stands, with no further check (the one cost per file here).
                    entry = known.get(prefix + name)
                    if entry is not None and entry.stamp[2] == item.inode():
                        seen[prefix + name] = (item.path, entry.stamp)
                        continue
                # Symlinks are not followed: a link could point anywhere (e.g. ~/.ssh).
                if item.is_dir(follow_symlinks=False):
                    if depth == 0 and is_team_folder(directory, name):
                        # Keys and paths say team/ whatever case the folder has on disk.
                        name = TEAM_DIR
                    elif never_read(name, team=in_team, folder=True):
                        continue
                    if depth < MAX_DEPTH:
                        _scan(
                            directory / name,
                            f"{prefix}{name}/",
                            seen,
                            stamps,
                            known,
                            depth=depth + 1,
                        )
                    continue
                if (
                    not name.endswith(".md")
                    or is_index_name(name)
                    or never_read(name, team=in_team, folder=False)
                    or not item.is_file(follow_symlinks=False)
                ):
                    continue
                key = prefix + name
                st = item.stat(follow_symlinks=False)
            except OSError:
                continue
            seen[key] = (item.path, (st.st_mtime_ns, st.st_size, st.st_ino))
