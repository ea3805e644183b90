"""Which lines of a Markdown text are in a fenced code block (CommonMark's fence rule): an
example of a format shown there (an index line, a MagicDocs header) is not that format."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

# Up to three spaces before it: a tab, or a fourth space, makes an indented code line.
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def in_fenced_code(lines: Iterable[str]) -> Iterator[bool]:
    """Per line, whether it is part of a fenced code block, its fences included."""
    fence = ""
    for line in lines:
        opened = _FENCE.match(line) if "`" in line or "~" in line else None
        run, rest = (opened.group(1), line[opened.end() :]) if opened is not None else ("", "")
        if fence:
            # Closed by a run of the same character, at least as long, with nothing after it.
            if run[:1] == fence[:1] and len(run) >= len(fence) and not rest.strip():
                fence = ""
            yield True
        elif run and not (run[0] == "`" and "`" in rest):  # "```x```" is a code span
            fence = run
            yield True
        else:
            yield False
