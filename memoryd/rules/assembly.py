"""Assembling loaded files into the one text block a session starts with.

The block is the first user message, not the system prompt: instruction files change
between sessions and the system prompt is what the provider's prompt cache keys on.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

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


def _heading(file: LoadedFile) -> str:
    origin = _ORIGIN[file.type]
    if file.parent is not None:
        origin += f", included from {file.parent}"
    if file.globs:
        origin += f"; applies to files matching {', '.join(file.globs)}"
    return f"## {file.path} ({origin})"


def render_files(files: Sequence[LoadedFile]) -> list[str]:
    """One section per file with content; an empty file adds nothing to the prompt."""
    return [f"{_heading(f)}\n\n{f.content.strip()}" for f in files if f.content.strip()]


def render_entries(entries: Sequence[IndexEntry]) -> list[str]:
    sections = []
    for entry in entries:
        if not entry.content.strip():
            continue
        note = ", truncated" if entry.truncated else ""
        sections.append(f"## {entry.path} ({_ORIGIN[entry.type]}{note})\n\n{entry.content.strip()}")
    return sections


def assemble(file_sections: Sequence[str], entry_sections: Sequence[str] = ()) -> str:
    """The preamble and every section; empty when there is nothing to say."""
    sections = [*file_sections, *entry_sections]
    if not sections:
        return ""
    return "\n\n".join([PREAMBLE, *sections]) + "\n"
