"""The manifest: each memory's frontmatter only, the cheap view recall and agents read."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import wcwidth

from memoryd.automem.memfile import UNSAFE_CHARACTERS, as_field


@dataclass(frozen=True)
class MemoryHeader:
    path: Path  # absolute
    name: str
    description: str
    type: str | None  # None: missing or not one of the closed set (see `problem`)
    mtime: float
    team: bool
    problem: str | None = None
    file: str = ""  # relative to the memory dir, `/`-separated (`team/x.md` for team memories)

    def as_dict(self) -> dict[str, object]:
        return {
            "path": str(self.path),
            "file": self.file,
            "name": self.name,
            "description": self.description,
            "type": self.type,
            "mtime": self.mtime,
            "team": self.team,
            "problem": _with_name_problem(self.problem, self.file),
        }


NAME_NOT_UTF8 = (
    "its file name is not UTF-8, so no request can name it (each undecodable byte arrives "
    "as U+FFFD); rename the file"
)


def _with_name_problem(problem: str | None, file: str) -> str | None:
    """A file whose name Python decoded with surrogate escapes is listed, but its path cannot
    come back in a request: say so rather than hand out a path that names nothing."""
    try:
        file.encode("utf-8")
    except UnicodeEncodeError:
        return f"{problem}; {NAME_NOT_UTF8}" if problem else NAME_NOT_UTF8
    return problem


# A name and a description as long as `memory.write` takes them: a file written by hand or
# by an agent may hold 200 KB in either, and every prompt with the manifest carried it whole.
LINE_NAME_CHARS = 200
LINE_DESCRIPTION_CHARS = 1_000


def format_manifest(headers: Iterable[MemoryHeader]) -> str:
    """One line per memory, for prompts: `- file [type] (date) name: description`."""
    lines = []
    for h in headers:
        date = _day(h.mtime)
        kind = h.type or "invalid"
        text = f"- {shown_file(h.file)} [{kind}] ({date}) {one_line(h.name, LINE_NAME_CHARS)}"
        if h.description:
            text += f": {one_line(h.description, LINE_DESCRIPTION_CHARS)}"
        lines.append(text)
    return "\n".join(lines)


# What in a file name would end or bend its manifest line (`memfile.UNSAFE_CHARACTERS`: a
# newline, an escape sequence, a bidirectional control showing the rest of the line reordered
# in a terminal, `user_\u202egnp.md` as `user_dm.png`); and a byte of a name that is not UTF-8
# (a surrogate escape), which no request body may carry. And a `%` that an escape's two hex
# digits follow: left as it is, a file named `a%0Ab.md` was shown as `a\nb.md` is.
_UNSAFE_IN_LINE = re.compile(rf"[{UNSAFE_CHARACTERS}\ud800-\udfff]|%(?=[0-9A-Fa-f]{{2}})")


def shown_file(file: str) -> str:
    """`file` as a manifest line shows it: each control character, line separator or
    bidirectional control as its UTF-8 bytes percent-encoded (`a%0Ab.md`), a byte that is
    not UTF-8 as that byte (`%FF`), and a `%` that reads as the start of such an escape as
    `%25` (`a%250Ab.md`); any other `%` stays (`100% done.md`). So each shown name is one
    file's: reading `%XX` as that byte and any other character as itself gives the name
    back. Linux lets a name hold a newline: a memory file so named wrote lines of its own
    choosing into the manifest every recall and extraction prompt carries."""
    return _UNSAFE_IN_LINE.sub(lambda m: _percent(m.group()), file)


_ESCAPES = re.compile(r"(?:%[0-9A-Fa-f]{2})+")


def file_of_shown(shown: str) -> str:
    """The file name `shown_file` shows as `shown`, when it is such a form: each run of `%XX`
    read as the bytes it spells (UTF-8, a byte that is not as a surrogate escape, as Python
    names such a file), anything else as itself. A model given the manifest names its files
    so (`agent.policy` finds them)."""
    return _ESCAPES.sub(
        lambda m: bytes.fromhex(m.group().replace("%", "")).decode("utf-8", "surrogateescape"),
        shown,
    )


def _percent(char: str) -> str:
    try:
        raw = char.encode("utf-8", "surrogateescape")  # a surrogate escape: its own byte
    except UnicodeEncodeError:
        raw = char.encode("utf-8", "surrogatepass")
    return "".join(f"%{byte:02X}" for byte in raw)


def one_line(text: str, cap: int) -> str:
    """`text` on one line (a YAML name may hold line breaks, which would start a line of
    its own in the prompt) and at most `cap` characters, cut with an ellipsis: the one cut
    of a name or description memoryd shows or derives (manifest lines, MEMORY.md hooks,
    quick-add's fields). Without control characters or bidirectional controls (`as_field`):
    a hand-made memory's name may hold them, and the line was shown reordered, or an escape
    sent, to whoever reads the manifest in a terminal.

    The cut is at the end of a word when one ends in the second half of the room (a longer
    word is cut inside, not dropped with all that follows it), never inside what a reader
    sees as one character (a letter and its accents, an emoji sequence, a flag), and a
    trailing `,;:-` goes with the cut ("word…", not "word,…")."""
    text = as_field(text)
    if len(text) <= cap:
        return text
    end = character_start(text, max(cap - 1, 0))
    if text[end] != " ":
        space = text.rfind(" ", 0, end)
        if space > cap // 2:
            end = space
    kept = text[:end]
    return (kept.rstrip(_DANGLING) or kept.rstrip()) + "…"


_DANGLING = " ,;:-\u2013\u2014"


def character_start(text: str, index: int) -> int:
    """`index`, or the start of the character a reader sees there when it is inside one (an
    extended grapheme cluster, UAX #29: a letter and its marks, an emoji sequence, a flag, a
    Thai vowel sign, an Indic conjunct); `index` when that character starts the text (a run of
    marks the length of the room is no character). wcwidth's rules, not a hand-made subset:
    that one cut ทำ ("do") between its letters and a conjunct after its virama."""
    at = index
    if at > 0 and "\udc00" <= text[at] <= "\udfff" and "\ud800" <= text[at - 1] <= "\udbff":
        at -= 1  # a surrogate pair left in the text, which UAX #29 does not know
    start = wcwidth.grapheme_boundary_before(text, at + 1)
    return start if start > 0 else index


def _day(mtime: float) -> str:
    """A file time as a local day, as the local ranker, `explain` and the extraction prompt's
    "Today is" read days (the UTC day put a memory written at 20:00 in Los Angeles on the next
    day); "unknown date" for one no date can hold (a file system may keep times past 9999)."""
    try:
        return datetime.fromtimestamp(mtime).strftime("%Y-%m-%d")
    except (ValueError, OverflowError, OSError):
        return "unknown date"
