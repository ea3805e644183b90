"""Numbers the daemon reads from its environment, checked: a mistyped value is a one-line
refusal at start-up (`memoryd: MEMORYD_MODEL_RETRIES='three' is not a whole number`), not a
traceback, and a service manager restarting it sees the same line each time."""

from __future__ import annotations

import math
import os


class EnvNumberError(ValueError):
    """An environment variable that should hold a number does not; the message names it."""


# A number is never longer; a longer value (a key pasted into the wrong variable) is not
# quoted in the start-up error, which goes to the journal and the log.
_MAX_QUOTED = 24


def _named(name: str, raw: str) -> str:
    if len(raw) <= _MAX_QUOTED:
        return f"{name}={raw!r}"
    return f"{name} (a value of {len(raw):,} characters, not shown)"


def env_seconds(name: str, default: float, *, most: float, positive: bool = False) -> float:
    """A finite number of seconds from `name`, else `default`; at least 0 (above 0 when
    `positive`), at most `most`: 1e300 was taken, and a team debounce that long never pushed."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise EnvNumberError(f"{_named(name, raw)} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        least = "above 0" if positive else "0 or more"
        raise EnvNumberError(f"{_named(name, raw)} must be a finite number of seconds, {least}")
    if value > most:
        raise EnvNumberError(f"{_named(name, raw)} must be at most {most:g} seconds")
    return value


def env_count(name: str, default: int, *, most: int) -> int:
    """A whole number from `name`, else `default`; 0 to `most` (MEMORYD_MODEL_RETRIES of
    99999999999 retried a rate limit without end, until the backoff's 2**attempt overflowed)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise EnvNumberError(f"{_named(name, raw)} is not a whole number") from None
    if value < 0:
        raise EnvNumberError(f"{_named(name, raw)} must be 0 or more")
    if value > most:
        raise EnvNumberError(f"{_named(name, raw)} must be at most {most:,}")
    return value
