"""Glob matching for `paths:` rules and `claudeMdExcludes`, with wcmatch.

`**` spans folders and `{a,b}` expands. A pattern without a `/` matches a file name at
any depth (`*.ts` is `**/*.ts`), as in .gitignore, which is how rule authors write them.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from wcmatch import glob

_FLAGS = glob.GLOBSTAR | glob.BRACE | glob.DOTGLOB
# Brace expansion is bounded so `{a,b}{c,d}…` in a hostile rule cannot blow up.
_EXPANSION_LIMIT = 1000


class GlobError(ValueError):
    pass


def _normalize(pattern: str) -> str:
    pattern = pattern.strip()
    while pattern.startswith("./"):
        pattern = pattern[2:]
    if pattern.endswith("/"):
        pattern += "**"
    if pattern.startswith("/"):
        return pattern[1:]  # anchored at the base folder
    if "/" not in pattern:
        return "**/" + pattern
    return pattern


@lru_cache(maxsize=1024)
def _compile_relative(patterns: tuple[str, ...]) -> Any:
    normalized = [_normalize(p) for p in patterns if p.strip()]
    try:
        return glob.compile(normalized, flags=_FLAGS, limit=_EXPANSION_LIMIT)
    except Exception as exc:  # wcmatch raises several types for bad or explosive patterns
        raise GlobError(f"invalid glob in {list(patterns)}: {exc}") from None


def check_patterns(patterns: tuple[str, ...]) -> None:
    """Raise GlobError now for patterns that cannot be compiled."""
    _compile_relative(patterns)


def matches_any(patterns: tuple[str, ...], base: Path, touched: Sequence[str]) -> bool:
    """True when a touched path lies under `base` and matches a pattern relative to it.

    `touched` is sorted absolute path strings, so the paths under `base` are one slice
    of it (found by bisection) however many paths the session has touched.
    """
    matcher = _compile_relative(patterns)
    prefix = base.as_posix().rstrip("/") + "/"
    for path in touched[bisect_left(touched, prefix) :]:
        if not path.startswith(prefix):
            break
        relative = path[len(prefix) :]
        if relative and matcher.match(relative):
            return True
    return False


@lru_cache(maxsize=1024)
def _compile_exclude(pattern: str) -> Any:
    try:
        return glob.compile(pattern, flags=_FLAGS, limit=_EXPANSION_LIMIT)
    except Exception as exc:
        raise GlobError(f"invalid claudeMdExcludes pattern {pattern!r}: {exc}") from None


def invalid_excludes(patterns: tuple[str, ...]) -> list[str]:
    """A message for every exclude pattern that cannot be compiled (those are ignored)."""
    problems: list[str] = []
    for pattern in patterns:
        try:
            _compile_exclude(pattern)
        except GlobError as exc:
            problems.append(str(exc))
    return problems


def excluded_by(patterns: tuple[str, ...], candidates: tuple[Path, ...]) -> str | None:
    """The first exclude pattern matching a form of the path (as found, or resolved)."""
    for pattern in patterns:
        if not pattern.strip():
            continue
        try:
            matcher = _compile_exclude(pattern)
        except GlobError:
            continue  # reported once through invalid_excludes
        for candidate in candidates:
            text = candidate.as_posix()
            if matcher.match(text) or matcher.match(text.lstrip("/")):
                return pattern
    return None
