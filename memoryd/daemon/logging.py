"""structlog set-up: readable lines on a terminal, JSON lines to a file, secrets scrubbed."""

from __future__ import annotations

import errno
import logging
import re
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any, TextIO

import structlog

from memoryd.fsutil import make_private_dirs
from memoryd_client.private_files import folder_problem, open_private_log

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


def open_log_file(path: Path) -> TextIO:
    """`path` opened to append JSON lines (`private_files.open_private_log`: 0600, a plain file
    of the user's). OSError, its strerror saying why, for a folder that is not safe to write in
    (the socket folder's rule) or a path that is not such a file."""
    make_private_dirs(path.parent)
    problem = folder_problem(path.parent)
    if problem is not None:
        raise PermissionError(errno.EPERM, f"{problem}; use a folder of your own")
    return open(open_private_log(path), "a", encoding="utf-8", buffering=1, closefd=True)


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
