"""Per session, the union of every path the session ever touched.

Conditional and nested instruction files activated before a compaction must stay active
after it, so `get_context` matches against everything a session reported, not only the
paths of the current call. `after_turn` adds the turn's read paths here too.
"""

from __future__ import annotations

import os.path
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path

MAX_SESSIONS = 1000
MAX_PATHS_PER_SESSION = 100_000
# In all sessions together: the least recently used sessions are dropped first, never the one
# adding paths (a dropped session that comes back starts again from what it reports then).
MAX_PATHS_TOTAL = 200_000


def normalize(raw: str, cwd: Path | None) -> str | None:
    """An absolute, normalized path string; None for a relative path with no cwd, or junk."""
    if not raw or "\x00" in raw:
        return None
    if not os.path.isabs(raw):
        if cwd is None:
            return None
        raw = os.path.join(cwd, raw)
    return os.path.normpath(raw)


class SessionPaths:
    def __init__(self) -> None:
        self._sessions: OrderedDict[str, set[str]] = OrderedDict()
        self._total = 0  # paths held, all sessions together

    def add(self, session_id: str, paths: Iterable[str]) -> None:
        known = self._sessions.get(session_id)
        if known is None:
            known = self._sessions[session_id] = set()
            while len(self._sessions) > MAX_SESSIONS:  # the least recently used go first
                self._total -= len(self._sessions.popitem(last=False)[1])
        self._sessions.move_to_end(session_id)
        before = len(known)
        for path in paths:
            if len(known) >= MAX_PATHS_PER_SESSION:
                break
            known.add(path)
        self._total += len(known) - before
        while self._total > MAX_PATHS_TOTAL and len(self._sessions) > 1:
            self._total -= len(self._sessions.popitem(last=False)[1])

    def add_touched(
        self, session_id: str, paths: Iterable[str], cwd: Path | str | None = None
    ) -> None:
        """Remember paths a session read or wrote; relative ones need `cwd` (else ignored)."""
        base = Path(cwd) if cwd is not None else None
        self.add(session_id, [p for p in (normalize(raw, base) for raw in paths) if p is not None])

    def get(self, session_id: str) -> frozenset[str]:
        """Every path the session has reported so far (absolute, normalized)."""
        return frozenset(self._sessions.get(session_id, ()))

    def status_extra(self) -> dict[str, int]:
        return {"sessions_with_touched_paths": len(self._sessions)}
