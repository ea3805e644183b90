"""The session summary template, and telling a summary with content from a bare template.

The built-in template has SPEC.md's ten sections in order, each a `# Heading` line followed
by a one-line italic description. A user template (`<config>/session-memory/config/template.md`)
replaces it when it is a readable, non-empty UTF-8 text file of reasonable size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from memoryd import fsutil, paths
from memoryd.fences import in_fenced_code
from memoryd.session.compaction import BOM

SECTIONS: tuple[tuple[str, str], ...] = (
    ("Session Title", "A short, specific title for this session (5-10 words)."),
    ("Current State", "What is being worked on right now, what is unfinished, the next steps."),
    ("Task specification", "What the user asked for, with their constraints and design choices."),
    ("Files and Functions", "The files and functions that matter here, and why each one does."),
    ("Workflow", "Commands run and the order they are run in; how output is read."),
    ("Errors & Corrections", "Errors hit and how they were fixed; approaches the user rejected."),
    (
        "Codebase and System Documentation",
        "How the relevant parts of the system fit together.",
    ),
    ("Learnings", "What worked, what did not, what to avoid next time."),
    ("Key results", "Exact outputs the user asked for: answers, tables, figures, decisions."),
    ("Worklog", "Terse step-by-step log of what was done, oldest first."),
)

MAX_TEMPLATE_BYTES = 64 * 1024


def builtin_template() -> str:
    return "\n".join(f"# {title}\n_{description}_\n" for title, description in SECTIONS)


def user_template_path() -> Path:
    return paths.config_dir() / "session-memory" / "config" / "template.md"


@dataclass(frozen=True)
class Template:
    text: str
    source: str  # "builtin" or the user template's path
    warning: str | None = None  # why the user template was not used


def load_template() -> Template:
    """The user template when usable, else the built-in one (with the reason)."""
    path = user_template_path()
    try:
        # Never blocks: a FIFO in its place is refused, not read on the event loop.
        raw = fsutil.read_regular_file(path, MAX_TEMPLATE_BYTES, follow_links=True)
    except FileNotFoundError:
        return Template(builtin_template(), "builtin")
    except OSError as exc:
        return Template(builtin_template(), "builtin", f"cannot read {path}: {exc.strerror}")
    if len(raw) > MAX_TEMPLATE_BYTES:
        return Template(builtin_template(), "builtin", f"{path} is over {MAX_TEMPLATE_BYTES} bytes")
    if b"\x00" in raw:
        return Template(builtin_template(), "builtin", f"{path} is not a text file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Template(builtin_template(), "builtin", f"{path} is not UTF-8")
    if not text.strip():
        return Template(builtin_template(), "builtin", f"{path} is empty")
    return Template(text if text.endswith("\n") else text + "\n", str(path))


_HEADING = re.compile(r"^#{1,6}\s+\S")
_ITALIC = re.compile(r"^(_[^_].*_|\*[^*].*\*)$")


def _skeleton_lines(template: str) -> set[str]:
    return {line.strip() for line in template.splitlines() if line.strip()}


def is_empty_summary(text: str, templates: tuple[str, ...] = ()) -> bool:
    """True when `text` holds nothing beyond a template: no line of real notes.

    A line counts as template when it is blank, a heading, an italic line right under a
    heading (a section description), or any line of one of the given templates (a user
    template may carry other boilerplate).
    """
    skeleton: set[str] = set()
    for template in (builtin_template(), *templates):
        skeleton |= _skeleton_lines(template)
    after_heading = False
    # A byte order mark (Notepad saves one) made the first heading no heading: template-only
    # notes passed for notes, and compact replaced the transcript with an empty template.
    for line in text.removeprefix(BOM).splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if _HEADING.match(stripped):
            after_heading = True
            continue
        # An italic line right under a heading is that section's description, not a note.
        if stripped in skeleton or (after_heading and _ITALIC.match(stripped)):
            after_heading = False
            continue
        return False
    return True


def headings(text: str) -> list[str]:
    """The heading lines of `text` outside fenced code (a `# comment` in a shell snippet is
    none), each stripped, in order."""
    lines = text.removeprefix(BOM).splitlines()
    return [
        line.strip()
        for line, fenced in zip(lines, in_fenced_code(lines), strict=True)
        if not fenced and _HEADING.match(line.strip())
    ]


def lost_headings(template: str, before: str, after: str) -> list[str]:
    """The template's section headings that `before` has and `after` no longer has, in order.
    Only the template's: a heading the user took out stays out, and one the agent added under
    a section (a subheading of the Worklog) may go when it condenses."""
    kept = set(headings(after))
    sections = set(headings(template))
    return [h for h in dict.fromkeys(headings(before)) if h in sections and h not in kept]
