"""structlog set-up: readable lines on a terminal, JSON lines to a file, secrets scrubbed."""

from __future__ import annotations

import errno
import logging
import os
import re
import stat
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any, TextIO

import structlog

from memoryd.fsutil import make_private_dirs

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
_OPENED: list[TextIO] = []


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


# Appended to, never truncated or followed: a link, FIFO or device put where the log goes is
# refused (O_NONBLOCK: opening a FIFO nobody reads fails at once instead of hanging).
_LOG_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def _check_log_folder(folder: Path) -> None:
    """The socket folder's rule (`server.check_socket_folder`), for the log's folder: yours (or
    root's), and not writable by others unless sticky. Another user who made the folder (the
    /tmp/memoryd-<uid> fallback) could otherwise put a link there to a file of yours."""
    info = folder.stat()
    if info.st_uid not in (os.getuid(), 0):
        raise PermissionError(
            errno.EPERM, f"its folder {folder} belongs to uid {info.st_uid}, not to you"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not info.st_mode & stat.S_ISVTX:
        raise PermissionError(
            errno.EPERM, f"its folder {folder} is writable by other users; use a private folder"
        )


def open_log_file(path: Path) -> TextIO:
    """`path` opened to append JSON lines: created 0600, a wider one of ours made 0600.
    OSError, its strerror saying why, for a folder that is not safe to write in, or a path
    that is not a plain file of the user's (a link, FIFO, device, another user's file, a file
    with other hard links: each writes somewhere else than the log)."""
    make_private_dirs(path.parent)
    _check_log_folder(path.parent)
    try:
        fd = os.open(path, _LOG_FLAGS, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(exc.errno, f"{path} is a symbolic link; it is not followed") from exc
        if exc.errno == errno.ENXIO:  # a FIFO with no reader
            raise OSError(exc.errno, f"{path} is not a regular file") from exc
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file")
        if info.st_uid != os.getuid():
            raise PermissionError(errno.EPERM, f"{path} belongs to uid {info.st_uid}, not to you")
        if info.st_nlink > 1:
            raise PermissionError(errno.EPERM, f"{path} has {info.st_nlink} hard links")
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.fchmod(fd, 0o600)  # it holds paths, model errors and tracebacks
        os.set_blocking(fd, True)
        return open(fd, "a", encoding="utf-8", buffering=1, closefd=True)
    except BaseException:
        os.close(fd)
        raise


def configure(
    *, log_file: Path | None = None, level: str = "info", stream: TextIO | None = None
) -> None:
    """Terminal: coloured key=value lines; file (or non-tty stream): JSON lines."""
    out: TextIO
    while _OPENED:  # a re-configuration closes the file the previous one opened
        _OPENED.pop().close()
    if log_file is not None:
        out = open_log_file(log_file)  # closed on reconfigure
        _OPENED.append(out)
    else:
        out = stream or sys.stderr
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
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=True,
    )
    # Libraries that use stdlib logging (asyncio, the anthropic SDK, httpx) go to the same
    # place, as the same lines: rendered by the same processors and redacted the same way
    # (a plain handler wrote them unformatted, secrets and all, into the JSON log).
    handler = logging.StreamHandler(out)
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
