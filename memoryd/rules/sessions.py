"""Per session, the union of every path the session ever touched.

A session is its project's root and its id: two projects' sessions with one id (a repository
cloned inside another, each with a session "s1") are two sessions, never one list of paths
activating both projects' conditional rules.

Conditional and nested instruction files activated before a compaction must stay active
after it, so `get_context` matches against everything a session reported, not only the
paths of the current call. `after_turn` adds the turn's read paths here too.

`get_context` needs the union as `Path`s (its view: moved under the real cwd, those outside
the project also resolved). Made again on each call, 50,000 of them held the GIL ~0.3 s a
call beside the event loop; so each session keeps its view (`view`, `keep`) and only paths
added since are made into Paths.
"""

from __future__ import annotations

import asyncio
import itertools
import os.path
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from memoryd.core.project import SessionKey

T = TypeVar("T")

# Touched paths judged (or made into Paths) on the event loop; more go to a thread.
INLINE_TOUCHED = 256
MAX_SESSIONS = 1000
MAX_PATHS_PER_SESSION = 100_000
# In all sessions together: the least recently used sessions are dropped first, never the one
# adding paths (a dropped session that comes back starts again from what it reports then).
MAX_PATHS_TOTAL = 200_000
# Paths of the views kept, all sessions together (~20 MB at 50,000): past it the least
# recently used sessions' views go, their paths stay.
MAX_VIEW_PATHS = 100_000


def normalize(raw: str, cwd: Path | None) -> str | None:
    """An absolute, normalized path string; None for a relative path with no cwd, or junk."""
    if not raw or "\x00" in raw:
        return None
    if not os.path.isabs(raw):
        if cwd is None:
            return None
        raw = os.path.join(cwd, raw)
    if _normal(raw):  # most are; `normpath` is Python code (~1.5 µs a path)
        return raw
    return os.path.normpath(raw)


def _normal(path: str) -> bool:
    """Whether `normpath` leaves the absolute `path` as it is: no empty, `.` or `..` part, no
    trailing slash."""
    return (
        "//" not in path
        and "/./" not in path
        and "/../" not in path
        and not path.endswith(("/", "/.", "/.."))
    )


def normalize_all(paths: Iterable[str], cwd: Path | str | None) -> list[str]:
    """`normalize` of each path (relative ones need `cwd`), the unusable left out."""
    base = Path(cwd) if cwd is not None else None
    return [p for p in (normalize(raw, base) for raw in paths) if p is not None]


async def off_loop(size: int, call: Callable[..., T], *args: Any) -> T:
    """`call(*args)`, in a thread when it handles more than INLINE_TOUCHED paths."""
    if size <= INLINE_TOUCHED:
        return call(*args)
    return await asyncio.to_thread(call, *args)


async def normalized(paths: Sequence[str], cwd: Path | str | None) -> list[str]:
    """`normalize_all`; many in a thread (100,000 held the event loop ~0.15 s)."""
    return await off_loop(len(paths), normalize_all, paths, cwd)


class _Session:
    __slots__ = ("covered", "paths", "view", "view_key")

    def __init__(self) -> None:
        self.paths: dict[str, None] = {}  # in the order added: a view covers the first ones
        self.view_key: Hashable = None
        self.view: frozenset[Path] = frozenset()
        self.covered = 0  # how many of `paths` the view was made of


@dataclass(frozen=True)
class ViewDraft:
    """What `view` found: the kept view (or an empty one) and the paths it lacks."""

    ident: SessionKey
    session: _Session
    key: Hashable
    base: frozenset[Path]
    new: list[str]
    covered: int  # of the session's paths, by base and new together


class SessionPaths:
    def __init__(self) -> None:
        self._sessions: OrderedDict[SessionKey, _Session] = OrderedDict()
        self._total = 0  # paths held, all sessions together

    def add(self, root: Path, session_id: str, paths: Iterable[str]) -> None:
        """Add paths to the session `session_id` of the project at `root`."""
        ident = (root, session_id)
        session = self._sessions.get(ident)
        if session is None:
            session = self._sessions[ident] = _Session()
            while len(self._sessions) > MAX_SESSIONS:  # the least recently used go first
                self._total -= len(self._sessions.popitem(last=False)[1].paths)
        self._sessions.move_to_end(ident)
        known = session.paths
        before = len(known)
        for path in paths:
            if len(known) >= MAX_PATHS_PER_SESSION:
                break
            known[path] = None
        self._total += len(known) - before
        while self._total > MAX_PATHS_TOTAL and len(self._sessions) > 1:
            self._total -= len(self._sessions.popitem(last=False)[1].paths)

    def view(self, root: Path, session_id: str, key: Hashable) -> ViewDraft:
        """The session's view made for `key` as kept, and the paths added since (all of them
        when none was kept for `key`): make Paths of those, join them to `base` and hand the
        result to `keep`. Unchanged since, `new` is empty and `base` the very set kept."""
        ident = (root, session_id)
        session = self._sessions.get(ident) or _Session()
        covered = len(session.paths)
        if session.view_key != key:
            return ViewDraft(ident, session, key, frozenset(), list(session.paths), covered)
        new = list(itertools.islice(session.paths, session.covered, None))
        return ViewDraft(ident, session, key, session.view, new, covered)

    def keep(self, draft: ViewDraft, view: frozenset[Path]) -> None:
        """Keep `view`, made from `draft`, unless its session was dropped meanwhile or a view
        of more of its paths was kept."""
        session = draft.session
        if self._sessions.get(draft.ident) is not session:
            return
        if session.view_key == draft.key and session.covered >= draft.covered:
            return
        session.view_key, session.view, session.covered = draft.key, view, draft.covered
        held = session.covered
        for other in reversed(self._sessions.values()):  # the most recently used keep theirs
            if other is session:
                continue
            if held + other.covered > MAX_VIEW_PATHS:
                other.view_key, other.view, other.covered = None, frozenset(), 0
            held += other.covered

    async def add_touched(
        self, root: Path, session_id: str, paths: Sequence[str], cwd: Path | str | None = None
    ) -> None:
        """Remember paths a session of the project at `root` read or wrote; relative ones
        need `cwd` (else ignored)."""
        self.add(root, session_id, await normalized(paths, cwd))

    def get(self, root: Path, session_id: str) -> frozenset[str]:
        """Every path the session has reported so far (absolute, normalized)."""
        session = self._sessions.get((root, session_id))
        return frozenset(session.paths) if session is not None else frozenset()

    def status_extra(self) -> dict[str, int]:
        return {"sessions_with_touched_paths": len(self._sessions)}
