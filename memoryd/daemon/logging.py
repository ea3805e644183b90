"""structlog set-up: readable lines on a terminal, JSON lines to a file, secrets scrubbed."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
import threading
from collections.abc import MutableMapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO, cast

import structlog

from memoryd.fsutil import make_private_dirs
from memoryd_client.private_files import open_private_log

# Key names whose values are credentials, whatever they contain.
_SECRET_KEYS = re.compile(r"(api[_-]?key|token|secret|password|authorization|credential)", re.I)
# Credential-shaped strings anywhere in a value (provider keys, bearer tokens, JWT-like).
_SECRET_VALUES = re.compile(
    r"(sk-ant-[A-Za-z0-9_-]{8,}|sk-[A-Za-z0-9_-]{20,}|"
    r"(?i:bearer)\s+[A-Za-z0-9._~+/=-]{8,}|"
    r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{5,}|"
    r"gh[pousr]_[A-Za-z0-9]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})"
)
REDACTED = "[redacted]"
# The log file is moved to `<name>.1` (the one before dropped) once over this: a daemon that
# runs for months, or an error repeated every turn, fills it without end otherwise.
MAX_LOG_BYTES = 32 * 1024 * 1024
_OPENED: list[LogFile] = []


def _secret_key(key: str, value: Any) -> bool:
    """Is `key` a credential's name? Token counts (`input_tokens=1234`) are not credentials."""
    if not _SECRET_KEYS.search(key):
        return False
    is_count = isinstance(value, int) and not isinstance(value, bool)
    return not (is_count and key.lower().endswith("tokens"))


def scrub_value(value: Any) -> Any:
    if isinstance(value, str):
        return _SECRET_VALUES.sub(REDACTED, value)
    if isinstance(value, dict):
        return {k: REDACTED if _secret_key(str(k), v) else scrub_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(scrub_value(v) for v in value)
    return value


def redact_secrets(
    _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """Processor: no API key or token ever reaches a log line."""
    for key in list(event_dict):
        if key != "event" and _secret_key(key, event_dict[key]):
            event_dict[key] = REDACTED
        else:
            event_dict[key] = scrub_value(event_dict[key])
    return event_dict


def _scrub_rendered(_logger: Any, _method: str, rendered: Any) -> Any:
    """Last line of defence: tracebacks are rendered late, scrub the final text too."""
    if isinstance(rendered, str):
        return _SECRET_VALUES.sub(REDACTED, rendered)
    return rendered


def open_log_file(path: Path) -> TextIO:
    """`path` opened to append JSON lines (`private_files.open_private_log`: 0600, a plain file
    of the user's). OSError, its strerror saying why, for a folder that is not safe to write in
    (the socket folder's rule) or a path that is not such a file."""
    make_private_dirs(path.parent)
    return open(open_private_log(path), "a", encoding="utf-8", buffering=1, closefd=True)


class _ThreadLines:
    """Lines put together per thread from the pieces written. structlog's print writes a
    line's text and its end apart, under its own lock only; stdlib logging (asyncio, httpx,
    the SDK, from worker threads) writes its whole line under another. One buffer for all
    threads put such a line between another's text and its end: `{…}{…}` and an empty line,
    neither of them JSON."""

    def __init__(self) -> None:
        self._local = threading.local()

    def add(self, text: str) -> str | None:
        """The whole line `text` ends, or None while it does not end one."""
        pending: list[str] | None = getattr(self._local, "pending", None)
        if not text.endswith("\n"):
            if pending is None:
                self._local.pending = pending = []
            pending.append(text)
            return None
        if not pending:
            return text
        pending.append(text)
        line = "".join(pending)
        pending.clear()
        return line


class LogFile:
    """The log file, opened again when its path no longer names it — moved away by logrotate
    (its default `create` mode) or removed to give its room back: the daemon wrote on into
    the old or deleted file for the rest of its life, and nothing appeared at the path. Over
    MAX_LOG_BYTES it is moved to `<name>.1` and a new one started. Both only between lines,
    and always through `open_log_file`'s checks; when the path cannot be opened again, the
    lines go on to the file already open."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = open_log_file(path)
        self._pending = _ThreadLines()  # the start of a line (print writes its end apart)
        self._lock = threading.Lock()  # lines come from worker threads too (stdlib logging)
        self._failed: str | None = None  # why a line could not be written, until one is
        self._torn = False  # part of a failed line reached the file: the next starts afresh

    def write(self, text: str) -> int:
        """Never raises: a log file that cannot be written (a full disk, a quota) raised out
        of every log call, so a request that logged failed, and the start-up line stopped
        the daemon. Each whole line goes out in one write (a failed one is dropped whole,
        never half a line and a stray end); the first line that goes in again is preceded
        by one saying lines are missing there."""
        line = self._pending.add(text)
        if line is not None:
            with self._lock:
                self._follow_path()
                self._emit(line)
        return len(text)

    def _emit(self, line: str) -> None:
        data = line
        if self._failed is not None:
            data = _lines_lost(self._failed) + data
        if self._torn:
            data = "\n" + data
        encoded = data.encode("utf-8", errors="backslashreplace")
        fd = self._file.fileno()
        done = 0
        try:
            while done < len(encoded):
                done += os.write(fd, encoded[done:])
        except OSError as exc:
            self._failed = exc.strerror or str(exc)
            self._torn = self._torn or done > 0
            return
        self._failed, self._torn = None, False

    def _follow_path(self) -> None:
        try:
            opened = os.fstat(self._file.fileno())
            if opened.st_size >= MAX_LOG_BYTES and self._names(opened):
                os.replace(self.path, self.path.with_name(self.path.name + ".1"))
            elif self._names(opened):
                return
            reopened = open_log_file(self.path)
        except OSError:
            return
        _follow_with_std_streams(opened, reopened.fileno())
        self._file.close()
        self._file = reopened

    def _names(self, opened: os.stat_result) -> bool:
        """Whether the path still names the open file."""
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return (st.st_dev, st.st_ino) == (opened.st_dev, opened.st_ino)

    def flush(self) -> None:
        """Nothing to do: every whole line is written as it ends."""

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._file.fileno()

    def close(self) -> None:
        with self._lock:
            self._file.close()


def _lines_lost(why: str) -> str:
    """The JSON line that says lines are missing before it."""
    stamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    event = "log lines are missing here: the log file could not be written"
    note = {"event": event, "error": why, "level": "warning", "timestamp": stamp}
    return json.dumps(note) + "\n"


class _Unfailing:
    """A log stream (stderr, a pipe) whose write and flush never raise: a terminal closed
    under a foreground daemon or a pipe whose reader left (EPIPE) raised out of every log
    call, and the request that logged failed with it."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._pending = _ThreadLines()
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        line = self._pending.add(text)
        if line is not None:
            with self._lock, contextlib.suppress(OSError, ValueError):
                self._stream.write(line)
        return len(text)

    def flush(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._stream.flush()

    def isatty(self) -> bool:
        try:
            return self._stream.isatty()
        except (OSError, ValueError):
            return False


def _follow_with_std_streams(old: os.stat_result, new_fd: int) -> None:
    """Point stdout and stderr at the new file where they wrote to the old one: `memctl start`
    hands the daemon its log as both, and a traceback or a library's warning went on into the
    moved or deleted file (whose room was then never given back)."""
    for fd in (1, 2):
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) == (old.st_dev, old.st_ino):
                os.dup2(new_fd, fd)
        except OSError:
            continue  # closed, or not ours to change


def configure(
    *, log_file: Path | None = None, level: str = "info", stream: TextIO | None = None
) -> None:
    """Terminal: coloured key=value lines; file (or non-tty stream): JSON lines."""
    out: LogFile | _Unfailing
    while _OPENED:  # a re-configuration closes the file the previous one opened
        _OPENED.pop().close()
    if log_file is not None:
        out = LogFile(log_file)  # closed on reconfigure
        _OPENED.append(out)
    else:
        out = _Unfailing(stream or sys.stderr)
    as_json = log_file is not None or not out.isatty()
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if as_json
        # Plain tracebacks: rich's and better-exceptions' (the default when installed) print
        # frame locals as well.
        else structlog.dev.ConsoleRenderer(
            colors=True, exception_formatter=structlog.dev.plain_traceback
        )
    )
    stamp = structlog.processors.TimeStamper(fmt="iso", utc=True)
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        stamp,
        redact_secrets,
    ]
    # Tracebacks without frame locals: they held credentials (a client's config) and
    # transcript text, rendered after `redact_secrets` ran, so only value shapes were caught.
    tracebacks = structlog.processors.ExceptionRenderer(
        structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
    )
    rendering: list[Any] = [tracebacks] if as_json else []
    rendering += [renderer, _scrub_rendered]
    processors += rendering
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
        ),
        logger_factory=structlog.PrintLoggerFactory(cast(TextIO, out)),
        cache_logger_on_first_use=True,
    )
    # Libraries that use stdlib logging (asyncio, the anthropic SDK, httpx) go to the same
    # place, as the same lines: rendered by the same processors and redacted the same way
    # (a plain handler wrote them unformatted, secrets and all, into the JSON log).
    handler = logging.StreamHandler(cast(TextIO, out))
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[
                structlog.stdlib.add_log_level,
                structlog.stdlib.add_logger_name,
                stamp,
                redact_secrets,
            ],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *rendering],
        )
    )
    logging.basicConfig(handlers=[handler], level=logging.WARNING, force=True)
