"""SyncState: everything one team folder knows about its repository on the server.

One object per (server, repository, team folder); no module globals. It is persisted as JSON in
memoryd's state dir (never in the repository), atomically after every pull and push, so a
restart neither re-uploads everything (the server checksums are known) nor forgets pending
keys. A permanent-failure suppression is deliberately *not* persisted: SPEC.md lifts it on
restart; nor are the limits learned from the server's 413s (an admin may have raised them).

Two daemons of one HOME (two sockets) sync the same folder with the same state file. Each
pull and push holds an exclusive `flock` on `<state file>.lock` (`StateStore.shared`) and
first takes up what the other daemon saved since: with a state of its own in memory, a daemon
pushed with the ETag and base it had before the other's push, and its 412 refresh took the
user's next edit for a conflict with the version the other daemon had pushed from this folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import secrets
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog

from memoryd import jsonread, paths
from memoryd.core.project import sanitize_key
from memoryd.fsutil import atomic_write_text, ensure_private_dir, flock_tries, open_lock_file
from memoryd.team.protocol import usable_etag
from memoryd_client.processes import process_state

log = structlog.get_logger("memoryd.team")

STATE_VERSION = 1
MAX_CONFLICTS_KEPT = 200
# The server's ETags a folder remembers, to see its state go back to an earlier one (a restore
# from a backup, a failover to a lagging replica): an ETag names the whole state.
MAX_SEEN_ETAGS = 64


@dataclass
class Skipped:
    """A local entry that was not uploaded, and why (`rule` only for a secret finding)."""

    # secret | too_large | max_entries | invalid_key | invalid_content | key_collision | rejected
    reason: str
    checksum: str | None = None
    rule: str | None = None
    detail: str | None = None


@dataclass
class Conflict:
    key: str
    saved_as: str  # absolute path of the copy of the local edit
    at: str  # ISO 8601 UTC


@dataclass
class SyncState:
    repo: str
    server: str
    team_dir: str
    project_root: str | None = None
    # The worktree the folder was made for, when not the main one (`Project.settings_root`):
    # a linked worktree whose settings name a memory dir of its own has a team folder of its
    # own, which the main worktree's root does not lead back to at the next start.
    worktree_root: str | None = None
    etag: str | None = None
    # Checksums the server holds, as of the last GET/PUT.
    server_checksums: dict[str, str] = field(default_factory=dict)
    # The content checksum of each local file at its last sync (pull wrote it / push sent it):
    # what tells "changed locally since the last sync" apart from "changed on the server".
    synced: dict[str, str] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)
    skipped: dict[str, Skipped] = field(default_factory=dict)
    refused_keys: dict[str, str] = field(default_factory=dict)  # server key -> why refused
    conflicts: list[Conflict] = field(default_factory=list)  # the last MAX_CONFLICTS_KEPT
    conflicts_total: int = 0  # every conflict ever recorded, kept or not
    last_result: dict[str, Any] | None = None
    # The server's ETags, oldest first (MAX_SEEN_ETAGS); `went_back`: its state went back to
    # one of them and no pull has run since (a push's 412 refresh saw it first).
    seen_etags: list[str] = field(default_factory=list)
    went_back: bool = False
    # In memory only (see module docstring).
    suppressed: str | None = field(default=None, compare=False)
    # Learned from the server's 413s, in memory only too: an admin may raise the limit, so a
    # restart asks the server again, and so does the engine an hour after learning them
    # (saved, a learned entry limit withheld every new key for good).
    max_entries: int | None = field(default=None, compare=False)
    max_body: int | None = field(default=None, compare=False)  # a 413 body-too-large
    limits_learned_at: datetime | None = field(default=None, compare=False)

    def to_json(self) -> str:
        return encode_state(self.snapshot())

    def snapshot(self) -> dict[str, Any]:
        """What `to_json` writes, in containers of its own: `StateStore.save_off_loop` encodes
        it in a thread while the loop goes on changing the state. Field by field: `asdict`
        deep-copied every checksum (two dicts of 20,000 strings in a large folder) only for
        the copy to be thrown away; a shallow copy takes a millisecond."""
        data: dict[str, Any] = {}
        for f in fields(self):
            if f.name in _IN_MEMORY:
                continue
            value = getattr(self, f.name)
            if isinstance(value, dict):
                value = dict(value)
            elif isinstance(value, list):
                value = list(value)
            data[f.name] = value
        data["skipped"] = {key: asdict(why) for key, why in self.skipped.items()}
        data["conflicts"] = [asdict(conflict) for conflict in self.conflicts]
        data["version"] = STATE_VERSION
        return data

    @classmethod
    def from_json(cls, text: str) -> SyncState:
        """Parse a persisted state; ValueError when it is not one (the caller starts fresh).

        A whole number past `jsonread.MAX_INT_DIGITS` (none memoryd writes) is damage to that
        value only: read as None, it costs the field it is in (a count, the ETag, the last
        result's figure) where json's ValueError set the whole state aside for a full pull.
        Nothing here writes the text back; every field goes through its own check."""
        data = jsonread.loads(text, long_ints="none")
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            raise ValueError("not a sync state of this version")
        try:
            return cls(
                repo=_str(data["repo"]),
                server=_str(data["server"]),
                team_dir=_str(data["team_dir"]),
                project_root=_opt_str(data.get("project_root")),
                worktree_root=_opt_str(data.get("worktree_root")),
                # A tag no header can carry (saved before the client checked them) is dropped:
                # kept, every request failed before it was sent.
                etag=usable_etag(_opt_str(data.get("etag"))),
                server_checksums=_str_map(data.get("server_checksums", {})),
                synced=_str_map(data.get("synced", {})),
                pending=[_str(k) for k in data.get("pending", [])],
                skipped=_skipped(data.get("skipped", {})),
                refused_keys=_str_map(data.get("refused_keys", {})),
                conflicts=_conflicts(data.get("conflicts", [])),
                conflicts_total=_opt_int(data.get("conflicts_total")) or 0,
                # Shown by status as it is and read as a mapping: anything else is dropped.
                last_result=_opt_dict(data.get("last_result")),
                seen_etags=[
                    tag
                    for tag in (usable_etag(_str(t)) for t in data.get("seen_etags", []))
                    if tag is not None
                ][-MAX_SEEN_ETAGS:],
                went_back=data.get("went_back") is True,
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed sync state: {exc}") from exc

    def __post_init__(self) -> None:
        # A state saved before the count was kept: it had at least the conflicts it lists.
        self.conflicts_total = max(self.conflicts_total, len(self.conflicts))

    def returns_to(self, etag: str | None) -> bool:
        """Whether `etag` is a state the server had before the last one we saw (first seen
        earlier: coming back to a later one, a replica catching up, is going forward)."""
        seen, now = self.seen_etags, self.etag
        return (
            etag is not None
            and now is not None
            and etag != now
            and etag in seen
            and now in seen
            and seen.index(etag) < seen.index(now)
        )

    def server_at(self, etag: str | None, *, pushed: bool = False) -> None:
        """The server's state is now `etag` (a GET or a PUT said so). One it had before the
        last (a restore from a backup, a lagging replica) sets `went_back`: the next pull
        keeps aside what the server no longer holds rather than overwrite it.

        `pushed`: our PUT made it from the last one (If-Match), so it is the newest even when
        the server had it before: a push undoing our previous one hashes to that one's ETag
        again, which is no going back, and the state it undid is now the older one."""
        if not pushed and self.returns_to(etag):
            self.went_back = True
        self.etag = etag
        if etag is None:  # the server holds nothing: what it held before is no measure now
            self.seen_etags.clear()
            return
        if pushed and etag in self.seen_etags:
            self.seen_etags.remove(etag)
        if etag not in self.seen_etags:  # in the order first seen
            self.seen_etags.append(etag)
            del self.seen_etags[:-MAX_SEEN_ETAGS]

    def add_conflict(self, conflict: Conflict) -> None:
        """Record a conflict; only the newest MAX_CONFLICTS_KEPT are kept (the state is saved
        after every sync), `conflicts_total` counts them all so status says what it left out."""
        self.conflicts.append(conflict)
        self.conflicts_total += 1
        del self.conflicts[:-MAX_CONFLICTS_KEPT]


_IN_MEMORY = ("suppressed", "max_entries", "max_body", "limits_learned_at")
# Set by this daemon's service when it makes the folder, not by a sync: kept when taking up
# the other daemon's state.
_OWN = ("project_root", "worktree_root")
_TOKEN_BYTES = 16
_POLL_FIRST_S = 0.001
_POLL_MAX_S = 0.05  # the other daemon holds it across its requests: look again this often
_PID_BYTES = 16  # after the token: the pid of the daemon that marked it, in decimal


class StateHeld(Exception):
    """The state file's lock was still held by another process at the wait's end (`pid`:
    the holder's, when the lock file says it; `running`: whether that process runs, True,
    is stopped by a signal, False, or neither is known, None)."""

    def __init__(self, pid: int | None, running: bool | None = None) -> None:
        super().__init__(f"held by pid {pid}" if pid is not None else "held")
        self.pid = pid
        self.running = running

    def said(self, waited_s: float) -> str:
        """Why a sync gave up its wait, for `last_result`: a holder still at work (a paged
        pull of a large repository takes minutes) was told apart from a stopped one only by
        the pid, and the notice sent the user looking for a stopped daemon that was not."""
        held = "the sync state of this folder is held by another memoryd of this HOME"
        if self.pid is None:
            return (
                f"{held} (pid not known) for over {waited_s:g} s; a memoryd stopped (Ctrl-Z) "
                "holds it until it runs again; will retry"
            )
        if self.running:
            return (
                f"{held} (pid {self.pid}), still syncing it after {waited_s:g} s (a large pull "
                "or push); will retry"
            )
        if self.running is False:
            return (
                f"{held} (pid {self.pid}), stopped (Ctrl-Z or SIGSTOP) for over {waited_s:g} s: "
                f"it holds it until it runs again (kill -CONT {self.pid}); will retry"
            )
        return f"{held} (pid {self.pid}) for over {waited_s:g} s; will retry"


def encode_state(data: dict[str, Any]) -> str:
    """The state file's text of a `SyncState.snapshot`."""
    text = json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate got in (the engine keeps them out): escaped, it still saves.
        text = json.dumps(data, ensure_ascii=True, indent=1, sort_keys=True)
    return text


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _opt_str(value: Any) -> str | None:
    return None if value is None else _str(value)


def _opt_int(value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError("expected an integer")
    return value


def _opt_dict(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _str_map(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise TypeError("expected an object")
    return {_str(k): _str(v) for k, v in value.items()}


def _skipped(value: Any) -> dict[str, Skipped]:
    """The skipped entries a state lists, one that is damaged (a field of the wrong type, or
    missing) dropped: the next push checks that file again and skips it again if it must."""
    if not isinstance(value, dict):
        raise TypeError("expected an object")
    kept: dict[str, Skipped] = {}
    for key, item in value.items():
        if not isinstance(item, dict) or not isinstance(reason := item.get("reason"), str):
            continue
        more = [item.get(name) for name in ("checksum", "rule", "detail")]
        if all(v is None or isinstance(v, str) for v in more):
            kept[key] = Skipped(reason, *more)
    return kept


def _conflicts(value: Any) -> list[Conflict]:
    """The conflicts a state lists, one that is damaged dropped: a record only (its copy
    stays in the folder), and status read each one's key as a path, failing every call."""
    if not isinstance(value, list):
        raise TypeError("expected a list")
    kept: list[Conflict] = []
    for item in value:
        if not isinstance(item, dict):
            continue
        key, saved_as, at = item.get("key"), item.get("saved_as"), item.get("at")
        if isinstance(key, str) and isinstance(saved_as, str) and isinstance(at, str):
            kept.append(Conflict(key, saved_as, at))
    return kept


# The repository's part of a state file's name: a GitLab full path may have 512 characters,
# and a file name over 255 bytes could not be saved. The hash tells names cut alike apart.
_NAMED_REPO_CHARS = 200


def state_path(server: str, repo: str, team_dir: Path) -> Path:
    """`<state>/team/<repo>-<hash of server, repo and folder>.json`: one file per synced
    folder, the repository's name cut to 200 characters."""
    digest = hashlib.sha256(f"{server}\0{repo}\0{team_dir}".encode()).hexdigest()[:12]
    named = sanitize_key(repo)[:_NAMED_REPO_CHARS]
    return paths.state_dir() / "team" / f"{named}-{digest}.json"


class StateStore:
    """Loads and saves one SyncState; a corrupt file is set aside, never a crash."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock_path = path.with_name(path.name + ".lock")
        # Saves run in threads (`save_off_loop`) and may finish out of order: each snapshot
        # is numbered when taken, and one older than the file's is not written over it.
        self._write_lock = threading.Lock()
        self._taken = 0
        self._written = 0
        self._writing: set[asyncio.Future[None]] = set()
        # What this process wrote in the lock file when it last held it: another token there
        # means another daemon held it since (and may have saved).
        self._token: bytes | None = None

    @contextlib.asynccontextmanager
    async def shared(
        self,
        state: SyncState,
        *,
        wait: bool = True,
        until: Callable[[], float] | None = None,
    ) -> AsyncIterator[None]:
        """Hold the state file's lock for a sync, `state` first brought up to what another
        daemon of this HOME saved since this one last held it; its saves are on disk before
        the lock goes. `wait=False`: when the other daemon holds it (mid-request), go on with
        the state as it is rather than wait on its network; nor does it save, so it leaves
        the token as it found it. `until`: the loop time the wait ends at (asked at each
        look: a shutdown may bring it closer), then `StateHeld`. A lock file that cannot be
        opened (a read-only state dir) is done without: no daemon could save there either."""
        fd = await self._lock_file(wait, until)
        cancelled = False
        try:
            if fd is not None:
                found = os.pread(fd, _TOKEN_BYTES, 0)
                if found != self._token:
                    other = await asyncio.to_thread(self._read_other, state)
                    if other is not None:
                        take_up(state, other)
                if wait:
                    # Marked once taken up, not at the release: a holder SIGKILLed after a
                    # save (the kernel drops its flock) left the token of the daemon before
                    # it, which then took the file for unchanged and synced from its stale
                    # ETag.
                    self._token = self._mark(fd)
                else:
                    # Saving nothing, a new token made the other daemon read and decode the
                    # whole state file (4 MB at 20,000 files) at its next sync after every
                    # status poll. Kept when whole: an emptied one (a mark that failed)
                    # names no holder.
                    self._token = found if len(found) == _TOKEN_BYTES else None
            yield
        finally:
            # A save whose caller was cancelled still runs in its thread: written after the
            # release, it would land over what the other daemon saves next.
            while pending := [task for task in self._writing if not task.done()]:
                try:
                    await asyncio.wait(pending)
                except asyncio.CancelledError:
                    cancelled = True
            if fd is not None:
                os.close(fd)  # releases the lock
        if cancelled:
            raise asyncio.CancelledError

    async def _lock_file(self, wait: bool, until: Callable[[], float] | None) -> int | None:
        try:
            fd = open_lock_file(self.lock_path)
        except OSError:
            return None
        loop = asyncio.get_running_loop()
        try:
            # Polled: a blocking flock would hold a thread, and could not be cancelled.
            # Bounded: a holder stopped (Ctrl-Z) or hung holds it for ever.
            for delay in flock_tries(fd, first_s=_POLL_FIRST_S, most_s=_POLL_MAX_S):
                if not wait:
                    os.close(fd)
                    return None
                left = float("inf") if until is None else until() - loop.time()
                if left <= 0:
                    pid = _holder(fd)
                    raise StateHeld(pid, None if pid is None else _running(pid))
                await asyncio.sleep(min(delay, left))
            return fd
        except BaseException:
            os.close(fd)  # closing releases the lock
            raise

    @staticmethod
    def _mark(fd: int) -> bytes | None:
        """A new token in the lock file, for the other daemon to see this one held it (with
        this process's pid, to name it to a daemon that waits too long); None when it could
        not be written (then no token is there to be taken for this one's)."""
        token = secrets.token_bytes(_TOKEN_BYTES)
        marked = token + str(os.getpid()).encode().ljust(_PID_BYTES)
        with contextlib.suppress(OSError):
            if os.pwrite(fd, marked, 0) == len(marked):
                return token
        with contextlib.suppress(OSError):  # a full disk: emptied, it matches no token
            os.ftruncate(fd, 0)
        return None

    def _read_other(self, state: SyncState) -> SyncState | None:
        """The state file as another daemon left it; None when there is none of this folder
        or it cannot be read (this daemon's next save writes its own)."""
        try:
            data = self.path.read_bytes()
            other = SyncState.from_json(data.decode("utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            # Said: this daemon then syncs from its own state, maybe older than the other's.
            log.warning(
                "team sync state unreadable; kept this daemon's",
                path=str(self.path),
                error=str(exc),
            )
            return None
        if (other.repo, other.server, other.team_dir) != (state.repo, state.server, state.team_dir):
            return None
        return other

    def load(self, *, repo: str, server: str, team_dir: Path) -> SyncState:
        fresh = SyncState(repo=repo, server=server, team_dir=str(team_dir))
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return fresh
        except OSError as exc:
            log.warning(
                "team sync state unreadable; starting fresh", path=str(self.path), error=str(exc)
            )
            return fresh
        try:
            # Not UTF-8 or too deeply nested is corrupt too (UnicodeDecodeError is a ValueError,
            # and `jsonread` reads json's RecursionError as one).
            state = SyncState.from_json(data.decode("utf-8"))
        except ValueError as exc:
            log.warning("team sync state corrupt; set aside", path=str(self.path), error=str(exc))
            with contextlib.suppress(OSError):
                self.path.replace(self.path.with_suffix(".corrupt"))
            return fresh
        if (state.repo, state.server, state.team_dir) != (repo, server, str(team_dir)):
            return fresh
        return state

    def save(self, state: SyncState) -> None:
        self._write(*self._take(state))

    async def save_off_loop(self, state: SyncState) -> None:
        """`save`, with the encoding and the write (with its fsyncs) in a thread: a folder of
        20,000 files has a 4 MB state, 50-150 ms of the event loop at every pull and push
        before the disk's wait, while every other request of the daemon waited. The state is
        copied first, on the loop, so what is written is the state as it is now; a save
        whose caller is cancelled still completes (and `shared` waits for it)."""
        task = asyncio.ensure_future(asyncio.to_thread(self._write, *self._take(state)))
        self._writing.add(task)
        task.add_done_callback(self._writing.discard)
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            # The shield retrieves the save's failure for a cancelled caller: said here, or
            # nowhere.
            task.add_done_callback(self._unsaved)
            raise

    def _unsaved(self, task: asyncio.Future[None]) -> None:
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.warning("team sync state not saved", path=str(self.path), error=str(exc))

    def _take(self, state: SyncState) -> tuple[int, dict[str, Any]]:
        self._taken += 1
        return self._taken, state.snapshot()

    def _write(self, number: int, data: dict[str, Any]) -> None:
        text = encode_state(data)
        with self._write_lock:
            if number < self._written:
                return  # a later snapshot is on disk already
            ensure_private_dir(self.path.parent)
            atomic_write_text(self.path, text)
            self._written = number


def _holder(fd: int) -> int | None:
    """The pid the lock file names (the last daemon to mark it, which holds it unless a
    status's brief look does); None when it names none, or this process."""
    try:
        text = os.pread(fd, _PID_BYTES, _TOKEN_BYTES)
    except OSError:
        return None
    pid = text.strip()
    if not pid.isdigit() or int(pid) == os.getpid():
        return None
    return int(pid)


def _running(pid: int) -> bool | None:
    """Whether `pid` runs (True) or is stopped by a signal or a tracer (False: state T or t
    in /proc); None when it is gone or /proc does not say (not Linux)."""
    state = process_state(pid)
    if state in ("T", "t"):
        return False
    return None if state in (None, "Z", "X") else True


def take_up(state: SyncState, other: SyncState) -> None:
    """`state` (in place: the service and the watcher hold it) becomes what another daemon
    saved, but for what only this daemon knows (`_IN_MEMORY`, `_OWN`)."""
    for f in fields(SyncState):
        if f.name not in _IN_MEMORY and f.name not in _OWN:
            setattr(state, f.name, getattr(other, f.name))


def saved_states() -> list[SyncState]:
    """Every persisted state (for resuming sync at daemon start); unreadable ones skipped."""
    folder = paths.state_dir() / "team"
    states: list[SyncState] = []
    if not folder.is_dir():
        return states
    for path in sorted(folder.glob("*.json")):
        try:
            states.append(SyncState.from_json(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return states
