"""Writing, deleting and restoring memory files; every overwrite or delete keeps a version.

Each change holds the dir's writer lock while it touches files, queues or drops the file's
index line, then flushes the index and announces `memory/saved` after the lock is released.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from memoryd.agent.modes import protected_refusal
from memoryd.automem import index as index_mod
from memoryd.automem import naming
from memoryd.automem.dedupe import find_near_duplicate, memory_text, normalise
from memoryd.automem.dirs import MemoryDirs, resolve_inside
from memoryd.automem.history import History, Version
from memoryd.automem.index_writer import IndexWriter
from memoryd.automem.layout import (
    ProtectedIndex,
    Stamp,
    check_index_size,
    index_path,
    is_team,
    kept_mode,
    while_changed,
)
from memoryd.automem.locks import WriterLocks, held_work
from memoryd.automem.memfile import (
    MAX_NAME_CHARS,
    file_name_for,
    keep_unknown_keys,
    render_memory,
)
from memoryd.automem.store import MAX_DEPTH, TEAM_DIR, DirState, is_team_folder, never_read
from memoryd.automem.warmup import DirStates
from memoryd.core.host import Notify
from memoryd.core.project import Project
from memoryd.errors import ForbiddenPath, InvalidParams, MemorydError, NotFound, TooLarge
from memoryd.fsutil import (
    ChangedMeanwhile,
    NotRegularFile,
    atomic_write_bytes,
    make_private_dirs,
    open_regular_file,
    put_back,
    read_regular_file,
    save_stamp,
    take_out,
    unchanged_since,
)

log = structlog.get_logger("memoryd.automem")

# A file memoryd replaces or deletes is copied to its history first; one larger than this (no
# memory is: they are read up to 200,000 bytes) is refused rather than lost uncopied.
_SNAPSHOT_MAX_BYTES = 16 * 1024 * 1024
# Copies a delete makes again of a file saved by someone else while it deleted (an editor).
_RECOPIES = 5


@dataclass(frozen=True)
class WriteResult:
    path: Path
    created: bool
    merged_into: Path | None
    name: str  # as written: a derived name may have become `<name> (2)`
    # Saved, but its index line is not written yet (a full disk): why, for the reply.
    warnings: tuple[str, ...] = ()


@dataclass(eq=False)  # a service: compared and hashed by identity
class MemoryWrites:
    _dirs: MemoryDirs
    _states: DirStates
    _locks: WriterLocks
    _index: IndexWriter
    history: History
    _notify: Notify

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
        name_given: bool = True,
    ) -> WriteResult:
        """`name_given=False`: memoryd derived the name (quick-add), so the write never
        replaces a different fact that has it (`_name_of_its_own`)."""
        text = render_memory(type, name, description, body)  # validates first, before any I/O
        memory_dir = self._dirs.memory_dir(project)
        folder = memory_dir / TEAM_DIR if team else memory_dir
        async with self._locks(memory_dir):
            self._dirs.recheck(memory_dir)  # swapped while we waited for the lock
            state = self._states.state(memory_dir)
            merged_into: Path | None = None
            if file is not None:
                # Its errors name `file`, the field the caller got wrong (not `path`).
                target, key = resolve_inside(folder, file, must_exist=False, field="file")
                key = f"{TEAM_DIR}/{key}" if team else key
            else:
                if not name_given:
                    own = _name_of_its_own(state, type, name, description, body, team)
                    if own != name:
                        name, text = own, render_memory(type, own, description, body)
                key, merged = _key_for_name(state, type, name, description, body, team)
                target = memory_dir / key
                merged_into = target if merged else None
            _check_target(memory_dir, target)
            # The index the line goes to, by the key (`file="team/x.md"` without `team` is a
            # team memory): too large to rewrite, nothing is written.
            check_index_size(index_path(memory_dir, team=is_team(key)))
            cut = _links_cut(target)
            # The copy, the folders and the file (fsyncs) in a thread: the loop stays free and
            # writers behind us queue on the lock (`held_work`).
            folders = (memory_dir, folder) if team else (memory_dir,)
            created = await held_work(
                lambda: self._write_file(memory_dir, key, target, text, folders)
            )
            state.note_written(key, target)
            self._index.queue(memory_dir, key, name, description)
        # The file is the memory and it is saved: an index that cannot be rewritten now is a
        # warning (the line stays queued), not a failure of a write that happened.
        problem = await self._index.flush(memory_dir)
        await self._notify("memory/saved", {"path": str(target), "project": str(project.root)})
        warnings = tuple(w for w in (cut, problem) if w)
        return WriteResult(target, created, merged_into, name, warnings)

    def _write_file(
        self, memory_dir: Path, key: str, target: Path, text: str, folders: Sequence[Path]
    ) -> bool:
        """Keep a version of what `target` holds, then write it; whether it was created. An
        editor's save landing between the copy and the rename (its truncate, then its write:
        the copy held half of it or nothing) is copied again and kept (`while_changed`); it
        was replaced with no version of it kept."""

        def attempt(before: Stamp) -> bool:
            created = before is None
            kept = None if created else self._snapshot_sync(memory_dir, key, target, "overwrite")
            with self._dropped_if_failed(memory_dir, key, target, kept):
                new = text
                if not created:
                    # The keys memoryd does not write (`tags:`, `created:`, a tool's) stay.
                    with contextlib.suppress(OSError):
                        old = read_regular_file(target, _SNAPSHOT_MAX_BYTES)
                        new = keep_unknown_keys(old.decode("utf-8", errors="replace"), text)
                # Folders memoryd creates are 0700; one that is there already (a shared 2775
                # memory folder, a sub/ of the user's) is theirs and keeps its mode.
                with _folder_removed_is_a_change(target):
                    for path in (*folders, target.parent):
                        make_private_dirs(path)
                    with self._late_save_kept(memory_dir, key, target, "overwrite"):
                        atomic_write_bytes(
                            target,
                            new.encode("utf-8"),
                            kept_mode(target),
                            still=unchanged_since(target, before),
                            came_out=self._save_by_rename_kept(
                                memory_dir, key, before, "overwrite"
                            ),
                        )
            return created

        return while_changed(target, attempt)

    @contextlib.contextmanager
    def _dropped_if_failed(
        self, memory_dir: Path, key: str, target: Path, kept: Version | None
    ) -> Iterator[None]:
        """The version kept before a change is dropped when the change fails (a full disk)
        and the file is still what the version holds: the history listed an overwrite that
        never happened. A change that failed after it landed (the folder's fsync after the
        rename) keeps its version, the only copy of what was there."""
        try:
            yield
        except BaseException:
            if kept is not None and self._still_holds(memory_dir, key, target, kept):
                self.history.drop(memory_dir, key, kept)
            raise

    @contextlib.contextmanager
    def _late_save_kept(
        self, memory_dir: Path, key: str, target: Path, reason: str
    ) -> Iterator[None]:
        """Around the rename or unlink of `target`: a save in place into it (an editor's)
        that lands after the last look for one and before the rename (microseconds, or as
        long as the thread waits for the GIL) went with the file replaced, no version of it
        kept. The file is held open across the change, and such a save is copied from it."""
        try:
            fd = open_regular_file(target)
        except OSError:
            yield  # nothing there (or no regular file): the change's own checks say so
            return
        try:
            st = os.fstat(fd)
            seen = (st.st_mtime_ns, st.st_size)
            yield
            st = os.fstat(fd)
            if (st.st_mtime_ns, st.st_size) == seen:
                return
            content = b""
            while len(content) <= _SNAPSHOT_MAX_BYTES:
                chunk = os.pread(fd, 1 << 20, len(content))
                if not chunk:
                    break
                content += chunk
            if len(content) <= _SNAPSHOT_MAX_BYTES:
                try:
                    self.history.save(memory_dir, key, content, reason)
                except OSError as exc:
                    # The change is made (a rename, an unlink): failing it now said "nothing
                    # was changed", and a write's index line was never queued.
                    log.warning(
                        "an editor's save under a change not kept",
                        file=str(target),
                        reason=reason,
                        error=str(exc),
                    )
        finally:
            os.close(fd)

    def _save_by_rename_kept(
        self, memory_dir: Path, key: str, before: Stamp, reason: str
    ) -> Callable[[Path], None]:
        """For `atomic_write_bytes(came_out=…)`: what the swap took out of the memory's place.
        The file memoryd read (`before`'s inode) is dropped (a save into it in place is
        `_late_save_kept`'s); another is someone's save by rename landing after the last look
        (an editor's `mv`), which a replace dropped unseen: it is kept in history, as a save
        under the change is. One that cannot be kept is put back (`atomic_write_bytes`): not
        a regular file, too large (the write is tried again, and its copy refuses it), or a
        failed copy (the write fails, the save in place)."""

        def look(out: Path) -> None:
            try:
                st = os.lstat(out)
            except FileNotFoundError:
                return
            if before is not None and (st.st_ino, st.st_dev) == (before[3], before[4]):
                return
            changed = ChangedMeanwhile(errno.EAGAIN, "saved by another program as it was written")
            if not stat.S_ISREG(st.st_mode):
                raise changed
            content = read_regular_file(out, _SNAPSHOT_MAX_BYTES)
            if len(content) > _SNAPSHOT_MAX_BYTES:
                raise changed
            self.history.save(memory_dir, key, content, reason)

        return look

    def _remove_seen(self, memory_dir: Path, key: str, target: Path, stamp: Stamp) -> None:
        """Remove `target`, whose last look saw `stamp`: taken out by a rename and looked at
        first, so that a save by rename since that look (a new file: not the one held open)
        is copied to history, as `_save_by_rename_kept` copies one under a write; unlinked,
        it went uncopied. Something there that is no regular file goes back, refused as the
        copy refuses it; so does a save whose copy fails (a full disk), and the file when its
        unlink fails: left under its temp name, the next start swept it."""
        out = take_out(target)
        try:
            self._save_by_rename_kept(memory_dir, key, stamp, "delete")(out)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(out)
        except BaseException as exc:
            put_back(out, target)
            if isinstance(exc, ChangedMeanwhile):
                self._snapshot_sync(memory_dir, key, target, "delete")  # says why it is refused
            raise

    def _still_holds(self, memory_dir: Path, key: str, target: Path, kept: Version) -> bool:
        try:
            now = read_regular_file(target, _SNAPSHOT_MAX_BYTES)
            return now == self.history.read(memory_dir, key, kept.version)
        except (OSError, NotRegularFile, NotFound):
            return False

    async def delete_memory(
        self, project: Project, path: str | Path, *, check: Callable[[], None] | None = None
    ) -> Path:
        """`check`: called under the writer lock before anything is touched; what it raises
        stops the delete (dream's: the file is unchanged since its agent read it)."""
        memory_dir = self._dirs.memory_dir(project)
        async with self._locks(memory_dir):
            self._dirs.recheck(memory_dir)  # swapped while we waited for the lock
            target, key = resolve_inside(memory_dir, str(path), must_exist=True)
            if naming.is_index_name(target.name):
                raise ForbiddenPath(f"{target.name} is the index; delete memories, not the index")
            _check_not_protected(target)
            if check is not None:
                check()
            check_index_size(index_path(memory_dir, team=is_team(key)))
            state = self._states.state(memory_dir)
            # The loaded memories of the index's folder exist: no lstat for them.
            known = state.entries.keys() if not is_team(key) else ()

            def remove() -> None:
                stamp = save_stamp(target, follow_links=False)
                kept = self._snapshot_sync(memory_dir, key, target, "delete")
                with self._dropped_if_failed(memory_dir, key, target, kept):
                    # The index line goes first: an index that cannot be rewritten (a read-only
                    # MEMORY.md, a full disk) fails the delete with the memory still there.
                    # Unlinked first, the file was gone, the delete reported failed, and its
                    # line stayed in every prompt for good (dangling lines are not swept).
                    before = self._index.remove_line(memory_dir, key, known)
                    try:
                        # An editor's save since the copy is copied too: deleted uncopied, it
                        # was gone with no version of it kept. The file is held open before
                        # the last look, so that a save landing after it is copied too.
                        with self._late_save_kept(memory_dir, key, target, "delete"):
                            for _ in range(_RECOPIES):
                                now = save_stamp(target, follow_links=False)
                                if now is None or now == stamp:
                                    break
                                stamp = now
                                self._snapshot_sync(memory_dir, key, target, "delete")
                            self._remove_seen(memory_dir, key, target, stamp)
                    except FileNotFoundError:
                        pass  # gone meanwhile (removed by hand): deleted all the same
                    # The unlink failed, or a copy of a save since refused (swapped for a link):
                    # the memory stays, so its line goes back.
                    except (OSError, MemorydError):
                        if before is not None:
                            self._index.put_back(memory_dir, key, before)
                        raise

            # The copy, the index rewrite (fsync) and the unlink in a thread (`held_work`).
            try:
                await held_work(remove)
            except ProtectedIndex as exc:  # its line cannot go, so neither does the memory
                raise ProtectedMemory(f"not deleted: {exc.strerror}") from exc
            self._index.drop(memory_dir, key)
            state.note_deleted(key, target)
        return target

    async def snapshot(
        self, path: Path, reason: str = "overwrite", *, expect: FileStamp | None = None
    ) -> Version | None:
        """Keep the current content of a memory file before someone overwrites or deletes it.
        `expect` (size, mtime_ns): keep it only if the file still has that stamp, else
        `ChangedSince` (an editor that stopped waiting has written its new text already)."""
        for memory_dir in sorted(self._dirs.known, key=lambda p: len(str(p)), reverse=True):
            try:
                target, key = resolve_inside(memory_dir, str(path), must_exist=False)
            except ForbiddenPath:
                continue
            if not target.is_file():
                _check_stamp(target, expect)
                return None
            return self._snapshot_sync(memory_dir, key, target, reason, expect=expect)
        raise ForbiddenPath(f"{path} is not in a known memory directory")

    def _snapshot_sync(
        self,
        memory_dir: Path,
        key: str,
        target: Path,
        reason: str,
        *,
        expect: FileStamp | None = None,
    ) -> Version | None:
        _check_stamp(target, expect)
        try:
            # Not a FIFO's open, which would hold the event loop until someone writes to it.
            content = read_regular_file(target, _SNAPSHOT_MAX_BYTES)
        except FileNotFoundError:
            _check_stamp(target, expect)
            return None
        except PermissionError as exc:
            raise ForbiddenPath(
                f"{target} is not readable by memoryd ({exc.strerror}), so no copy of it can be "
                f"kept: not {'deleted' if reason == 'delete' else 'replaced'}"
            ) from exc
        except (NotRegularFile, IsADirectoryError) as exc:
            raise InvalidParams(f"{target} is not a regular file; it is not a memory") from exc
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            # Checked as a file, then swapped for a link before the copy (O_NOFOLLOW): the same
            # refusal as a link found up front, never a link followed out of the folder.
            raise ForbiddenPath(
                f"{target} became a symlink while memoryd was writing it; refusing to write "
                f"through it: not {'deleted' if reason == 'delete' else 'replaced'}"
            ) from exc
        if len(content) > _SNAPSHOT_MAX_BYTES:
            raise TooLarge(
                f"{target} is over {_SNAPSHOT_MAX_BYTES:,} bytes; memoryd keeps a copy of what it "
                "replaces or deletes and will not keep one that size: trim or remove it by hand"
            )
        _check_stamp(target, expect)  # not rewritten while it was read
        return self.history.save(memory_dir, key, content, reason)

    def versions(self, project: Project, path: str) -> tuple[Path, list[Version]]:
        memory_dir = self._dirs.memory_dir(project)
        target, key = resolve_inside(
            memory_dir, path, must_exist=False, kept=self.history.kept(memory_dir)
        )
        return target, self.history.versions(memory_dir, key)

    async def restore(
        self,
        project: Project,
        path: str,
        version: str,
        screen: Callable[[str, bytes], Awaitable[None]] | None = None,
    ) -> tuple[Path, list[str]]:
        """The restored file, and warnings (its index line not written yet, as for a write).
        `screen(key, content)` sees the version before it is written back, and may refuse it
        by raising (the secret scan: a version saved before the refusal was on)."""
        memory_dir = self._dirs.memory_dir(project)
        async with self._locks(memory_dir):
            self._dirs.recheck(memory_dir)  # swapped while we waited for the lock
            target, key = resolve_inside(
                memory_dir, path, must_exist=False, kept=self.history.kept(memory_dir)
            )
            # not the index, not through a symlink; a name the history keeps may be restored
            _check_target(memory_dir, target, kept=self.history.kept(memory_dir))
            check_index_size(index_path(memory_dir, team=is_team(key)))
            content = self.history.read(memory_dir, key, version)
            if screen is not None:
                await screen(key, content)
            state = self._states.state(memory_dir)
            cut = _links_cut(target)

            def attempt(before: Stamp) -> None:
                kept = self._snapshot_sync(memory_dir, key, target, "restore")
                with (
                    self._dropped_if_failed(memory_dir, key, target, kept),
                    _folder_removed_is_a_change(target),
                ):
                    make_private_dirs(target.parent)
                    with self._late_save_kept(memory_dir, key, target, "restore"):
                        atomic_write_bytes(
                            target,
                            content,
                            kept_mode(target),
                            still=unchanged_since(target, before),
                            came_out=self._save_by_rename_kept(memory_dir, key, before, "restore"),
                        )

            # An editor's save between the copy and the rename is copied again (as a write's).
            await held_work(lambda: while_changed(target, attempt))
            state.note_written(key, target)
            entry = state.entries[key]
            self._index.queue(memory_dir, key, entry.header.name, entry.header.description)
        problem = await self._index.flush(memory_dir)
        await self._notify("memory/saved", {"path": str(target), "project": str(project.root)})
        return target, [w for w in (cut, problem) if w]


def _links_cut(target: Path) -> str | None:
    """The warning for a write of `target` when it is a file with other hard links: memoryd
    replaces a memory by a rename (no reader sees half a file), and those names keep the
    text before. Said, where before it went unsaid (a notes folder hard-linking its memories
    went stale); not refused, as an agent's write of such a file is (`agent.tools`): the
    user asked for this one, and the old text is in its history too."""
    try:
        st = os.lstat(target)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_nlink < 2:
        return None
    others = st.st_nlink - 1
    return (
        f"{target.name} had {others} other hard link{'s' if others > 1 else ''}: the memory "
        "is saved as a file of its own (memoryd writes by rename), and "
        f"{'they keep' if others > 1 else 'that name keeps'} the text it had before"
    )


@contextlib.contextmanager
def _folder_removed_is_a_change(target: Path) -> Iterator[None]:
    """A folder on the way to `target` removed while it was written (`rm -rf` of the memory
    folder: after memoryd made it, before its temp file was made there) is a change under the
    write, tried again (`while_changed`), the folders made again: it was -32603."""
    try:
        yield
    except FileNotFoundError as exc:
        raise ChangedMeanwhile(
            errno.ENOENT, "its folder was removed while it was written", str(target)
        ) from exc


def _key_for_name(
    state: DirState, type: str, name: str, description: str, body: str, team: bool
) -> tuple[str, bool]:
    """(key, merged) for a write by name: the file of the memory with this name, else a
    near duplicate's (a reported merge), else a free file name (suffixed when another
    memory already has the name's file), so a different memory is never replaced."""
    base = (f"{TEAM_DIR}/" if team else "") + file_name_for(type, name)
    # Only the memories that can matter, from the lookups the store keeps (the name's file
    # family, those sharing enough words): each write looked at every one, 65-84 ms at 10,000.
    names = {k: state.entries[k].header.name for k in state.family(base)}
    own = naming.own_file(base, name, names)
    if own is not None:
        return own, False
    text = memory_text(name, description, body)
    near = state.near_duplicate_keys(type, frozenset(normalise(text).split()))
    same_place = [state.entries[k].candidate for k in near if is_team(k) == team]
    duplicate = find_near_duplicate(type, text, same_place)
    if duplicate is not None:
        return duplicate, True
    taken = lambda key: key in state.entries or os.path.lexists(state.memory_dir / key)  # noqa: E731
    return naming.free_file(base, taken), False


def _name_of_its_own(
    state: DirState, type: str, name: str, description: str, body: str, team: bool
) -> str:
    """`name`, or `name (2)`, `name (3)` … when a memory called `name` holds a different fact:
    a name the user gives updates its memory, but two sentences that open alike ("Before
    merging a pull request, …") are two facts."""
    base = (f"{TEAM_DIR}/" if team else "") + file_name_for(type, name)
    names = {k: state.entries[k].header.name for k in state.family(base)}
    own = naming.own_file(base, name, names)
    if own is None:
        return name
    text = memory_text(name, description, body)
    if find_near_duplicate(type, text, [state.entries[own].candidate]) is not None:
        return name  # the same fact again: its memory is updated
    stem = name[: MAX_NAME_CHARS - 8]
    for n in range(2, naming.MAX_SUFFIX):
        candidate = f"{stem} ({n})"
        if not state.has_name(candidate):
            return candidate
    return name  # ten thousand alike: the write's own rules decide


def _check_target(
    memory_dir: Path, target: Path, kept: Callable[[str], bool] | None = None
) -> None:
    if naming.is_index_name(target.name):
        raise InvalidParams(
            f"file: {target.name} names the index ({index_mod.INDEX_NAME}), not a memory"
        )
    if target.is_symlink():
        raise ForbiddenPath(f"{target} is a symlink; refusing to write through it")
    _, key = resolve_inside(memory_dir, str(target), must_exist=False, kept=kept)
    parts = key.split("/")
    problem = _never_read(parts, team=is_team(key))
    if problem is not None:
        raise InvalidParams(f"file: {key} {problem}")
    folders = parts[:-1]
    for folder in reversed(target.parents[: len(folders)]):
        mode = _mode(folder)
        if mode is None:
            return  # the rest of the way is created
        if not stat.S_ISDIR(mode):
            raise InvalidParams(f"file: {folder} is not a folder; {key} cannot be written")
    mode = _mode(target)
    if mode is not None and not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise InvalidParams(f"file: {target} is {kind}; only a memory file is replaced")
    _check_not_protected(target)


FileStamp = tuple[int, int]  # (st_size, st_mtime_ns) of a file as a client last saw it


class ChangedSince(InvalidParams):
    """A snapshot's file no longer has the stamp the client sent: its text then is gone."""


def _check_stamp(target: Path, expect: FileStamp | None) -> None:
    if expect is None:
        return
    try:
        info = target.lstat()
        found: FileStamp | None = (info.st_size, info.st_mtime_ns)
    except FileNotFoundError:
        found = None
    if found == expect:
        return
    now = "removed" if found is None else f"size {found[0]}, mtime_ns {found[1]}"
    raise ChangedSince(
        f"{target} changed since the snapshot was asked for (now {now}; expected size "
        f"{expect[0]}, mtime_ns {expect[1]}): the text it had then is gone, nothing was kept",
        data={
            "expected": {"size": expect[0], "mtime_ns": expect[1]},
            "found": None if found is None else {"size": found[0], "mtime_ns": found[1]},
        },
    )


class ProtectedMemory(InvalidParams):
    """A memory its owner made read-only (or another user's memoryd's user may not write):
    a background agent hears it as a tool error, as its Write of the file is, not a denial."""


def _check_not_protected(target: Path) -> None:
    """A memory its owner made read-only is neither replaced nor deleted, as memoryd's
    agents leave it (`agent.modes.owner_protected`): `memory.write` replaced a `chmod 444`
    file by a rename and kept it 444, though `rm` asks before removing such a file."""
    refusal = protected_refusal(target, undone=" (nothing was changed)")
    if refusal is not None:
        raise ProtectedMemory(refusal)


def agent_write_refusal(memory_dir: Path, path: Path, *, team: bool) -> str | None:
    """Why a background agent may not write `path` (real, inside the real `memory_dir`), or
    None: an index (`MEMORY.md`, and `team/MEMORY.md` with `team`), or a memory file
    `memory.write` would also take (`.md`, a name the store reads: `_never_read`); with
    `team=False`, nothing in `team/` either. The reason names the file by its key under the
    memory dir: the real path is not the one the agent was given when the dir is reached
    through a link (a linked `~/.claude`)."""
    parts = path.relative_to(memory_dir).parts
    named = "/".join(parts) or "the memory folder itself"
    if not parts:
        return f"{named} is not a file"
    *folders, name = parts
    in_team = bool(folders) and is_team_folder(memory_dir, folders[0])
    if not team and in_team:
        return f"{named} is a team memory, shared with the team: leave it as it is"
    if naming.is_index_name(name):
        if len(folders) == (1 if in_team else 0):
            return None
        # Read neither as an index nor as a memory.
        return (
            f"{named} names the index ({index_mod.INDEX_NAME}), not a memory; the index is "
            f"{index_mod.INDEX_NAME} at the top of the memory folder (or of team/)"
        )
    problem = _never_read(parts, team=in_team)
    if problem is not None:
        return f"{named} {problem}"
    if not name.endswith(".md"):
        return f"{named} is not a memory file: memories are .md files"
    return None


def _never_read(parts: Sequence[str], *, team: bool) -> str | None:
    """Why a file at these parts of a memory dir would never be read as a memory, or None:
    the store's own rule (`store.never_read`: hidden names, conflict copies anywhere, and in
    `team/` also what team sync skips), and its depth. `team`: `parts[0]` is the team folder.
    A name the store skips was written, answered as saved, and never read back."""
    *folders, name = parts
    skipped = [f for i, f in enumerate(folders) if not (team and i == 0)]
    skipped = [f for f in skipped if never_read(f, team=team, folder=True)]
    if skipped:
        return f"is in the folder {skipped[0]!r}, {_why(skipped[0])}"
    if never_read(name, team=team, folder=False):
        return f"is named {name!r}, {_why(name)}"
    if len(parts) - 1 > MAX_DEPTH:
        return f"is {len(parts) - 1} folders deep; memories are read {MAX_DEPTH} deep"
    return None


def _why(name: str) -> str:
    """Why a name the store skips is skipped (one of `store.never_read`'s reasons)."""
    if name.startswith("."):
        return (
            "which is hidden (a name starting with '.'): hidden files and folders are never "
            "read as memories"
        )
    if name.endswith(("~", ".swp", ".swx", ".tmp")):
        return (
            "which is an editor backup's or temp file's name (ending in ~, .swp, .swx or .tmp): "
            "such names are never read as memories (team sync skips them)"
        )
    return (
        "which is a conflict copy's name (<name>.conflict-<time>.md, set aside by a team pull): "
        "such files are never read as memories"
    )


def _mode(path: Path) -> int | None:
    try:
        return os.lstat(path).st_mode
    except FileNotFoundError:
        return None
