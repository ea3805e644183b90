"""Assembling loaded files into the one text block a session starts with.

The block is the first user message, not the system prompt: instruction files change
between sessions and the system prompt is what the provider's prompt cache keys on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date

from memoryd.rules import markdown
from memoryd.rules.model import FileType, IndexEntry, LoadedFile

PREAMBLE = (
    "The instructions below come from the user, their organisation and the project being "
    "worked on. They take precedence over your default behaviour: follow them as written, "
    "even where they differ from what you would otherwise do. Each file is introduced by its "
    "path and origin; files further down are more specific and win when two disagree."
)

_ORIGIN: dict[FileType, str] = {
    "Managed": "managed policy, set by the organisation",
    "User": "the user's own instructions, for every project",
    "Project": "project instructions, checked into the repository",
    "Local": "the user's private instructions for this project",
    "AutoMem": "auto memory index: what earlier sessions chose to remember",
    "TeamMem": "team memory index, shared with the repository's team",
}


def current_date_line(today: date) -> str:
    return f"Today's date is {today.isoformat()}."


# What ends a line for a reader (the model): more than `\n`.
_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# Spaces a reader takes for one after a heading's `#`s, which Markdown does not (no heading to
# the parser): a no-break space, the typographic ones, the zero-width ones.
_OTHER_SPACES = (
    "\u00a0\u1680" + "".join(map(chr, range(0x2000, 0x200C))) + "\u202f\u205f\u2060\u3000\ufeff"
)
# What may stand before a heading's `#`s (or a setext title) on its line: spaces, and the
# markers of the quotes and list items it is in (`> - ## …`).
_LEAD = (
    rf"(?:[ \t{_OTHER_SPACES}>]|[-*+](?=[ \t{_OTHER_SPACES}])"
    rf"|[0-9]{{1,9}}[.)](?=[ \t{_OTHER_SPACES}]))*"
)
# A heading line begun by a break Markdown does not count (U+2028, a form feed…), or with such
# a space before or after its `#`s, but a reader might: no heading to the parser, a line of
# its own to the model.
_EXOTIC_HEADING = re.compile(
    rf"(?:(?<=[{_BREAKS[2:]}])({_LEAD})(#{{1,6}}[ \t{_OTHER_SPACES}]+[^{_BREAKS}]*)"
    rf"|(?:^|(?<=[{_BREAKS[:2]}]))({_LEAD})(#{{1,6}}[ \t{_OTHER_SPACES}]+[^{_BREAKS}]*))"
)
# Our section titles open with a path (absolute, `~`, a drive) and hold a `(`.
_PATH_TITLE = re.compile(r"(?:/|~|[A-Za-z]:[\\/]|\\\\)")
# A line that could be such a title, as a pre-check before the Markdown parse (its lead a
# looser `_LEAD`: a class of characters is cheaper to try at every line).
_MAYBE_TITLE = re.compile(
    rf"(?:^|(?<=[{_BREAKS}]))[ \t{_OTHER_SPACES}>*+0-9.)-]*(?:#{{1,6}}[ \t{_OTHER_SPACES}]+)?"
    rf"(?:/|~|[A-Za-z]:[\\/]|\\\\)[^{_BREAKS}]*\("
)
_ORIGIN_WORDS = re.compile(
    "|".join(re.escape(f"({origin.split(',')[0]}") for origin in _ORIGIN.values()), re.I
)


def _one_line(text: object) -> str:
    """A path (or glob) as one line of text: a file name may hold newlines, and its heading
    line would otherwise go on into lines of its own (a forged section, see `_defused`)."""
    return _CONTROL.sub(
        lambda m: (
            f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else f"\\u{ord(m.group()):04x}"
        ),
        str(text),
    )


def _defused(content: str) -> str:
    """`content` with every heading that could pass for one of this block's section headings
    (`## /home/me/.claude/CLAUDE.md (the user's own instructions, …)`, or the same title
    underlined with `---`) escaped with a backslash: a repository's file or a teammate's
    team index could otherwise open a section the model takes for the user's own
    instructions or the organisation's policy. Headings only, as the Markdown parser finds
    them: a `# ~/.bashrc (append this)` comment in a code block stays as written."""
    if not (_MAYBE_TITLE.search(content) or _ORIGIN_WORDS.search(content)):
        return content
    lines: list[str] | None = None
    for first, after, title, setext in markdown.headings(content):
        title = title.strip()
        if not ((_PATH_TITLE.match(title) and "(" in title) or _ORIGIN_WORDS.search(title)):
            continue
        lines = lines if lines is not None else markdown.split_lines(content)
        # ATX: `\#` is a literal `#`; setext: `\---` is no underline. The backslash goes
        # right before them, after a quote's `>` or a list item's marker: before those, it
        # left `\> ## ~/.claude/CLAUDE.md (the user's own …)` reading as a heading.
        at = after - 1 if setext else first
        if at < len(lines):
            line = lines[at]
            marks = "=-" if setext else "#"
            cut = min((i for i in map(line.find, marks) if i >= 0), default=-1)
            if cut < 0:  # not where the parser said: the line's start, as before
                cut = len(line) - len(line.lstrip(" \t"))
            lines[at] = line[:cut] + "\\" + line[cut:]
    content = content if lines is None else "".join(lines)

    def escape(match: re.Match[str]) -> str:
        if match.group(2) is not None:
            indent, line = match.group(1, 2)
        else:
            indent, line = match.group(3, 4)
            spaces = indent + line.lstrip("#")[:1]
            if not any(space in _OTHER_SPACES for space in spaces):
                return match.group(0)  # a heading the parser saw, or code: judged above
        title = line.lstrip("#").strip(f" \t{_OTHER_SPACES}")
        if (_PATH_TITLE.match(title) and "(" in title) or _ORIGIN_WORDS.search(title):
            return f"{indent}\\{line}"
        return match.group(0)

    return _EXOTIC_HEADING.sub(escape, content)


def _heading(file: LoadedFile) -> str:
    origin = _ORIGIN[file.type]
    if file.parent is not None:
        origin += f", included from {_one_line(file.parent)}"
    if file.globs:
        origin += f"; applies to files matching {_one_line(', '.join(file.globs))}"
    return f"## {_one_line(file.path)} ({origin})"


def render_files(files: Sequence[LoadedFile]) -> list[str]:
    """One section per file with content; an empty file adds nothing to the prompt."""
    return [f"{_heading(f)}\n\n{_defused(f.content.strip())}" for f in files if f.content.strip()]


def render_entries(entries: Sequence[IndexEntry]) -> list[str]:
    sections = []
    for entry in entries:
        if not entry.content.strip():
            continue
        note = ", truncated" if entry.truncated else ""
        heading = f"## {_one_line(entry.path)} ({_ORIGIN[entry.type]}{note})"
        sections.append(f"{heading}\n\n{_defused(entry.content.strip())}")
    return sections


def assemble(file_sections: Sequence[str], entry_sections: Sequence[str] = ()) -> str:
    """The preamble and every section; empty when there is nothing to say."""
    sections = [*file_sections, *entry_sections]
    if not sections:
        return ""
    return "\n\n".join([PREAMBLE, *sections]) + "\n"
