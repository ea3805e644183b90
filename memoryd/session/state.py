"""What a session's summary bookkeeping must remember across daemon restarts.

One small JSON file per session under memoryd's own state dir
(`<state>/sessions/<project key>/<session id>.json`, dirs 0700, file 0600), replaced
atomically. A missing or unreadable file means a fresh session; it never stops the daemon.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memoryd import fsutil, jsonread, paths
from memoryd.session.thresholds import ThresholdState

FORMAT_VERSION = 1
# A record is a few hundred bytes; anything far larger is not one of ours.
MAX_RECORD_BYTES = 1024 * 1024


@dataclass
class SessionRecord:
    session_id: str
    project_key: str
    thresholds: ThresholdState = field(default_factory=ThresholdState)
    # How many leading transcript messages the summary covers (None: no summary written yet).
    summarized_messages: int | None = None
    # Counted by a compaction, in the compacted list (memoryd's head first): a client that
    # went on with a list of its own (Claude Code compacts by itself) does not have it.
    summarized_in_compacted: bool = False
    token_offset: int = 0  # the usage correction (see memoryd.llm.tokens.TokenCounter)
    updates: int = 0
    last_update_at: float | None = None  # wall clock, seconds
    last_error: str | None = None
    compactions: int = 0


def worth_keeping(record: SessionRecord) -> bool:
    """Whether the record holds more than a fresh one would, the usage correction aside: a
    session below 10,000 tokens, never summarized nor compacted, needs no file (its correction
    comes back with the next `usage`), or every session id a client names would leave one."""
    fresh = SessionRecord(record.session_id, record.project_key, token_offset=record.token_offset)
    return record != fresh


def sessions_root() -> Path:
    return paths.state_dir() / "sessions"


def record_path(project_key: str, session_id: str) -> Path:
    return sessions_root() / project_key / f"{session_id}.json"


def to_json(record: SessionRecord) -> str:
    data = asdict(record)
    data["version"] = FORMAT_VERSION
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def _int(value: Any, default: int = 0) -> int:
    return (
        value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default
    )


def _time(value: Any) -> float | None:
    """A finite time in seconds, else None: an integer too big for a float (a damaged file)
    raised OverflowError, no ValueError, out of the reader and failed every turn."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        seconds = float(value)
    except OverflowError:
        return None
    return seconds if math.isfinite(seconds) else None


def _in_compacted(data: dict[str, Any], counted: bool) -> bool:
    """`summarized_in_compacted`; a record of an older daemon (no such field) with a count
    does not say where it was taken, maybe in the list of a compaction the client did not go
    on with (Claude Code's PreCompact hook): read as if so, a list without memoryd's head is
    not covered and compact keeps more of it, where trusted it dropped messages the notes
    never saw."""
    if "summarized_in_compacted" not in data:
        return counted
    return data["summarized_in_compacted"] is True


def from_json(text: str, session_id: str, project_key: str) -> SessionRecord:
    """Parse a record; fields that are missing or malformed fall back to their defaults."""
    # A number of 5,000 digits is read as none: that field's default, the rest kept.
    data = jsonread.loads(text, long_ints="none")
    if not isinstance(data, dict):
        raise ValueError("a session record must be a JSON object")
    raw = data.get("thresholds")
    thresholds = raw if isinstance(raw, dict) else {}
    summarized = data.get("summarized_messages")
    last_update = data.get("last_update_at")
    last_error = data.get("last_error")
    offset = data.get("token_offset")
    return SessionRecord(
        session_id=session_id,
        project_key=project_key,
        thresholds=ThresholdState(
            initialized=thresholds.get("initialized") is True,
            tokens_at_last_update=_int(thresholds.get("tokens_at_last_update")),
            messages_at_last_update=_int(thresholds.get("messages_at_last_update")),
        ),
        summarized_messages=_int(summarized) if summarized is not None else None,
        summarized_in_compacted=_in_compacted(data, summarized is not None),
        token_offset=offset if isinstance(offset, int) and not isinstance(offset, bool) else 0,
        updates=_int(data.get("updates")),
        last_update_at=_time(last_update),
        last_error=last_error if isinstance(last_error, str) else None,
        compactions=_int(data.get("compactions")),
    )


def load(project_key: str, session_id: str) -> tuple[SessionRecord, str | None]:
    """The stored record (or a fresh one) and, when the file was unusable, why."""
    path = record_path(project_key, session_id)
    try:
        # Read on the event loop, so never from a FIFO or without end.
        raw = fsutil.read_regular_file(path, MAX_RECORD_BYTES)
        if len(raw) > MAX_RECORD_BYTES:
            return SessionRecord(
                session_id, project_key
            ), f"ignoring {path}: over {MAX_RECORD_BYTES} bytes"
        text = raw.decode("utf-8")
    except FileNotFoundError:
        return SessionRecord(session_id, project_key), None
    except (OSError, UnicodeDecodeError) as exc:
        return SessionRecord(session_id, project_key), f"cannot read {path}: {exc}"
    try:
        return from_json(text, session_id, project_key), None
    except ValueError as exc:
        return SessionRecord(session_id, project_key), f"ignoring corrupt {path}: {exc}"


def save(record: SessionRecord) -> None:
    path = record_path(record.project_key, record.session_id)
    fsutil.ensure_private_dir(sessions_root())
    fsutil.ensure_private_dir(path.parent)
    fsutil.atomic_write_text(path, to_json(record))
