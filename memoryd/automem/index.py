"""`MEMORY.md`: one line per memory, and the cut applied before it enters a prompt.

Pure text in, text out. The index is kept in step with the files by the store; a line
pointing at a missing file is reported by `dangling` and dropped by `reconcile`.

A line names its file by a Markdown link target. memoryd writes the file's key with `%`,
whitespace, control characters and parentheses percent-encoded, so every name comes back as
written; a line written by hand or by another tool may say `./a.md`, `sub/../a.md`,
`<a b.md>`, `a.md#why`, `a.md "title"` or `a%20b.md` for a file named so. Each line is
therefore read as the files it may mean (`IndexEntry.forms`) and points at whichever of them
exists.

The rewriters are told what exists on disk (`exists`, a name relative to the index's folder):
a line means the first of its forms that exists, so the line `a%20b.md` of the file `a b.md`
is never taken for a file named `a%20b.md`; and a line is dropped only when none of its forms
exists, whether or not it is a memory (`arch.png`, `notes.txt`). A link with a URI scheme
(`https:`, `mailto:`), an absolute path, `~/…` or `#anchor` is never dropped.

A rewrite keeps each line's own ending and gives a line it adds the ending most of the file's
lines have: a MEMORY.md saved with CRLF (on Windows) stays CRLF, where it was rewritten with LF
and git showed every line changed. Lines end at `\r\n`, `\n` or `\r` only, never at a form
feed or U+2028 inside a line (`str.splitlines` breaks there, and the rewrite split the line).
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote, unquote

from memoryd.automem.memfile import UNSAFE_CHARACTERS, as_field
from memoryd.fences import in_fenced_code

INDEX_NAME = "MEMORY.md"
MAX_INDEX_LINES = 200
MAX_INDEX_BYTES = 25_000
# What memoryd reads of a MEMORY.md at most: 40 times what a prompt keeps. An index over it is
# cut for the prompt like any long one, and never rewritten (writers refuse with TooLarge).
MAX_INDEX_READ_BYTES = 1_000_000

# An entry: a list item (`-`, `*`, `+` or `1.`) that opens with a link, bold or not, then
# nothing or a hook after `—`, `–`, `-` or `:`. A target may hold balanced parentheses
# (`a(1).md`, as CommonMark reads it). Read only as `- [T](f) — h`, the other forms people and
# agents write were no entry: their files were orphans, and each got a second line.
_LINE = re.compile(
    r"^\ufeff?\s*(?:[-*+]|\d{1,9}[.)])\s+(?P<em>\*\*|__|\*|_)?"
    r"\[(?P<title>(?:[^\]\\]|\\.)*)\]\((?P<file>(?:[^()]|\([^()]*\))+)\)(?P=em)?"
    r"(?:\s*(?:[—–-]+|:)\s*(?P<hook>.*))?\s*$"
)
# Any inline link: a file linked anywhere in the index (`see [notes](notes.md)`) is listed.
_LINK = re.compile(r"\[(?:[^\]\\]|\\.)*\]\((?P<file>(?:[^()]|\([^()]*\))+)\)")
_TITLE_ESCAPE = re.compile(r"([\[\]\\])")
# Characters a link target cannot hold as they are (or that would read as another name), and
# those no name memoryd writes holds (`memfile.UNSAFE_CHARACTERS`): a file named
# `user_\u202egnp.md` showed the rest of its line reversed in a terminal editor.
_LINK_UNSAFE = re.compile(rf"[%()<>\s{UNSAFE_CHARACTERS}]")
# `mailto:`, `https:`, `file:` …: a link to no file of the index's folder.
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_LINE_END = re.compile(r"(\r\n|\n|\r)")

# Whether a name (relative to the index's folder) exists on disk.
Exists = Callable[[str], bool]


@dataclass(frozen=True)
class IndexEntry:
    title: str
    forms: tuple[str, ...]  # the file names the link may mean, most likely first
    hook: str
    lineno: int  # 0-based line number in the index text

    @property
    def file(self) -> str:
        return self.forms[0]

    def names(self, file: str, exists: Exists | None = None) -> bool:
        return file in meaning(self.forms, exists)

    def file_among(self, files: Collection[str]) -> str | None:
        """The file of `files` this line points at, if any."""
        return next((f for f in self.forms if f in files), None)


@dataclass(frozen=True)
class Truncation:
    text: str
    truncated: bool
    cap: Literal["lines", "bytes"] | None
    warning: str | None


def _split(text: str) -> tuple[list[str], list[str]]:
    """The index's lines, and each one's ending (`\r\n`, `\n`, `\r`; "" for a last line
    with none)."""
    parts = _LINE_END.split(text)
    lines, ends = parts[0::2], [*parts[1::2], ""]
    if not lines[-1]:  # the text ends with a line ending, or is empty
        lines.pop()
        ends.pop()
    return lines, ends


def split_lines(text: str) -> list[str]:
    """The index's lines, without their endings."""
    return _split(text)[0]


def appended(text: str, added: Iterable[str]) -> str:
    """`text` with the lines `added` after its last, each ending as the file's lines do."""
    lines, ends = _split(text)
    return _joined([*zip(lines, ends, strict=True), *((line, "") for line in added)], ends)


def _joined(lines: Iterable[tuple[str, str]], ends: list[str]) -> str:
    """`(line, ending)` pairs as text: a line with no ending of its own (one added, or the
    last line of a file that had no final newline) gets the one most of `ends` are, `\n` in
    a file of none."""
    common = Counter(e for e in ends if e).most_common(1)
    newline = common[0][0] if common else "\n"
    return "".join(line + (end or newline) for line, end in lines)


def index_line(title: str, file: str, hook: str) -> str:
    """`- [Title](file.md) — one-line hook`, with newlines and brackets made harmless."""
    # One line, with no control character or bidirectional control (`as_field`): a name or
    # description from a hand-made file may hold them (memory.write refuses them).
    safe_title = _TITLE_ESCAPE.sub(r"\\\1", as_field(title) or as_field(file))
    safe_file = _LINK_UNSAFE.sub(lambda m: quote(m.group(), safe=""), file)
    safe_hook = as_field(hook)
    line = f"- [{safe_title}]({safe_file})"
    return f"{line} — {safe_hook}" if safe_hook else line


def meaning(forms: tuple[str, ...], exists: Exists | None) -> tuple[str, ...]:
    """The forms a line means: the first one that exists on disk (the decoded name before the
    name as written), or all of them when none does or nothing is known of the disk."""
    if exists is not None:
        for form in forms:
            if _is_local(form) and exists(form):
                return (form,)
    return forms


def _kept(forms: tuple[str, ...], exists: Exists | None) -> bool:
    """Whether a line not pointing at a memory stays: a link to no local file, or to a file
    that exists (an image, a text next to the memories)."""
    if not _is_local(forms[0]):
        return True
    return exists is not None and any(_is_local(f) and exists(f) for f in forms)


def link_forms(target: str) -> tuple[str, ...]:
    """The file names a link target may mean: percent-escapes decoded or as written, a title
    and an `#anchor` dropped or kept (a name may hold `#`), `./` and `a/../` folded."""
    target = target.strip()
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1]
    else:
        untitled = _without_title(target)
        if untitled is not None:
            target = untitled
    written = [target]
    stem, anchor, _ = target.partition("#")
    if anchor and stem:
        written.append(stem)
    forms: list[str] = []
    for form in (f for w in written for f in (unquote(w), w)):
        if "://" not in form and not form.startswith(("/", "#")):
            folded = posixpath.normpath(form)
            form = folded if not folded.startswith("..") else form
        if form not in forms:
            forms.append(form)
    return tuple(forms)


def _without_title(target: str) -> str | None:
    """`target` without the link title that ends it (`a.md "T"`, `a.md 'T'`: whitespace, then
    a quoted text holding no such quote), or None when it has none. By hand, not by the regex
    it was (`^(.*?)\\s+"[^"]*"$`), which went over the whitespace again from each character
    before it: 60,000 spaces in one line's target held `memory.list` 29 s, and a teammate's
    team/MEMORY.md, synced, may hold far more."""
    quote = target[-1:]
    if quote not in ('"', "'"):
        return None
    opening = target.rfind(quote, 0, len(target) - 1)
    if opening < 1 or not target[opening - 1].isspace():
        return None
    return target[:opening].rstrip()


def _matches(lines: list[str]) -> Iterator[re.Match[str] | None]:
    """Per line, its entry match, or None (not an entry, or in a fenced code block)."""
    for line, code in zip(lines, in_fenced_code(lines), strict=True):
        yield None if code or "](" not in line else _LINE.match(line)


def _listed(text: str, given: Collection[str]) -> set[str]:
    """The files of `given` the index links to, by an entry or by a link anywhere outside
    code (`see [notes](notes.md) for details`, as older indexes say): no orphan, no second
    line for it."""
    listed: set[str] = set()
    lines = split_lines(text)
    for line, code in zip(lines, in_fenced_code(lines), strict=True):
        if code or "](" not in line:
            continue
        for link in _LINK.finditer(line):
            found = next((f for f in link_forms(link.group("file")) if f in given), None)
            if found is not None:
                listed.add(found)
    return listed


def parse_index(text: str) -> list[IndexEntry]:
    entries = []
    for lineno, match in enumerate(_matches(split_lines(text))):
        if match is None:
            continue
        title = re.sub(r"\\(.)", r"\1", match.group("title"))
        entries.append(
            IndexEntry(title, link_forms(match.group("file")), match.group("hook") or "", lineno)
        )
    return entries


def upsert(text: str, file: str, line: str, exists: Exists | None = None) -> str:
    """Replace the line(s) for `file` with `line`, or append it."""
    lines, ends = _split(text)
    targets = _lines_naming(text, file, exists)
    if not targets:
        return _joined([*zip(lines, ends, strict=True), (line, "")], ends)
    first = min(targets)
    out = [
        (line if i == first else old, end)
        for i, (old, end) in enumerate(zip(lines, ends, strict=True))
        if i == first or i not in targets
    ]
    return _joined(out, ends)


def remove(text: str, file: str, exists: Exists | None = None) -> str:
    targets = _lines_naming(text, file, exists)
    if not targets:
        return text
    return _without(text, targets)


def _without(text: str, drop: Collection[int]) -> str:
    """`text` without the lines numbered in `drop`, the rest as they were."""
    lines, ends = _split(text)
    kept = [pair for i, pair in enumerate(zip(lines, ends, strict=True)) if i not in drop]
    return _joined(kept, ends)


def _lines_naming(text: str, file: str, exists: Exists | None) -> set[int]:
    """The line numbers of the lines that mean `file`. Only a line with `file` among its forms
    can, so only those ask `exists`: asked of every line, a delete lstat'ed each of 10,000."""
    return {e.lineno for e in parse_index(text) if file in e.forms and e.names(file, exists)}


def dangling(text: str, existing: Iterable[str], exists: Exists | None = None) -> list[IndexEntry]:
    """Index lines that point at files which do not exist: at no memory of `existing` and, with
    `exists`, at nothing on disk (links to URLs and absolute paths are left alone)."""
    present = set(existing)
    return [
        e for e in parse_index(text) if e.file_among(present) is None and not _kept(e.forms, exists)
    ]


def dangling_and_unlisted(
    text: str, files: Iterable[str], exists: Exists | None = None
) -> tuple[list[IndexEntry], list[str]]:
    """`dangling` and `unlisted` of the same index and files, in one parse."""
    wanted = list(files)
    given = set(wanted)
    entries = parse_index(text)
    found = [e.file_among(given) for e in entries]
    gone = [
        e for e, f in zip(entries, found, strict=True) if f is None and not _kept(e.forms, exists)
    ]
    listed = _listed(text, given)
    return gone, [f for f in wanted if f not in listed]


def unlisted(text: str, files: Iterable[str]) -> list[str]:
    """The files (in the order given) that no index line points at: orphans, e.g. a file
    written by a writer that was killed before it wrote the index."""
    wanted = list(files)
    given = set(wanted)
    listed = _listed(text, given)
    return [f for f in wanted if f not in listed]


def apply(
    text: str,
    upserts: Mapping[str, str],
    present: Collection[str] | None = None,
    exists: Exists | None = None,
) -> str:
    """One pass over the index: each `upserts[file]` line replaces the first line for that
    file (later ones are dropped) or is appended; with `present`, lines pointing at files not
    in it (nor, with `exists`, on disk) are dropped too (repair on write)."""
    out: list[tuple[str, str]] = []
    done: set[str] = set()
    lines, ends = _split(text)
    for line, end, match in zip(lines, ends, _matches(lines), strict=True):
        if match is not None:
            forms = link_forms(match.group("file"))
            file = next((f for f in meaning(forms, exists) if f in upserts), None)
            if file is not None:
                if file not in done:
                    out.append((upserts[file], end))
                    done.add(file)
                continue
            if (
                present is not None
                and not any(f in present for f in forms)
                and not _kept(forms, exists)
            ):
                continue
        out.append((line, end))
    out.extend((line, "") for file, line in upserts.items() if file not in done)
    return _joined(out, ends)


def merge_added_entries(server_text: str, local_text: str) -> tuple[str, bool]:
    """Two writers each added lines to one index (two teammates saving a team memory at once):
    the server's text, then each local entry line for a file the server's text does not list.
    With it, whether nothing of the local text is left out (every other local line is one of
    the server's); when something is (a line edited on both sides, prose), the caller keeps the
    local text aside as well."""
    server_lines = split_lines(server_text)
    listed = {form for entry in parse_index(server_text) for form in entry.forms}
    known = set(server_lines)
    added: list[str] = []
    lossless = True
    for line in split_lines(local_text):
        if line in known or not line.strip():
            continue
        match = _LINE.match(line) if "](" in line else None
        if match is not None and not listed.intersection(link_forms(match.group("file"))):
            added.append(line)
            known.add(line)
        else:
            lossless = False
    return appended(server_text, added), lossless


def _is_local(file: str) -> bool:
    """A name in the index's folder: not a URI (`mailto:`, `https://`), an absolute path,
    `~/…` or an anchor."""
    return not _SCHEME.match(file) and not file.startswith(("/", "#", "~"))


def reconcile(text: str, files: Mapping[str, tuple[str, str]], exists: Exists | None = None) -> str:
    """Bring the index in step with `files` ({file: (title, hook)}): drop lines to missing
    files, add a line for each file that has none, keep everything else as written."""
    gone = {e.lineno for e in dangling(text, files, exists)}
    if gone:
        text = _without(text, gone)
    listed = _listed(text, files)
    for file in sorted(files):
        if file not in listed:
            title, hook = files[file]
            text = upsert(text, file, index_line(title, file, hook), exists)
    return text


def truncate(text: str, file_size: int | None = None) -> Truncation:
    """Cap at MAX_INDEX_LINES lines, then at MAX_INDEX_BYTES bytes (cut after the last whole
    line that fits, never mid-line); when cut, append a warning giving the index's own size
    and line count and naming each cap that was hit (`cap` is the last one applied).
    `file_size`: the file's size when `text` is only its first MAX_INDEX_READ_BYTES."""
    # Lines end at "\n" only: `splitlines` would also split at \r, \f, U+2028 and friends,
    # counting one index line as several and cutting it mid-line.
    lines = text.split("\n")
    lines = [f"{line}\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    size = len(text.encode("utf-8", errors="surrogatepass"))
    # Blank lines before the first line of text and after the last are none of the index's
    # (Claude Code trims it before counting): 200 entries and a blank line were "cut".
    while lines and not lines[-1].strip():
        lines.pop()
    first = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
    lines = lines[first:]
    total = len(lines)
    counted = f"{total:,} lines"
    if file_size is not None and file_size > size:  # only its start was read
        size, counted = file_size, f"at least {total:,} lines"
    cap: Literal["lines", "bytes"] | None = None
    over_lines = total > MAX_INDEX_LINES
    if over_lines:
        lines = lines[:MAX_INDEX_LINES]
        cap = "lines"
        detail = (
            f"{counted} (limit {MAX_INDEX_LINES}); only the first {MAX_INDEX_LINES} were loaded"
        )
    kept = "".join(lines)
    raw = kept.encode("utf-8")
    if len(raw) > MAX_INDEX_BYTES:
        head = raw[:MAX_INDEX_BYTES]
        cut = head.rfind(b"\n")
        kept = head[: cut + 1].decode("utf-8") if cut >= 0 else ""
        cap = "bytes"
        if over_lines:
            detail = (
                f"{counted} (limit {MAX_INDEX_LINES}) and {size:,} bytes (limit "
                f"{MAX_INDEX_BYTES:,}); its first {MAX_INDEX_LINES} lines were cut at the last "
                "whole line that fits"
            )
        else:
            detail = (
                f"{size:,} bytes (limit {MAX_INDEX_BYTES:,}); it was cut at the last whole line "
                "that fits"
            )
    if cap is None:
        return Truncation(text, False, None, None)
    warning = (
        f"> WARNING: {INDEX_NAME} is {detail}. Keep index lines short and move detail "
        "into the memory files."
    )
    if kept and not kept.endswith("\n"):
        kept += "\n"
    return Truncation(f"{kept}\n{warning}\n", True, cap, warning)
