"""`MEMORY.md`: one line per memory, and the cut applied before it enters a prompt.

Pure text in, text out. The index is kept in step with the files by the store; a line
pointing at a missing file is reported by `dangling` and dropped by `reconcile`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

INDEX_NAME = "MEMORY.md"
MAX_INDEX_LINES = 200
MAX_INDEX_BYTES = 25_000
# What memoryd reads of a MEMORY.md at most: 40 times what a prompt keeps. An index over it is
# cut for the prompt like any long one, and never rewritten (writers refuse with TooLarge).
MAX_INDEX_READ_BYTES = 1_000_000

_LINE = re.compile(
    r"^\s*[-*]\s+\[(?P<title>(?:[^\]\\]|\\.)*)\]\((?P<file>[^)]+)\)(?:\s*[—–-]+\s*(?P<hook>.*))?\s*$"
)
_TITLE_ESCAPE = re.compile(r"([\[\]\\])")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


@dataclass(frozen=True)
class IndexEntry:
    title: str
    file: str
    hook: str
    lineno: int  # 0-based line number in the index text


@dataclass(frozen=True)
class Truncation:
    text: str
    truncated: bool
    cap: Literal["lines", "bytes"] | None
    warning: str | None


def _one_line(text: str) -> str:
    return " ".join(_CONTROL.sub(" ", text).split())


def index_line(title: str, file: str, hook: str) -> str:
    """`- [Title](file.md) — one-line hook`, with newlines and brackets made harmless."""
    safe_title = _TITLE_ESCAPE.sub(r"\\\1", _one_line(title)) or file
    safe_file = _one_line(file).replace(" ", "%20").replace(")", "%29")
    safe_hook = _one_line(hook)
    line = f"- [{safe_title}]({safe_file})"
    return f"{line} — {safe_hook}" if safe_hook else line


def _unescape_file(file: str) -> str:
    return file.strip().replace("%20", " ").replace("%29", ")")


def parse_index(text: str) -> list[IndexEntry]:
    entries = []
    for lineno, line in enumerate(text.splitlines()):
        match = _LINE.match(line)
        if match is None:
            continue
        title = re.sub(r"\\(.)", r"\1", match.group("title"))
        entries.append(
            IndexEntry(
                title, _unescape_file(match.group("file")), match.group("hook") or "", lineno
            )
        )
    return entries


def _with_newline(lines: list[str]) -> str:
    return "\n".join(lines) + "\n" if lines else ""


def upsert(text: str, file: str, line: str) -> str:
    """Replace the line(s) for `file` with `line`, or append it."""
    lines = text.splitlines()
    targets = {e.lineno for e in parse_index(text) if e.file == file}
    if not targets:
        return _with_newline([*lines, line])
    first = min(targets)
    out = [
        line if i == first else old for i, old in enumerate(lines) if i == first or i not in targets
    ]
    return _with_newline(out)


def remove(text: str, file: str) -> str:
    targets = {e.lineno for e in parse_index(text) if e.file == file}
    if not targets:
        return text
    return _with_newline([old for i, old in enumerate(text.splitlines()) if i not in targets])


def dangling(text: str, existing: Iterable[str]) -> list[IndexEntry]:
    """Index lines that point at files which do not exist (links to URLs are left alone)."""
    present = set(existing)
    return [e for e in parse_index(text) if e.file not in present and _is_local(e.file)]


def unlisted(text: str, files: Iterable[str]) -> list[str]:
    """The files (in the order given) that no index line points at: orphans, e.g. a file
    written by a writer that was killed before it wrote the index."""
    listed = {e.file for e in parse_index(text)}
    return [f for f in files if f not in listed]


def apply(text: str, upserts: Mapping[str, str], present: Collection[str] | None = None) -> str:
    """One pass over the index: each `upserts[file]` line replaces the first line for that
    file (later ones are dropped) or is appended; with `present`, lines pointing at files not
    in it are dropped too (repair on write)."""
    out: list[str] = []
    done: set[str] = set()
    for line in text.splitlines():
        match = _LINE.match(line) if "](" in line else None
        if match is not None:
            file = _unescape_file(match.group("file"))
            if file in upserts:
                if file not in done:
                    out.append(upserts[file])
                    done.add(file)
                continue
            if present is not None and _is_local(file) and file not in present:
                continue
        out.append(line)
    out.extend(line for file, line in upserts.items() if file not in done)
    return _with_newline(out)


def _is_local(file: str) -> bool:
    return "://" not in file and not file.startswith("#")


def reconcile(text: str, files: Mapping[str, tuple[str, str]]) -> str:
    """Bring the index in step with `files` ({file: (title, hook)}): drop lines to missing
    files, add a line for each file that has none, keep everything else as written."""
    for entry in dangling(text, files):
        text = remove(text, entry.file)
    listed = {e.file for e in parse_index(text)}
    for file in sorted(files):
        if file not in listed:
            title, hook = files[file]
            text = upsert(text, file, index_line(title, file, hook))
    return text


def truncate(text: str) -> Truncation:
    """Cap at MAX_INDEX_LINES lines, then at MAX_INDEX_BYTES bytes (cut after the last whole
    line that fits, never mid-line); when cut, append a warning naming the cap that was hit."""
    # Lines end at "\n" only: `splitlines` would also split at \r, \f, U+2028 and friends,
    # counting one index line as several and cutting it mid-line.
    lines = text.split("\n")
    lines = [f"{line}\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    cap: Literal["lines", "bytes"] | None = None
    if len(lines) > MAX_INDEX_LINES:
        total = len(lines)
        lines = lines[:MAX_INDEX_LINES]
        cap = "lines"
        detail = (
            f"{total} lines (limit {MAX_INDEX_LINES}); only the first {MAX_INDEX_LINES} were loaded"
        )
    kept = "".join(lines)
    raw = kept.encode("utf-8")
    if len(raw) > MAX_INDEX_BYTES:
        head = raw[:MAX_INDEX_BYTES]
        cut = head.rfind(b"\n")
        kept = head[: cut + 1].decode("utf-8") if cut >= 0 else ""
        cap = "bytes"
        detail = f"{len(raw):,} bytes (limit {MAX_INDEX_BYTES:,}); it was cut at the last whole line that fits"
    if cap is None:
        return Truncation(text, False, None, None)
    warning = (
        f"> WARNING: {INDEX_NAME} is {detail}. Keep index lines short and move detail "
        "into the memory files."
    )
    if kept and not kept.endswith("\n"):
        kept += "\n"
    return Truncation(f"{kept}\n{warning}\n", True, cap, warning)
