"""Where each session's extraction left off, kept across daemon restarts.

Held in memory only, a restart (a crash, `memctl restart`, an upgrade) forgot every place:
the next turn of every session then offered the whole conversation to extraction again, as
"the last N messages", and what was already saved was extracted again. The places of the
sessions that had a turn last are written to `<state>/extraction_cursors.json` after each
extraction run (in a thread, atomically); a place changed by a turn that ran none (skipped,
compacted) is written with the next run's.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import structlog

from memoryd import fsutil, jsonread, paths

log = structlog.get_logger("memoryd.extraction")

FORMAT_VERSION = 1
# Sessions whose place is written to disk (the ones with a turn last): ~100 bytes each.
MAX_SAVED = 1_000
# A file of MAX_SAVED places is ~100 KB; anything far larger is not ours.
MAX_FILE_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Cursor:
    """How many of a session's messages were offered to extraction, and the last of them.

    The count alone is not enough: a client that compacts on its own (Claude Code) or sends
    only its newest messages (the hook's 6 MiB cap) hands in a different list, in which the
    same count points elsewhere. `mark` (`message_mark` of the last message offered) says
    where the offered part ends in it; None after a `compact` that dropped every message
    offered: then the count holds only for memoryd's own compacted list."""

    count: int
    mark: str | None


def cursors_path() -> Path:
    return paths.state_dir() / "extraction_cursors.json"


class Cursors:
    """session id → Cursor, the least recently set first; read from disk on first use."""

    def __init__(self, path: Path | None = None) -> None:
        self._path = path
        self._items: OrderedDict[str, Cursor] | None = None
        self._dirty = False

    def _loaded(self) -> OrderedDict[str, Cursor]:
        if self._items is None:
            self._items = self._read()
        return self._items

    def get(self, session_id: str) -> Cursor | None:
        return self._loaded().get(session_id)

    def __setitem__(self, session_id: str, cursor: Cursor) -> None:
        items = self._loaded()
        items[session_id] = cursor
        items.move_to_end(session_id)
        self._dirty = True

    def pop(self, session_id: str) -> Cursor | None:
        cursor = self._loaded().pop(session_id, None)
        self._dirty = self._dirty or cursor is not None
        return cursor

    def unsaved(self) -> str | None:
        """The text to write (the MAX_SAVED last set), or None when nothing changed since
        the last call. Built on the caller's thread (the loop): the dict is not shared."""
        if not self._dirty:
            return None
        self._dirty = False
        items = list(self._loaded().items())[-MAX_SAVED:]
        data = {
            "version": FORMAT_VERSION,
            "sessions": [[sid, c.count, c.mark] for sid, c in items],
        }
        return json.dumps(data, separators=(",", ":")) + "\n"

    def write(self, text: str) -> None:
        """Write what `unsaved` gave (from a thread); a failure is logged: a place lost costs
        one turn's messages offered again, not the daemon."""
        path = self._path or cursors_path()
        try:
            fsutil.atomic_write_text(path, text)
        except OSError as exc:
            log.warning("cannot save extraction places", path=str(path), error=str(exc))

    def _read(self) -> OrderedDict[str, Cursor]:
        path = self._path or cursors_path()
        items: OrderedDict[str, Cursor] = OrderedDict()
        try:
            raw = fsutil.read_regular_file(path, MAX_FILE_BYTES)
            if len(raw) > MAX_FILE_BYTES:
                raise ValueError(f"over {MAX_FILE_BYTES} bytes")
            # A count of 5,000 digits is read as none: its session dropped alone.
            sessions = jsonread.loads(raw.decode("utf-8"), long_ints="none")["sessions"]
            for sid, count, mark in sessions:
                if (
                    isinstance(sid, str)
                    and isinstance(count, int)
                    and not isinstance(count, bool)
                    and count >= 0
                    and (mark is None or isinstance(mark, str))
                ):
                    items[sid] = Cursor(count, mark)
        except FileNotFoundError:
            pass
        except (OSError, ValueError, TypeError, KeyError) as exc:
            # Every session's next turn is offered whole, as before a first start: say why.
            log.warning(
                "extraction places unreadable; starting afresh", path=str(path), error=str(exc)
            )
            items.clear()
        return items
