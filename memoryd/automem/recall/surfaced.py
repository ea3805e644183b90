"""Which memories each session has already been shown, so recall does not repeat them.

With a `session_id` the daemon remembers what it returned to that session, and leaves it out
of the next recall, unless the client passes `already_surfaced` itself: then that list is the
whole of what was shown (a reply the Claude Code hook gave up on, over its budget, never
reached the agent). Bounded: the most recent sessions, and the most recent paths of each.
A compaction takes what recall showed out of the agent's context, so it forgets the session's
list: what was shown before may be shown again (as the seed's set, read from the messages).
"""

from __future__ import annotations

from collections import OrderedDict

MAX_SESSIONS = 1_000
MAX_PATHS_PER_SESSION = 500


class SurfacedMemories:
    def __init__(self) -> None:
        self._sessions: OrderedDict[str, OrderedDict[str, None]] = OrderedDict()

    def seen(self, session_id: str) -> set[str]:
        paths = self._sessions.get(session_id)
        if paths is None:
            return set()
        self._sessions.move_to_end(session_id)
        return set(paths)

    def add(self, session_id: str, paths: list[str]) -> None:
        known = self._sessions.setdefault(session_id, OrderedDict())
        self._sessions.move_to_end(session_id)
        for path in paths:
            known[path] = None
            known.move_to_end(path)
        while len(known) > MAX_PATHS_PER_SESSION:
            known.popitem(last=False)
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
