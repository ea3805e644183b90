"""Glob matching for `paths:` rules and `claudeMdExcludes`, with wcmatch.

`**` spans folders and `{a,b}` expands. A pattern without a `/` matches a file name at
any depth (`*.ts` is `**/*.ts`), as in .gitignore, which is how rule authors write them.

A `paths:` pattern that matches a folder matches everything below it, as in .gitignore (and
Claude Code, which matches them with the `ignore` package): `src/api` is `src/api/**`; and
one opening with `!` takes back what the patterns before it matched.

wcmatch compiles a pattern and matches one folder name at a time; the folders themselves are
matched here, one path part after another against the set of pattern positions still open.
wcmatch's whole-path regex backtracks exponentially: a repository's `**/a/**/a/…/zz` against
a path with many `a/` parts held the GIL, and with it the whole daemon, for minutes.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import bracex
from wcmatch import glob

_FLAGS = glob.GLOBSTAR | glob.BRACE | glob.DOTGLOB
# Brace expansion is bounded so `{a,b}{c,d}…` in a hostile rule cannot blow up.
_EXPANSION_LIMIT = 1000
# `**` parts per pattern: real ones have two or three; each adds a state to every path part.
MAX_GLOBSTARS = 8


class GlobError(ValueError):
    pass


def _normalize(pattern: str) -> str | None:
    """A `paths:` pattern as .gitignore reads it, made relative to the base: a leading `/`
    or one inside anchors it there, else it matches at any depth (`*.py`, `tests/`); a
    trailing `/` (kept) names folders only; a leading `!` negates it. None for a pattern
    that names nothing: a bare `!` (or `!/`), which `ignore` drops; read as `!**` it took
    back every match before it, and the rule never loaded. A bare `/` names nothing to
    `ignore` either (it was `**`, and the rule loaded for any path)."""
    pattern = pattern.strip()
    if pattern.startswith("!"):
        # What follows as written, as `ignore` reads it: `! a.ts` takes back ` a.ts` (it was
        # stripped, and took back `a.ts`).
        negated = pattern[1:]
        return "!" + _anchored(negated) if negated.strip("/") else None
    return _anchored(pattern) if pattern.strip("/") else None


def _anchored(pattern: str) -> str:
    """`pattern` relative to the base. A leading `./` is two names, `.` and what follows,
    so the pattern matches nothing (no path `ignore` is given holds a `.` folder): it was
    cut, and `./A` matched `a`, a rule Claude Code never loads."""
    body = pattern.rstrip("/")
    trail = "/" if body != pattern else ""
    if body.startswith("/"):
        return body[1:] + trail
    if "/" not in body:
        return "**/" + body + trail
    return body + trail


_GLOBSTAR = "**"
# One pattern part: "**", "" (the root of an absolute path), or a regex of one folder or file
# name (never one matching "": it is `fullmatch`ed, so a path's names are tried all at once).
_Part = re.Pattern[str] | str


class _Compiled(NamedTuple):
    parts: tuple[_Part, ...]
    negated: bool  # `!src/gen/**`: takes back what the patterns before it matched
    folders_only: bool  # `tests/`: matches a folder (so everything below it), never a file


# Where a path's walk stands: the pattern positions still open, one set per compiled pattern;
# or, decided, True (a folder on the way matched: so does everything below it) or False (no
# pattern can match anything below).
_State = tuple[frozenset[int], ...] | bool


def _split(text: str) -> list[str]:
    """Path parts; a leading "" marks an absolute path, a trailing "" a trailing slash."""
    return _kept(text.split("/"))


def _kept(parts: list[str]) -> list[str]:
    """`parts` without the empty ones a doubled `/` makes (`a//b` is `a/b`)."""
    return [p for i, p in enumerate(parts) if p or i in (0, len(parts) - 1)]


@lru_cache(maxsize=4096)
def _name_matcher(part: str, ignorecase: bool = False) -> re.Pattern[str]:
    # wcmatch's own regexes for the name, as one: wcmatch's `match()` costs a few times more
    # per call, and a load judges every touched path against every rule.
    # In UTF-16 units, as JavaScript's regexes read names (`ignore`'s, picomatch's): `?`
    # is one unit, an emoji two.
    part = _code_units(part)
    if ignorecase:  # a `paths:` name, its classes read as `ignore` reads them
        read = _git_classes(part)
        if read is None:
            return _NEVER
        part = read
    include, exclude = glob.translate(
        [part] if ignorecase else _picomatch_names(part), flags=glob.DOTGLOB
    )
    wanted = "|".join(f"(?:{regex})" for regex in include)
    unwanted = "".join(f"(?!{regex})" for regex in exclude)
    regex = _moved_regex(f"(?=.){unwanted}(?:{wanted})", fold=ignorecase)
    if not ignorecase:
        return re.compile(regex, re.DOTALL)
    # Names are folded as `_moved` folds them, ASCII letters by the regex.
    return re.compile(regex, re.DOTALL | re.ASCII | re.IGNORECASE)


# git's (and `ignore`'s) POSIX classes, `[[:alpha:]]`; wcmatch reads the same names.
_POSIX_CLASSES = frozenset(
    {
        *("alnum", "alpha", "blank", "cntrl", "digit", "graph"),
        *("lower", "print", "punct", "space", "upper", "xdigit"),
    }
)
# Written escaped in a rewritten class, so none opens, closes, negates or spans a range.
_CLASS_SPECIALS = frozenset("\\]^-[!")


# A class picomatch also reads as the text it is, one holding none of the characters its
# regex escapes: `[id]` is `i`, `d` or the name `[id]` (a Next.js route's folder). Past four
# such classes in a name, each is read both ways together (2 variants, not 2^n).
_PICOMATCH_PLAIN_CLASS = re.compile(r"(?<!\\)((?:\\\\)*)(\[[^\]\\\-*+?.^${}(|)\[]+\])")
_PLAIN_CLASSES_MAX = 4


def _picomatch_names(part: str) -> list[str]:
    """The name patterns a `claudeMdExcludes` name stands for, as picomatch reads it: `[!a]`
    holds `!` and `a` (wcmatch negated it), and a plain class is also its text (`[id]` matched
    `i` or `d`, never the folder `[id]`)."""
    pieces = _PICOMATCH_PLAIN_CLASS.split(part)  # text, escapes, class, …, text
    texts = [pieces[i] + pieces[i + 1] for i in range(0, len(pieces) - 1, 3)]
    classes = pieces[2::3]
    choices: Iterable[tuple[bool, ...]] = (
        itertools.product((False, True), repeat=len(classes))
        if len(classes) <= _PLAIN_CLASSES_MAX
        else ((False,) * len(classes), (True,) * len(classes))
    )
    names = [
        "".join(
            text + (f"\\{cls[:-1]}\\]" if literal else cls)
            for text, cls, literal in zip(texts, classes, choice, strict=True)
        )
        + pieces[-1]
        for choice in choices
    ]
    return [_PICOMATCH_BANG.sub(r"\1[\\!", name) for name in names]


# A class opening with `!` (not escaped): picomatch negates only `[^a]`, unless told `posix`,
# which Claude Code does not; wcmatch negated `[!a]` too, so it excluded what it leaves in.
_PICOMATCH_BANG = re.compile(r"(?<!\\)((?:\\\\)*)\[!")

# A name no pattern part can match.
_NEVER = re.compile("(?!)")


def _git_classes(part: str) -> str | None:
    """`part` (in UTF-16 units) with each bracket expression rewritten as git's wildmatch
    (and so `ignore`, which Claude Code matches `paths:` with) reads it: a range out of
    order keeps its lower end alone (`[c-a]` is `[c]`; wcmatch dropped the range, so `[c-a]`
    matched nothing and `[!c-a]` anything). The members are written escaped, so a `-` after
    such a range stays one (`[c-a-z]` is c, `-` and z). None when git gives up on the
    pattern, which then matches nothing: a `[` never closed, an unknown `[:name:]` (wcmatch
    read them as written)."""
    out: list[str] = []
    index, end = 0, len(part)
    while index < end:
        char = part[index]
        if char == "\\":
            out.append(part[index : index + 2])
            index += 2
        elif char == "[":
            scanned = _git_class(part, index)
            if scanned is None:
                return None
            text, index = scanned
            out.append(text)
        else:
            out.append(char)
            index += 1
    return "".join(out)


def _class_char(char: str) -> str:
    return "\\" + char if char in _CLASS_SPECIALS else char


# A name holds neither: a class's `/` member (git reads `x[a/b]y` as one name) is left out,
# since wcmatch ends a class at a `/`; and a class left with no member holds this one alone.
_SLASH, _NO_NAME_CHAR = "/", "\x00"


def _class_text(negated: bool, members: list[tuple[str, str] | str]) -> str:
    """A class's members (ranges `(low, high)`, or `[:name:]` text) written for wcmatch,
    escaped, without the `/` no name holds."""
    out: list[str] = []
    for member in members:
        if isinstance(member, str):
            out.append(member)
            continue
        low, high = member
        pieces = [(low, high)] if not low <= _SLASH <= high else [(low, "."), ("0", high)]
        out.extend(
            _class_char(first) if first == last else f"{_class_char(first)}-{_class_char(last)}"
            for first, last in pieces
            if first <= last
        )
    return "[" + ("!" if negated else "") + ("".join(out) or _NO_NAME_CHAR) + "]"


def _git_class(part: str, start: int) -> tuple[str, int] | None:
    """The bracket expression opening at `part[start]`, read as wildmatch.c's member loop
    reads it (the first member taken whatever it is, so `[]a]` holds `]`), rewritten; and
    the index after it. None when git gives up on the whole pattern."""
    index, end = start + 1, len(part)
    negated = index < end and part[index] in "!^"
    index += negated
    members: list[tuple[str, str] | str] = []
    previous = ""  # the member a `-` would open a range from: none after a range
    while index < end:
        char = part[index]
        if char == "\\" and index + 1 < end:
            index += 1
            previous = part[index]
            members.append((previous, previous))
        elif char == "-" and previous and index + 1 < end and part[index + 1] != "]":
            index += 1
            if part[index] == "\\" and index + 1 < end:
                index += 1
            if previous <= part[index]:
                members[-1] = (previous, part[index])
            previous = ""
        elif char == "[" and part.startswith(":", index + 1):
            close = part.find("]", index + 2)
            if close < 0:
                return None
            if close > index + 2 and part[close - 1] == ":":
                if part[index + 2 : close - 1] not in _POSIX_CLASSES:
                    return None
                members.append(part[index : close + 1])
                previous = ""
                index = close
            else:  # no `:]`: the `[` is a member, and the `:` after it the next
                previous = "["
                members.append((previous, previous))
        else:
            previous = char
            members.append((char, char))
        index += 1
        if index < end and part[index] == "]":
            return _class_text(negated, members), index + 1
    return None


def _git_split(pattern: str) -> list[str]:
    """`_split` of a `paths:` pattern as git reads it: a `/` inside a bracket expression is
    one of its members, not a folder's end (`x[a/b]y` is one name, matching `xay`, as
    `ignore` reads it; it was the names `x[a` and `b]y`, and matched nothing)."""
    parts: list[str] = []
    start = index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "[":
            scanned = _git_class(pattern, index)
            if scanned is None:
                # git gives up on the pattern, and so does the name holding this `[`: split
                # the rest as it is, never scanning it again from each `[` (`[[[…`).
                return _kept([*parts, *pattern[start:].split("/")])
            index = scanned[1]
            continue
        if char == "/":
            parts.append(pattern[start:index])
            start = index + 1
        index += 2 if char == "\\" else 1
    return _kept([*parts, pattern[start:]])


# What NFC would turn from a non-ASCII character into an ASCII one (the Kelvin sign into `K`,
# U+1FEF into a backtick, the Greek question mark into `;`): kept as written, as `ignore`
# keeps them, so the Kelvin sign never matches `k` (tests check the set is complete).
_NFC_TO_ASCII = re.compile("([\u037e\u1fef\u212a])")


def _nfc(text: str) -> str:
    """Names compared in one Unicode form: a rule written with a decomposed `é` (pasted from
    macOS's Finder) never matched the composed one a path holds, nor the other way round."""
    if text.isascii():
        return text
    if not _NFC_TO_ASCII.search(text):
        return unicodedata.normalize("NFC", text)
    pieces = _NFC_TO_ASCII.split(text)  # the kept characters at the odd indexes
    pieces[::2] = (unicodedata.normalize("NFC", piece) for piece in pieces[::2])
    return "".join(pieces)


# `paths:` names are matched whatever their case as `ignore` matches them: a JavaScript
# regex with the `i` flag and without `u`. It reads a string by UTF-16 code units (`?` is
# not an emoji, a surrogate pair is two characters in a class) and two of them match when
# their `toUpperCase`, if one unit, is the same, a non-ASCII one never mapped to ASCII
# (`ſ` is no `s`, `ı` no `i`; `ß`, upper-cased to `SS`, is no `ẞ`). Python's IGNORECASE
# folds all of those together: rules loaded for names Claude Code leaves out.
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _code_units(text: str) -> str:
    """`text` with each astral character as its UTF-16 surrogate pair."""

    def pair(match: re.Match[str]) -> str:
        offset = ord(match.group()) - 0x10000
        return chr(0xD800 + (offset >> 10)) + chr(0xDC00 + (offset & 0x3FF))

    return _ASTRAL.sub(pair, text)


@lru_cache(maxsize=1)
def _fold_table() -> dict[int, int]:
    """Each non-ASCII code unit JavaScript's non-`u` case folding changes -> what it becomes
    (its upper case), for `str.translate`. ASCII is left to the regex's ASCII IGNORECASE,
    which is JavaScript's rule there. No unit becomes one that changes again (tests check),
    so a folded name holds only units the table leaves alone."""
    table: dict[int, int] = {}
    for unit in range(0x80, 0x10000):
        upper = chr(unit).upper()
        if len(upper) == 1 and ord(upper) >= 0x80 and ord(upper) != unit:
            table[unit] = ord(upper)
    return table


@lru_cache(maxsize=1)
def _folded_units() -> list[int]:
    return sorted(_fold_table())


# Folded names and their regexes hold each non-ASCII unit moved up to plane 15 (private use:
# no case, no other meaning), so `re` keeps a class's non-ASCII members as ranges: in the
# BMP it builds a class unit by unit, in Python (~8 ms for `[\u0100-\uffff]`), and a rule
# of 240 such classes held a load ~2.5 s.
_SHIFT = 0xF0000


@lru_cache(maxsize=2)
def _shift_table(fold: bool) -> str:
    """For `str.translate`, indexed by unit: ASCII as it is, each other unit (or its folded
    unit) moved up by _SHIFT. A string (256 KiB): a dict of the 65,408 took 7 MB and 0.5 s."""
    units = [*map(chr, range(0x80)), *map(chr, range(0x80 + _SHIFT, 0x10000 + _SHIFT))]
    for unit, folded in _fold_table().items() if fold else ():
        units[unit] = chr(folded + _SHIFT)
    return "".join(units)


def _moved(text: str, *, fold: bool) -> str:
    """A name (or path) as the matchers read it: in units, moved, folded for `paths:`."""
    return text if text.isascii() else _code_units(text).translate(_shift_table(fold))


def _unit(unit: int) -> str:
    """A unit of a moved name (folded or not), as regex text."""
    return f"\\u{unit:04x}" if unit < 0x80 else f"\\U{unit + _SHIFT:08x}"


@lru_cache(maxsize=1024)
def _class_range(low: int, high: int, fold: bool) -> str:
    """A class's range `low-high` (or member, `low` = `high`) as class text matching the
    moved names one of its members is in: the range itself, and, when `fold`, what each
    member the folding changes becomes (`à-ÿ` holds `ÿ`, whose upper case `Ÿ` is U+0178). A
    folded name holds no member the folding changes, so none is taken out. Split where
    ASCII ends: the units above are moved."""
    folds: set[int] = set()
    if fold:  # excludes never build the fold table
        table, changed = _fold_table(), _folded_units()
        folds = {
            table[unit] for unit in changed[bisect_left(changed, low) : bisect_right(changed, high)]
        }
    spans = [(low, min(high, 0x7F)), (max(low, 0x80), high)]
    own = "".join(
        _unit(first) if first == last else f"{_unit(first)}-{_unit(last)}"
        for first, last in spans
        if first <= last
    )
    return own + "".join(_unit(unit) for unit in sorted(folds) if not low <= unit <= high)


def _moved_regex(regex: str, *, fold: bool) -> str:
    """wcmatch's regex of a name (in units), rewritten to match the names `_moved` makes:
    each non-ASCII literal moved (and folded), each class holding its members moved (and
    the folded members of its own)."""
    table = _shift_table(fold)
    out: list[str] = []
    index, end = 0, len(regex)
    while index < end:
        char = regex[index]
        if char == "\\":
            escaped = regex[index + 1]
            out.append("\\" + escaped.translate(table))
            index += 2
        elif char == "[":
            index = _moved_class(regex, index, out, fold)
        else:
            out.append(char.translate(table))
            index += 1
    return "".join(out)


def _moved_class(regex: str, index: int, out: list[str], fold: bool) -> int:
    """Append the class opening at `regex[index]` with its members moved (and, when `fold`,
    their folds added); the index after it."""
    index += 1
    out.append("[")
    if regex[index] == "^":
        out.append("^")
        index += 1
    first = True
    while first or regex[index] != "]":  # a `]` first is a member, as Python reads it
        first = False
        if regex[index] == "\\" and regex[index + 1].isalnum():
            out.append(regex[index : index + 2])  # `\s`, `\S`: wcmatch's "anything"
            index += 2
            continue
        low, index = _class_member(regex, index)
        high = low
        if regex[index] == "-" and regex[index + 1] != "]":
            high, index = _class_member(regex, index + 1)
        # `_git_classes` wrote no range out of order, and wcmatch drops one
        out.append(_class_range(ord(low), max(ord(low), ord(high)), fold))
    out.append("]")
    return index + 1


def _class_member(regex: str, index: int) -> tuple[str, int]:
    if regex[index] == "\\":
        return regex[index + 1], index + 2
    return regex[index], index + 1


class _Matcher:
    """Matches a path against patterns in time linear in (path parts x pattern parts).

    With `folders`, patterns are read as .gitignore reads them (and Claude Code, through the
    `ignore` package): a pattern that matches a folder on the path matches everything below
    it (`src/api`, `packages/*`, `migrations`), and one opening with `!` takes back what the
    patterns before it matched (`["src/**/*.ts", "!**/*.test.ts"]`), the last that matches a
    path deciding, except below a folder already matched (as git cannot re-include there);
    and names match whatever their case, as `ignore` matches them by default (`SRC/*.ts`
    matches `src/a.ts`: on macOS's file system the two name one file).
    """

    def __init__(self, patterns: list[str], *, folders: bool = False) -> None:
        self.folders = folders
        self.compiled: list[_Compiled] = []
        for written in patterns:
            negated = folders and written.startswith("!")
            pattern = written[1:] if negated else written
            # Escapes kept for the per-name matcher: `\[id\]` is the folder `[id]`.
            for expanded in bracex.expand(pattern, keep_escapes=True, limit=_EXPANSION_LIMIT):
                parts: list[_Part] = []
                names = _git_split(expanded) if folders else _split(expanded)
                folders_only = folders and len(names) > 1 and names[-1] == ""
                for part in names[:-1] if folders_only else names:
                    # git (and `ignore`) read a whole part of two or more `*` as `**`
                    if part == _GLOBSTAR or (folders and len(part) > 2 and not part.strip("*")):
                        if parts and parts[-1] == _GLOBSTAR:
                            continue  # `**/**` is `**`
                        parts.append(_GLOBSTAR)
                    elif part == "":
                        parts.append("")
                    else:
                        parts.append(_name_matcher(_nfc(part), folders))
                if parts.count(_GLOBSTAR) > MAX_GLOBSTARS:
                    raise GlobError(f"more than {MAX_GLOBSTARS} `**` in {written!r}")
                self.compiled.append(_Compiled(tuple(parts), negated, folders_only))
        self.start: _State = tuple(_close(c.parts, {0}) for c in self.compiled)

    def match(self, path: str) -> bool:
        path = _nfc(path)
        names = _split(_moved(path, fold=self.folders))
        if len(names) > 1 and names[-1] == "":
            names.pop()  # `a/` is `a`
        state = self.start
        for index, name in enumerate(names):
            state = self.advance(state, name, folder=index < len(names) - 1)
        return self.verdict(state, folder=False)

    def advance(self, state: _State, name: str, *, folder: bool) -> _State:
        """The state after one more name, a folder's or (not `folder`) the path's last."""
        if isinstance(state, bool):
            return state
        after = tuple(
            _step(c.parts, positions, name)
            for c, positions in zip(self.compiled, state, strict=True)
        )
        # Where only negations stay open (`!**/*.test.ts` is open everywhere), nothing below
        # can match: they only take back.
        if not any(p for c, p in zip(self.compiled, after, strict=True) if not c.negated):
            return False
        if folder and self.folders and self.verdict(after, folder=True):
            return True
        return after

    def verdict(self, state: _State, *, folder: bool) -> bool:
        """Whether the names so far (a folder's, or not) match: the last pattern matching
        them says so."""
        if isinstance(state, bool):
            return state
        for c, positions in zip(reversed(self.compiled), reversed(state), strict=True):
            if len(c.parts) in positions and (folder or not c.folders_only):
                return not c.negated
        return False

    def matches_in(self, groups: Iterable[tuple[str, list[str]]]) -> bool:
        """Whether a path of `groups` matches: each group a folder (relative, "" the base)
        and the names of the paths in it. The state after a folder is kept for the folders
        below it, and a folder's names are tried only by what can end a match there: a
        session's 20,000 touched files lie in a few hundred folders."""
        states: dict[str, _State] = {"": self.start}
        for folder, names in groups:
            state = self._folder(folder, states)
            if isinstance(state, bool):
                if state:
                    return True
                continue
            if self._finisher(state)(names):
                return True
        return False

    def _finisher(self, state: tuple[frozenset[int], ...]) -> Callable[[list[str]], bool]:
        """Whether one of a folder's names, stepped from `state` (the folder's), matches: only
        the pattern parts that can end a match from there are tried."""
        enders: list[tuple[list[re.Pattern[str]], bool]] = []  # the last pattern first
        for c, positions in zip(reversed(self.compiled), reversed(state), strict=True):
            if c.folders_only:
                continue  # a file's name is no folder
            ends = [_ender(c.parts, position) for position in sorted(positions)]
            tests = [end for end in ends if end is not None]
            if tests:
                enders.append((tests, c.negated))
        if not any(negated for _, negated in enders):
            tests = [test for tests, _ in enders for test in tests]
            return lambda names: any(any(map(test.fullmatch, names)) for test in tests)

        def verdict(name: str) -> bool:
            for tests, negated in enders:
                if any(test.fullmatch(name) for test in tests):
                    return not negated
            return False

        return lambda names: any(map(verdict, names))

    def _folder(self, folder: str, states: dict[str, _State]) -> _State:
        """The state after `folder`'s names, from the nearest folder above it in `states`."""
        below: list[str] = []
        while folder not in states:
            below.append(folder)
            folder = folder.rpartition("/")[0]
        state = states[folder]
        for path in reversed(below):
            name = path.rpartition("/")[2]
            if name:  # `a//b` is `a/b`, as `_split` reads it
                state = self.advance(state, name, folder=True)
            states[path] = state
        return state


# A last name `**` stands for: any but `.` and `..`, as wcmatch reads it.
_ANY_NAME = re.compile(r"(?!\.\.?\Z).+", re.DOTALL)


def _ender(parts: tuple[_Part, ...], position: int) -> re.Pattern[str] | None:
    """The regex of a last name that completes a match from `position`, if one can."""
    count = len(parts)
    if position >= count:
        return None
    part = parts[position]
    if part == _GLOBSTAR:
        return _ANY_NAME if position == count - 1 else None
    if isinstance(part, str):  # "": only the root of an absolute path
        return None
    return part if count in _close(parts, {position + 1}) else None


def _close(parts: tuple[_Part, ...], positions: set[int]) -> frozenset[int]:
    """`positions` and those reached past `**`s, which may match no folder at all (a trailing
    one, `docs/**`, at least one name)."""
    count = len(parts)
    closed = set(positions)
    for position in positions:
        while position < count - 1 and parts[position] == _GLOBSTAR:
            position += 1
            closed.add(position)
    return frozenset(closed)


def _step(parts: tuple[_Part, ...], positions: frozenset[int], name: str) -> frozenset[int]:
    """An NFA step: the pattern positions open after `name`, never backtracking."""
    count = len(parts)
    after: set[int] = set()
    for position in positions:
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
        elif part.fullmatch(name):
            after.add(position + 1)
    return _close(parts, after) if after else frozenset()


_LONE_ESCAPE = re.compile(r"(?:[^\\]|^)\\\Z")


@lru_cache(maxsize=1024)
def _compile_relative(patterns: tuple[str, ...]) -> _Matcher:
    # `ignore` drops what a .gitignore cannot hold: a comment (`#x`; `\#x` is the name `#x`)
    # and a pattern ending in one `\` escaping nothing. Both matched before session 23.
    written = (p for p in patterns if not p.strip().startswith("#") and not _LONE_ESCAPE.search(p))
    normalized = [n for n in map(_normalize, written) if n is not None]
    try:
        # Read by wcmatch too, which refuses what it cannot parse, as it always has; not
        # compiled: its whole-path regex is never used, and compiling it doubled the cost of
        # a rule of wide classes (240 `[\u00a0-\uffff]` took ~2.5 s), or failed on a class
        # git reads (`[^\c-[:alpha:]]`, where wcmatch wrote a bad escape).
        glob.translate(normalized, flags=_FLAGS, limit=_EXPANSION_LIMIT)
        return _Matcher(normalized, folders=True)
    except Exception as exc:  # wcmatch raises several types for bad or explosive patterns
        raise GlobError(f"invalid glob in {list(patterns)}: {exc}") from None


def check_patterns(patterns: tuple[str, ...]) -> None:
    """Raise GlobError now for patterns that cannot be compiled."""
    _compile_relative(patterns)


class TouchedPaths:
    """Touched paths (sorted absolute path strings), grouped by folder under a base on first
    use: a load judges each `paths:` rule of a base against the same paths."""

    __slots__ = ("_groups", "paths")

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = paths
        self._groups: dict[str, list[tuple[str, list[str]]]] = {}

    def under(self, prefix: str) -> list[tuple[str, list[str]]]:
        groups = self._groups.get(prefix)
        if groups is None:
            groups = self._groups[prefix] = _grouped(self.paths, prefix)
        return groups


def _grouped(paths: Sequence[str], prefix: str) -> list[tuple[str, list[str]]]:
    """The paths under `prefix` (one slice of the sorted paths, found by bisection), as
    (folder relative to it, names in it)."""
    folders: dict[str, list[str]] = {}
    for path in paths[bisect_left(paths, prefix) :]:
        if not path.startswith(prefix):
            break
        folder, _, name = _moved(_nfc(path[len(prefix) :]), fold=True).rpartition("/")
        if name:
            folders.setdefault(folder, []).append(name)
    return list(folders.items())


def matches_any(
    patterns: tuple[str, ...], base: Path, touched: Sequence[str] | TouchedPaths
) -> bool:
    """True when a touched path lies under `base` and matches a pattern relative to it.

    `touched` is sorted absolute path strings (or a TouchedPaths of them, grouped once for
    every rule of a load), so the paths under `base` are one slice of it however many paths
    the session has touched.
    """
    matcher = _compile_relative(patterns)
    prefix = base.as_posix().rstrip("/") + "/"
    if isinstance(touched, TouchedPaths):
        return matcher.matches_in(touched.under(prefix))
    return matcher.matches_in(_grouped(touched, prefix))


@lru_cache(maxsize=1024)
def _compile_exclude(pattern: str) -> _Matcher:
    try:
        glob.translate(pattern, flags=_FLAGS, limit=_EXPANSION_LIMIT)  # as in `paths:`
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
            # picomatch matches a path equal to the pattern, whatever its `[`s (`app/[id]`)
            if pattern == text or matcher.match(text) or matcher.match(text.lstrip("/")):
                return pattern
    return None
