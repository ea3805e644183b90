"""Keeping MEMORY.md (and team/MEMORY.md) in step with the memory files.

Writers queue their index line under the dir's writer lock (`queue`) and call `flush`
after releasing it: writers queued behind one lock get their lines written in one MEMORY.md
rewrite. `reconcile` brings an index in step after outside edits; `index_orphans` gives a
line to each memory file that has none (a writer killed between its file and its line).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import structlog

from memoryd.automem import index as index_mod
from memoryd.automem.layout import (
    ProtectedIndex,
    index_file,
    index_path,
    is_team,
    on_disk,
    read_index_for_rewrite,
    update_index,
)
from memoryd.automem.locks import WriterLocks, held_work
from memoryd.automem.manifest import MemoryHeader, one_line
from memoryd.automem.stamps import Stat, stat_stamp
from memoryd.automem.store import TEAM_DIR, Entry, scan_changes
from memoryd.automem.warmup import DirStates, in_slices
from memoryd.errors import ForbiddenPath, InvalidParams, TooLarge
from memoryd.fsutil import ChangedMeanwhile, remove_stale_staged

log = structlog.get_logger("memoryd.automem")

ORPHAN_HOOK = "indexed by memoryd: this file had no line in the index"
# A line's hook (the memory's description, up to 1,000 characters) is cut to this many: the
# index is one short line per memory, of which a prompt keeps 25,000 bytes; whole, 2,000
# memories made a 2 MB index, past what memoryd reads (`MAX_INDEX_READ_BYTES`). The memory
# file keeps its whole description.
INDEX_HOOK_CHARS = 150


def index_hook(description: str) -> str:
    """`description` on one line, cut at a word within INDEX_HOOK_CHARS, with "…" when cut,
    as a manifest line's (`manifest.one_line`)."""
    return one_line(description, INDEX_HOOK_CHARS)


def generated_line(title: str, file: str, hook: str) -> str:
    return index_mod.index_line(title, file, index_hook(hook))


class IndexWriter:
    def __init__(
        self,
        states: DirStates,
        locks: WriterLocks,
        recheck: Callable[[Path], None] = lambda _dir: None,
    ) -> None:
        self._states = states
        self._locks = locks
        # Under the lock, before an index is written: ForbiddenPath when the dir was swapped
        # for a link to where memory must never be (`MemoryDirs.recheck`).
        self._recheck = recheck
        # Index lines waiting to be written, per memory dir: {key: (title, hook)}.
        self._pending: dict[Path, dict[str, tuple[str, str]]] = {}
        self.orphans_indexed = 0  # files given a generated line, for `status`
        # (dir, team) → (the dir's generation, the index's stamp) when its files all had a
        # line: the periodic check skips it until one of them moves (~90 ms at 10,000 files).
        # Loaded dirs only: a dir let go is loaded again under a new generation.
        self._in_step: dict[tuple[Path, bool], tuple[int, Stat]] = {}
        states.on_evict.append(self._let_go)

    def _let_go(self, memory_dir: Path) -> None:
        for team in (False, True):
            self._in_step.pop((memory_dir, team), None)

    def _note_in_step(self, memory_dir: Path, team: bool, seen: tuple[int, Stat]) -> None:
        if memory_dir in self._states.states:  # not let go while the check ran
            self._in_step[(memory_dir, team)] = seen

    def queue(self, memory_dir: Path, key: str, title: str, hook: str) -> None:
        """Queue the index line of `key` (call with the dir's writer lock held)."""
        self._pending.setdefault(memory_dir, {})[key] = (title, hook)

    def drop(self, memory_dir: Path, key: str) -> None:
        """Forget a queued line of `key` (its file was deleted)."""
        self._pending.get(memory_dir, {}).pop(key, None)

    async def flush(self, memory_dir: Path) -> str | None:
        """Write every pending index line of `memory_dir` (one rewrite per index file).
        Returns None, or why an index could not be rewritten (a full disk, a read-only
        MEMORY.md): the memory files are written already and stay the truth, so their lines
        stay queued for the next flush (the next write's, or the periodic sweep's)."""
        async with self._locks(memory_dir):
            return await self._flush_locked(memory_dir, retry=False)

    async def _flush_locked(self, memory_dir: Path, *, retry: bool) -> str | None:
        if not self._pending.get(memory_dir):
            return None  # an earlier writer's flush already wrote ours
        try:
            self._recheck(memory_dir)
        except ForbiddenPath as exc:
            # The lines stay queued, as for a full disk: written once the dir is back.
            return f"{index_path(memory_dir, team=False)} was not rewritten: {exc.message}"
        pending = self._pending.pop(memory_dir)
        state = self._states.state(memory_dir)
        jobs = []
        for team in (False, True):
            mine = {k: v for k, v in pending.items() if is_team(k) == team}
            if not mine:
                continue
            lines = {
                index_file(k, team): generated_line(title, index_file(k, team), hook)
                for k, (title, hook) in mine.items()
            }
            present = {index_file(k, team) for k in state.entries if is_team(k) == team}
            present |= set(lines)
            jobs.append((mine, index_path(memory_dir, team=team), lines, present))
        # Reading, applying and writing (fsync) each index in a thread (`held_work`).
        failures = await held_work(lambda: [_rewrite(p, lines, on) for _, p, lines, on in jobs])
        unwritten: dict[str, tuple[str, str]] = {}
        problem: str | None = None
        for (mine, path, lines, _), (why, refused) in zip(jobs, failures, strict=True):
            if len(refused) < len(lines):
                state.note_written_dir(path.parent)
            if why is None:
                continue
            # Every line not written is kept, other writers' too (they were popped and
            # lost: a write told "saved" had no line until the orphan sweep made one).
            unwritten.update(
                (k, v) for k, v in mine.items() if index_file(k, is_team(k)) in refused
            )
            # Named: a write whose own line went in is told whose line waits, not its own.
            waiting = sorted(
                index_file(k, is_team(k)) for k in mine if index_file(k, is_team(k)) in refused
            )
            shown = ", ".join(waiting[:5]) + (
                f" and {len(waiting) - 5} more" if len(waiting) > 5 else ""
            )
            problem = (
                f"{path} could not be rewritten ({why}): the memory is saved, and the index "
                f"line of {shown} is added when the index can be written again"
            )
        if unwritten:
            queued = self._pending.setdefault(memory_dir, {})
            for key, line in unwritten.items():
                queued.setdefault(key, line)
            if not retry:  # the sweep's retries are not logged: one line per write, not per sweep
                log.warning(
                    "index lines kept queued",
                    memory_dir=str(memory_dir),
                    count=len(unwritten),
                    why=problem,
                )
        return problem

    @staticmethod
    def remove_line(
        memory_dir: Path, key: str, known: Collection[str] = ()
    ) -> tuple[str, str] | None:
        """Take the index line of `key` out of its index, before its file is deleted (call
        with the writer lock held; touches no state, so from a thread too); returns the
        index's text as it was and as written, for `put_back` should the delete fail, or None
        when the index did not change. `known`: names in the index's folder known to exist
        (no `lstat`)."""
        team = is_team(key)
        path = index_path(memory_dir, team=team)
        file = index_file(key, team)
        # The file is about to go: a line means it only if it means no other file there
        # (the line `a%20b.md` of `a b.md` stays when `a%20b.md` is deleted).
        there = on_disk(path.parent, known)
        text, new = update_index(
            path, lambda text: index_mod.remove(text, file, lambda n: n != file and there(n))
        )
        return None if new == text else (text, new)

    @staticmethod
    def put_back(memory_dir: Path, key: str, texts: tuple[str, str]) -> None:
        """Undo what `remove_line` changed (`texts`: the index before and after it), its file
        could not be deleted after all; if that fails too, the sweep gives the file a line
        again (an orphan). Through `update_index`, as every rewrite: an edit made since (an
        agent's line, an editor's save) is kept and the removed lines are added back to it;
        a plain write of the old text dropped that edit."""
        before, after = texts
        kept = set(index_mod.split_lines(after))
        removed = [line for line in index_mod.split_lines(before) if line not in kept]

        def restore(text: str) -> str:
            if text == after:
                return before  # nothing changed since: the lines go back where they were
            present = set(index_mod.split_lines(text))
            missing = [line for line in removed if line not in present]
            return index_mod.appended(text, missing) if missing else text

        with contextlib.suppress(OSError, TooLarge):
            update_index(index_path(memory_dir, team=is_team(key)), restore)

    async def reconcile(self, memory_dir: Path) -> dict[str, Any]:
        """Bring MEMORY.md (and team/MEMORY.md) in step with the files after external writes:
        `added`, `removed` (lines) and `warnings`, one per index its owner protected (left as
        it is). InvalidParams when such an index leaves nothing rewritten."""
        self._states.warm(memory_dir)  # a dir never loaded: in slices, not on this call
        await self._states.ready(memory_dir)
        async with self._locks(memory_dir):
            self._recheck(memory_dir)
            state = self._states.state(memory_dir)
            # A full stat sweep, as the periodic one runs it: every file stat'ed and compared in
            # a thread, the differences read on the loop in slices (on the loop, 0.3-0.6 s at
            # 10,000 files).
            state.mark_sweep_started()
            changes = await asyncio.to_thread(scan_changes, memory_dir, state.snapshot())
            await in_slices(state.apply_steps(changes))
            jobs = []
            for team in (False, True):
                files = {
                    index_file(k, team): (e.header.name, index_hook(e.header.description))
                    for k, e in state.entries.items()
                    if is_team(k) == team
                }
                jobs.append((index_path(memory_dir, team=team), files))
            # Reading, comparing and rewriting each index in a thread (`held_work`). A
            # protected index is left and the other still done: refusing the whole call when
            # team/MEMORY.md was protected told the caller nothing was done, MEMORY.md rewritten.
            done = await held_work(lambda: [_reconcile_unless_protected(*job) for job in jobs])
            counts = [c for c in done if not isinstance(c, ProtectedIndex)]
            refused = [c for c in done if isinstance(c, ProtectedIndex)]
            if refused and not any(a or r for a, r in counts):
                raise InvalidParams(f"not reconciled: {refused[0].strerror}")
            state.invalidate()
        return {
            "added": sum(a for a, _ in counts),
            "removed": sum(r for _, r in counts),
            "warnings": [f"not reconciled: {exc.strerror}" for exc in refused],
        }

    async def index_orphans(self, memory_dir: Path, grace_s: float) -> list[str]:
        """Give every memory file with no index line (older than `grace_s`) a generated line;
        log them and count them for `status`. Nothing is removed. Returns the keys indexed."""
        await self._states.ready(memory_dir)
        added: list[str] = []
        async with self._locks(memory_dir):
            try:
                self._recheck(memory_dir)
            except ForbiddenPath as exc:
                log.warning("orphan check skipped", memory_dir=str(memory_dir), why=exc.message)
                return []
            state = self._states.state(memory_dir)
            if grace_s == 0:  # the first look: what a killed writer left, files and temp files
                # In a thread: each folder listed (at 10,000 memories 35-57 ms on the loop).
                await asyncio.to_thread(_remove_stale_staged, memory_dir, list(state.entries))
            # Lines a flush could not write (a full disk): tried again on each sweep.
            await self._flush_locked(memory_dir, retry=True)
            pending = set(self._pending.get(memory_dir, {}))
            now = time.time()
            checks = []
            for team in (False, True):
                path = index_path(memory_dir, team=team)
                seen = (state.generation, stat_stamp(path))
                if not grace_s or self._in_step.get((memory_dir, team)) != seen:
                    checks.append((team, path, seen))
            # Reading and comparing every line and file (~45 ms at 10,000) in a thread, both
            # indexes at once so that both are written in one step: the writer lock keeps our
            # own writers out meanwhile.
            entries = state.snapshot() if checks else {}
            found = (
                await asyncio.to_thread(
                    lambda: [unlisted_files(p, entries, team, pending) for team, p, _ in checks]
                )
                if checks
                else []
            )
            for (team, path, seen), result in zip(checks, found, strict=True):
                if (state.generation, stat_stamp(path)) != seen:
                    # Changed while the thread read it (an agent's own edit of the index, a
                    # file loaded meanwhile): writing now would undo that edit. The next
                    # sweep looks again.
                    continue
                if isinstance(result, TooLarge):  # never rewritten (writers refuse too): said once
                    self._note_in_step(memory_dir, team, seen)
                    log.warning("orphan check skipped", memory_dir=str(memory_dir), why=str(result))
                    continue
                _, headers, unlisted = result
                if not unlisted:
                    self._note_in_step(memory_dir, team, seen)
                    continue
                lines = {
                    file: generated_line(
                        headers[file].name, file, headers[file].description or ORPHAN_HOOK
                    )
                    for file in unlisted
                    # A time ahead of the clock (set back since, or a copy from a machine
                    # ahead) is no writer's of a moment ago: waited for, it was not indexed
                    # until the clock caught up.
                    if abs(now - headers[file].mtime) >= grace_s
                }
                if not lines:
                    continue
                exists = on_disk(path.parent, headers)
                # Read again just before the write: a line added meanwhile (by the agent whose
                # file this is) is kept, not replaced by a generated one.
                try:
                    update_index(
                        path,
                        functools.partial(_add_unlisted, lines=lines, exists=exists),
                        patient=False,  # on the loop: no waits; the next sweep looks again
                    )
                except TooLarge as exc:  # their lines would take it over the cap: said once
                    self._note_in_step(memory_dir, team, seen)
                    log.warning("orphans not indexed", memory_dir=str(memory_dir), why=exc.message)
                    continue
                except ChangedMeanwhile:
                    continue  # an outside writer keeps saving it: the next sweep looks again
                except ProtectedIndex:
                    # Its owner keeps it as it is: the files stay listed as orphans (a worker
                    # error every sweep told nothing new); indexed once it may be written.
                    continue
                state.note_written_dir(path.parent)
                added += [f"{TEAM_DIR}/{f}" if team else f for f in lines]
        if added:
            self.orphans_indexed += len(added)
            log.warning(
                "memory files without an index line were indexed",
                memory_dir=str(memory_dir),
                count=len(added),
                files=added[:20],
            )
        return added


def _remove_stale_staged(memory_dir: Path, keys: Collection[str]) -> None:
    """Temp files of atomic writes older than this process, in the memory dir, `team/` and
    every folder holding one of the memories `keys`: left by a killed writer. Blocking."""
    subfolders = {key.rpartition("/")[0] for key in keys}  # strings: no Path a memory
    folders = {memory_dir, memory_dir / TEAM_DIR}
    folders.update(memory_dir / sub for sub in subfolders if sub)
    removed = [p for f in sorted(folders) for p in remove_stale_staged(f)]
    if removed:
        log.warning(
            "removed temp files a killed writer left",
            memory_dir=str(memory_dir),
            count=len(removed),
            files=[str(p) for p in removed[:20]],
        )


def _add_unlisted(text: str, lines: Mapping[str, str], exists: index_mod.Exists) -> str:
    """`text` with the generated line of each file of `lines` that it still does not list."""
    still = set(index_mod.unlisted(text, sorted(lines)))
    return index_mod.apply(
        text, {f: line for f, line in lines.items() if f in still}, exists=exists
    )


def _reconcile_unless_protected(
    path: Path, files: Mapping[str, tuple[str, str]]
) -> tuple[int, int] | ProtectedIndex:
    """`_reconcile`'s counts, or the ProtectedIndex that left the index as it was."""
    try:
        return _reconcile(path, files)
    except ProtectedIndex as exc:
        return exc


def _reconcile(path: Path, files: Mapping[str, tuple[str, str]]) -> tuple[int, int]:
    """Bring the index at `path` in step with `files` ({file: (title, hook)}): (added, removed)
    lines. Touches no state (`reconcile`'s, in a thread)."""
    text, new = update_index(
        path, lambda text: index_mod.reconcile(text, files, on_disk(path.parent, files))
    )
    before = {e.file for e in index_mod.parse_index(text)}
    after = {e.file for e in index_mod.parse_index(new)}
    return len(after - before), len(before - after)


def _rewrite(
    path: Path, lines: Mapping[str, str], present: Collection[str]
) -> tuple[str | None, set[str]]:
    """Put `lines` into the index at `path` (a flush's, in a thread); what kept it from being
    rewritten, if anything did (an OSError; an index that would be over its cap), and the
    files whose lines were not written. Lines that together would take the index over its
    cap are put in one by one, so that one line refused (a memory written when the index was
    near the cap, its line queued) leaves no other writer's line unwritten: it held every
    later write's line of the folder back, a short one too, and an updated memory's line
    stayed as it was."""
    exists = on_disk(path.parent, present)
    try:
        update_index(path, lambda text: index_mod.apply(text, lines, present, exists), create=True)
    except OSError as exc:
        return _unwritable(exc), set(lines)
    except TooLarge as exc:
        if len(lines) == 1:
            return exc.message, set(lines)
    else:
        return None, set()
    why: str | None = None
    refused: set[str] = set()
    for file, line in sorted(lines.items(), key=lambda item: len(item[1])):
        try:
            one = {file: line}
            update_index(
                path,
                functools.partial(index_mod.apply, upserts=one, present=present, exists=exists),
                create=True,
            )
        except OSError as exc:
            why, refused = _unwritable(exc), refused | {file}
        except TooLarge as exc:
            why, refused = exc.message, refused | {file}
    return why, refused


def _unwritable(exc: OSError) -> str:
    """Why an index could not be rewritten, as a write's warning says it; EPERM with what
    mends it, since an index writable by its mode is one made immutable or append-only, or
    in such a folder, and "Operation not permitted" alone names no way out."""
    why = str(exc.strerror or exc)
    if exc.errno == errno.EPERM:
        why += "; it or its folder is immutable or append-only? `chattr -i -a` it (as root)"
    return why


def unlisted_files(
    path: Path, entries: Mapping[str, Entry], team: bool, pending: Collection[str]
) -> tuple[str, dict[str, MemoryHeader], list[str]] | TooLarge:
    """(the index's text, the headers of its folder's files by the name the index gives them,
    those files that no line lists), or why the index cannot be rewritten: the orphan check's
    reading and comparing, which touches no state (`entries` is a snapshot), so it runs in a
    thread. Files in `pending` (their line is queued) are left out."""
    headers = {
        index_file(k, team): e.header
        for k, e in entries.items()
        if is_team(k) == team and k not in pending
    }
    try:
        text = read_index_for_rewrite(path) if headers else ""
    except TooLarge as exc:
        return exc
    return text, headers, index_mod.unlisted(text, sorted(headers))
