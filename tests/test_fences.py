"""CommonMark's fenced code blocks as `memoryd/fences.py` finds them (the MEMORY.md index,
MagicDocs headers and recall's pasted lines share it)."""

from __future__ import annotations

import pytest

from memoryd.fences import in_fenced_code


@pytest.mark.parametrize(
    ("text", "fenced"),
    [
        ("a\n```\nb\n```\nc", [False, True, True, True, False]),
        ("   ```\nb\n   ```", [True, True, True]),  # three spaces: still a fence
        ("    ```\nb", [False, False]),  # four: an indented code line, no fence
        ("\t```\nb", [False, False]),  # a tab is four columns
        ("```x``` text\nb", [False, False]),  # a code span, no fence
        ("~~~\n```\n~~~\nc", [True, True, True, False]),  # closed by its own kind only
        ("````\n```\n````\nc", [True, True, True, False]),  # and at least as long
        ("```\nb", [True, True]),  # unclosed: to the end
    ],
)
def test_which_lines_are_in_a_fence(text: str, fenced: list[bool]) -> None:
    assert list(in_fenced_code(text.split("\n"))) == fenced
