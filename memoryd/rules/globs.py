"""Glob matching for `paths:` rules and `claudeMdExcludes`, with wcmatch.

`**` spans folders and `{a,b}` expands. A pattern without a `/` matches a file name at
any depth (`*.ts` is `**/*.ts`), as in .gitignore, which is how rule authors write them.

A `paths:` pattern that matches a folder matches everything below it, as in .gitignore (and
Claude Code, which matches them with the `ignore` package): `src/api` is `src/api/**`.

wcmatch compiles a pattern and matches one folder name at a time; the folders themselves are
matched here, one path part after another against the set of pattern positions still open.
wcmatch's whole-path regex backtracks exponentially: a repository's `**/a/**/a/…/zz` against
a path with many `a/` parts held the GIL, and with it the whole daemon, for minutes.
"""

from __future__ import annotations

import unicodedata
from bisect import bisect_left
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import bracex
from wcmatch import glob

_FLAGS = glob.GLOBSTAR | glob.BRACE | glob.DOTGLOB
# Brace expansion is bounded so `{a,b}{c,d}…` in a hostile rule cannot blow up.
_EXPANSION_LIMIT = 1000
# `**` parts per pattern: real ones have two or three; each adds a state to every path part.
MAX_GLOBSTARS = 8


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


_GLOBSTAR = "**"
# One pattern part: "**", or a matcher of one folder or file name.
_Part = Callable[[str], bool] | str


def _split(text: str) -> list[str]:
    """Path parts; a leading "" marks an absolute path, a trailing "" a trailing slash."""
    parts = text.split("/")
    return [p for i, p in enumerate(parts) if p or i in (0, len(parts) - 1)]


@lru_cache(maxsize=4096)
def _name_matcher(part: str) -> Callable[[str], bool]:
    matcher = glob.compile(part, flags=glob.DOTGLOB)
    return lambda name: bool(name) and bool(matcher.match(name))


def _nfc(text: str) -> str:
    """Names compared in one Unicode form: a rule written with a decomposed `é` (pasted from
    macOS's Finder) never matched the composed one a path holds, nor the other way round."""
    return text if text.isascii() else unicodedata.normalize("NFC", text)


class _Matcher:
    """Matches a path against patterns in time linear in (path parts x pattern parts).

    With `folders`, as in .gitignore, a pattern that matches a folder on the path matches
    everything below it (`src/api`, `packages/*`, `migrations`).
    """

    def __init__(self, patterns: list[str], *, folders: bool = False) -> None:
        self.folders = folders
        self.compiled: list[list[_Part]] = []
        for pattern in patterns:
            # Escapes kept for the per-name matcher: `\[id\]` is the folder `[id]`.
            for expanded in bracex.expand(pattern, keep_escapes=True, limit=_EXPANSION_LIMIT):
                parts: list[_Part] = []
                for part in _split(expanded):
                    if part == _GLOBSTAR:
                        if parts and parts[-1] == _GLOBSTAR:
                            continue  # `**/**` is `**`
                        parts.append(_GLOBSTAR)
                    elif part == "":
                        parts.append("")
                    else:
                        parts.append(_name_matcher(_nfc(part)))
                if parts.count(_GLOBSTAR) > MAX_GLOBSTARS:
                    raise GlobError(f"more than {MAX_GLOBSTARS} `**` in {pattern!r}")
                self.compiled.append(parts)

    def match(self, path: str) -> bool:
        names = _split(_nfc(path))
        if len(names) > 1 and names[-1] == "":
            names.pop()  # `a/` is `a`
        return any(_match_parts(parts, names, self.folders) for parts in self.compiled)


def _match_parts(parts: list[_Part], names: list[str], folders: bool = False) -> bool:
    """An NFA walk: the pattern positions still open after each name, never backtracking.
    With `folders`, a match of the names so far (a folder of the path) is a match."""
    count = len(parts)

    def close(positions: set[int]) -> set[int]:
        closed = set(positions)
        for position in sorted(positions):
            # `**` may match no folder at all; a trailing one (`docs/**`) at least one name.
            while position < count - 1 and parts[position] == _GLOBSTAR:
                position += 1
                closed.add(position)
        return closed

    states = close({0})
    for name in names:
        after: set[int] = set()
        for position in states:
            if position >= count:
                continue
            part = parts[position]
            if part == _GLOBSTAR:
                if name in (".", ".."):
                    continue  # as wcmatch: `**` never stands for `.` or `..`
                after.add(position)  # and one more folder
                if position == count - 1:
                    after.add(count)
            elif isinstance(part, str):  # "": the root of an absolute path
                if name == "":
                    after.add(position + 1)
            elif part(name):
                after.add(position + 1)
        if not after:
            return False
        states = close(after)
        if folders and count in states:
            return True
    return count in states


@lru_cache(maxsize=1024)
def _compile_relative(patterns: tuple[str, ...]) -> Any:
    normalized = [_normalize(p) for p in patterns if p.strip()]
    try:
        # Compiled by wcmatch too, which refuses what it cannot read, as it always has.
        glob.compile(normalized, flags=_FLAGS, limit=_EXPANSION_LIMIT)
        return _Matcher(normalized, folders=True)
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
        glob.compile(pattern, flags=_FLAGS, limit=_EXPANSION_LIMIT)
        return _Matcher([pattern])
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
