"""Rewritten views of a text, where a secret written in pieces or encoded reads whole again.

No rule matches a key as written when it is split across lines (a PEM-like block, a YAML
scalar broken at 76 columns), split into string literals (`"sk-ant-" + "api03-…"`), has
invisible characters inside (zero-width spaces, the NULs of UTF-16 read as 8-bit text), or is
encoded (base64, hex, URL percent-encoding, `\\u005f` escapes: what gitleaks' decoder
undoes, nested up to its default depth). `rewrites(text)` makes the text with those undone
and says where each change is, in both texts; the scanner runs its rules on the lines around
the changes and keeps a finding only when it crosses one (the others it found in the text
itself).
"""

from __future__ import annotations

import base64
import binascii
import re
from bisect import bisect_left, bisect_right
from itertools import accumulate, chain
from urllib.parse import unquote_to_bytes

__all__ = ["Rewrite", "rewrites"]

# Format characters that show as nothing, and NUL (UTF-16 text read one byte a character).
_INVISIBLE_CHARS = "\x00\u00ad\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff"
_INVISIBLE = re.compile(f"[{_INVISIBLE_CHARS}]+")
# `"sk-ant-" + "api03-…"`, `'…' . '…'`, `"…" .. "…"`, `"…" || "…"`, `"…" & "…"`, and
# adjacent literals: touching (`"…""…"`) or on the next line (C's and Python's implicit
# concatenation). Not two on one line apart: in a shell they are two arguments (`curl --user
# "name:password" "https://…"`). One regex a quote, each starting with it: the regex engine
# then skips from quote to quote (one regex for the three tried at every character).
_OPERATOR = r"(?:\+|\.\.?|\|\||&)[ \t]{0,8}"
_NEXT_LINE = r"[ \t]{0,8}\\?\r?\n[ \t]{0,40}"
_CONCATS = tuple(
    re.compile(
        rf"""{q}(?<=[A-Za-z0-9_\-]{q})"""
        rf"""(?:[ \t]{{0,8}}{_OPERATOR}(?:{_NEXT_LINE}(?:{_OPERATOR})?)?"""
        rf"""|{_NEXT_LINE}(?:{_OPERATOR})?|)"""
        rf"""{q}(?=[A-Za-z0-9_\-])"""
    )
    for q in ('"', "'", "`")
)
# A line ending in a long run of key characters and going on with more on the next line: a key
# wrapped at a fixed width. Twenty characters, so words of wrapped prose are never joined; a
# PEM block's `-----END …` line is not the key's continuation. The newline comes first, so the
# regex engine skips from line to line; a `\r`, `\\` or a space before it is taken in after.
_KEY = r"[A-Za-z0-9_\-+/=]"
_WRAP = re.compile(
    rf"\n(?:(?<={_KEY}{{20}}\n)|(?<={_KEY}{{20}}[ \t\\\r]\n))[ \t]*(?!-----)(?={_KEY})"
)
_BEFORE_NEWLINE = frozenset(" \t\\\r")
# gitleaks' encoded segments (detect/codec/encodings.go): percent-encoded runs, and runs of
# 16 or more base64 characters (hex is one of them), which are found by a byte search over a
# copy of the text where each such character is `x` (a regex tried at every position of the
# text took half as long as the whole rule scan).
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}(?:%[0-9A-Fa-f]{2})*")  # `%` first: skipped to
# `\u005f` and `\x5f` runs (JSON, JavaScript, Python, C strings; gitleaks decodes `\uXXXX`).
_ESCAPE = r"\\{1,2}(?:[uU][0-9A-Fa-f]{4}|x[0-9A-Fa-f]{2})"
_ESCAPES = re.compile(rf"{_ESCAPE}(?:{_ESCAPE})*")
_ESCAPED_CODE = re.compile(r"[uUx]([0-9A-Fa-f]+)")
_BASE64_RUN = re.compile(r"[A-Za-z0-9_/+\-]{16,16384}={0,3}")
_RUN_START = b"x" * 16
_AS_RUN = bytes(
    ord("x") if chr(c).isascii() and (chr(c).isalnum() or chr(c) in "_/+-") else ord(" ")
    for c in range(256)
)
_HEX = re.compile(r"(?:[0-9A-Fa-f]{2}){16,}")
_PRINTABLE = frozenset(range(0x20, 0x7F)) | {0x09, 0x0A, 0x0D}
# The first character of each group of four base64 characters holds the top six bits of a
# byte: for a printable one (0x20-0x7E, tab, newline, carriage return) one of these. A run
# with another there decodes to something else, so it is not decoded (most runs in code are
# identifiers: `a_long_function_name` has `l`, `g`, `n`).
_B64_LEADS = frozenset("CDIJKLMNOPQRSTUVWXYZabcdef")
_MAX_DEPTH = 5  # gitleaks' default --max-decode-depth


# A change: the span of the original text replaced, what replaces it, and how the secret was
# written there ("base64-encoded"). Plain tuples: a hostile text makes hundreds of thousands.
_Edit = tuple[int, int, str, str]


class Rewrite:
    """The text with `edits` (sorted, not overlapping) made, and how its offsets map back."""

    def __init__(self, original: str, edits: list[_Edit]) -> None:
        self.edits = edits
        self.starts = [e[0] for e in edits]
        self.ends = [e[1] for e in edits]
        deltas = [len(e[2]) - (e[1] - e[0]) for e in edits]
        shifts = list(accumulate(deltas))  # the view's shift after each change
        self.view_ends = [end + shift for end, shift in zip(self.ends, shifts, strict=True)]
        self.view_starts = [
            start + shift - delta
            for start, shift, delta in zip(self.starts, shifts, deltas, strict=True)
        ]
        previous_ends = [0, *self.ends][: len(edits)]
        gaps = [original[a:b] for a, b in zip(previous_ends, self.starts, strict=True)]
        texts = [e[2] for e in edits]
        tail = original[self.ends[-1] :] if edits else original
        self.text = "".join(chain.from_iterable(zip(gaps, texts, strict=True))) + tail

    def back_start(self, pos: int) -> int:
        """Where the character at `pos` of the view comes from (inside a replacement: the start
        of what it replaced; just after a removal: the character after what was removed)."""
        k = bisect_right(self.view_starts, pos) - 1
        if k >= 0 and pos < self.view_ends[k]:
            return self.starts[k]
        k = bisect_right(self.view_ends, pos) - 1
        return pos if k < 0 else pos - self.view_ends[k] + self.ends[k]

    def back_end(self, pos: int) -> int:
        """Where the span ending at `pos` of the view ends in the original."""
        k = bisect_left(self.view_starts, pos) - 1
        if k >= 0 and pos <= self.view_ends[k] and self.view_starts[k] < self.view_ends[k]:
            return self.ends[k]
        k = bisect_left(self.view_ends, pos) - 1
        return pos if k < 0 else pos - self.view_ends[k] + self.ends[k]

    def kinds_within(self, start: int, end: int) -> set[str]:
        """How the text was rewritten inside the view's span [start, end): a removal counts
        when strictly inside (a finding ending where a line was joined did not cross it)."""
        kinds: set[str] = set()
        for k in range(bisect_left(self.view_ends, start), len(self.edits)):
            v_start, v_end = self.view_starts[k], self.view_ends[k]
            if v_start >= end:
                break
            if start < v_end or (v_start == v_end and start < v_start):
                kinds.add(self.edits[k][3])
        return kinds


def rewrites(text: str) -> list[Rewrite]:
    """`text` rewritten: invisible characters removed and encoded segments decoded; and, when
    something in it is split, the same with the pieces joined too. Two views, as a join can
    glue two encoded values into one run that decodes to neither (base64 values on
    consecutive lines). None when nothing in `text` is written so."""
    edits: list[_Edit] = []
    # A string search for each first: the regex runs only when one is there.
    ascii_only = text.isascii()
    if "\x00" in text if ascii_only else any(char in text for char in _INVISIBLE_CHARS):
        invisible = "with invisible characters"
        edits = [(m.start(), m.end(), "", invisible) for m in _INVISIBLE.finditer(text)]
    cleaned = Rewrite(text, edits)
    views = []
    plain = _with_decoded(text, cleaned, edits)
    if plain:
        views.append(Rewrite(text, plain) if plain is not edits else cleaned)
    joins = [
        (m.start(), m.end(), "", "split into string literals")
        for concat in _CONCATS
        for m in concat.finditer(cleaned.text)
    ]
    joins += [
        (_wrap_start(cleaned.text, m.start()), m.end(), "", "split across lines")
        for m in _WRAP.finditer(cleaned.text)
        if _key_like(cleaned.text[m.start() - 20 : m.start()])
    ]
    if joins:
        joined = _merged(cleaned, edits, joins)
        views.append(Rewrite(text, _with_decoded(text, Rewrite(text, joined), joined)))
    return views


def _with_decoded(text: str, view: Rewrite, edits: list[_Edit]) -> list[_Edit]:
    """`edits` (`view` is `text` with them made) and the decoding of each encoded segment."""
    decoded = [
        (m.start(), m.end(), *found)
        for m in _encoded_segments(view.text)
        if (found := _decoded(m.group(), _MAX_DEPTH)) is not None
    ]
    return _merged(view, edits, decoded) if decoded else edits


def _key_like(tail: str) -> bool:
    """Whether the 20 characters a wrapped line ends with can be a key's: a letter or a digit,
    more than two characters (not a `-----` or `=====` rule, not `xxxxxxxx`), and no base64
    padding at the end (a padded value is whole)."""
    return any(c.isalnum() for c in tail) and len(set(tail)) > 2 and not tail.endswith("=")


def _wrap_start(text: str, newline: int) -> int:
    start = newline
    while start > 0 and text[start - 1] in _BEFORE_NEWLINE:
        start -= 1
    return start


def _encoded_segments(text: str) -> list[re.Match[str]]:
    """Percent-encoded runs, escape runs and base64 runs, in text order."""
    found = list(_PERCENT.finditer(text)) if "%" in text else []
    if "\\" in text:
        found += _ESCAPES.finditer(text)
    # One byte a character ("?" for any other), each base64 character an "x".
    runs = text.encode("ascii", "replace").translate(_AS_RUN)
    pos = runs.find(_RUN_START)
    while pos >= 0:
        match = _BASE64_RUN.match(text, pos)
        if match is None:  # cannot happen: the bytes say 16 such characters start here
            break
        found.append(match)
        pos = runs.find(_RUN_START, match.end())
    return sorted(found, key=lambda m: m.start())


def _merged(view: Rewrite, edits: list[_Edit], found: list[_Edit]) -> list[_Edit]:
    """`edits` with the changes `found` in `view` added, in the original's offsets: a new change
    covering earlier ones replaces them (it was found with them made)."""
    if edits:
        added = [(view.back_start(s), view.back_end(e), new, kind) for s, e, new, kind in found]
    else:  # the view is the original
        added = found
    # Sorted so that of two changes starting together the longer, then the new one, comes
    # first: each change overlapping one kept before it is covered by it and dropped.
    ordered = sorted(
        [(e[0], -e[1], 0, e) for e in added] + [(e[0], -e[1], 1, e) for e in edits],
        key=lambda item: item[:3],
    )
    merged: list[_Edit] = []
    for _, _, _, edit in ordered:
        if not merged or edit[0] >= merged[-1][1]:
            merged.append(edit)
    return merged


def _decoded(segment: str, depth: int) -> tuple[str, str] | None:
    """(the printable text `segment` encodes, with its own encoded segments decoded too, and
    how it was encoded), or None."""
    if segment.startswith("%"):
        raw: bytes | None = unquote_to_bytes(segment)
        kind = "URL-encoded"
    elif segment.startswith("\\"):
        codes = [int(code, 16) for code in _ESCAPED_CODE.findall(segment)]
        raw, kind = bytes(codes) if max(codes) < 0x80 else None, "escaped"
    elif _HEX.fullmatch(segment):
        raw, kind = bytes.fromhex(segment), "hex-encoded"
    elif not _B64_LEADS.issuperset(segment[::4]):
        return None
    else:
        raw, kind = _base64(segment), "base64-encoded"
    if not raw or not _PRINTABLE.issuperset(raw):
        return None
    text = raw.decode("ascii")
    if depth > 1:
        text = "".join(_nested(text, depth - 1))
    return text, kind


def _nested(text: str, depth: int) -> list[str]:
    parts: list[str] = []
    cursor = 0
    for match in _encoded_segments(text):
        found = _decoded(match.group(), depth)
        if found is not None:
            parts += [text[cursor : match.start()], found[0]]
            cursor = match.end()
    parts.append(text[cursor:])
    return parts


def _base64(segment: str) -> bytes | None:
    body = segment.rstrip("=")
    if len(body) % 4 == 1:
        return None
    padded = body + "=" * (-len(body) % 4)
    try:
        if "-" in body or "_" in body:
            return base64.urlsafe_b64decode(padded) if not ("+" in body or "/" in body) else None
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return None
