"""Index lines as people and agents write them: other list markers, a bold link, a `:` before
the hook, parentheses in a file name, a link in prose, an example in a code block. Each is read
as the entry (or the mention) it is: no second line is appended for its file, a delete takes
its line out, and an example in a fence is never taken for an entry."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from memoryd.automem import index as ix
from tests.automem.conftest import memory_text
from tests.conftest import DaemonHandle


@pytest.mark.parametrize(
    ("line", "file", "hook"),
    [
        ("- [Colon](colon.md): the hook", "colon.md", "the hook"),
        ("- [A1](a(1).md) — paren", "a(1).md", "paren"),
        ("- [N2](my note (2).md) — spaced", "my note (2).md", "spaced"),
        ("- **[Bold](bold.md)** — bold", "bold.md", "bold"),
        ("1. [Num](num.md) — numbered", "num.md", "numbered"),
        ("12) [Num](num.md)", "num.md", ""),
        ("+ [Plus](plus.md) - plus", "plus.md", "plus"),
        ("* _[Em](em.md)_ – em", "em.md", "em"),
    ],
)
def test_entry_forms_are_read(line: str, file: str, hook: str) -> None:
    (entry,) = ix.parse_index(line)
    assert (entry.file, entry.hook) == (file, hook)
    assert ix.unlisted(line, [file]) == []
    assert ix.remove(f"# Index\n{line}\n", file) == "# Index\n"
    assert ix.upsert(line, file, "- [X](x.md) — new") == "- [X](x.md) — new\n"


def test_a_file_linked_in_prose_is_no_orphan() -> None:
    text = "# Notes\n\nSee [debugging](debugging.md) and [the API notes](api%20notes.md).\n"
    assert ix.unlisted(text, ["debugging.md", "api notes.md", "other.md"]) == ["other.md"]
    assert ix.parse_index(text) == []  # prose, not entries: never dropped as dangling
    files = {"debugging.md": ("D", "d"), "api notes.md": ("A", "a")}
    assert ix.reconcile(text, files) == text


def test_an_example_in_a_code_block_is_no_entry() -> None:
    text = (
        "Format:\n\n```markdown\n- [Title](file.md) — one-line hook\n```\n\n"
        "~~~~\n- [T](t.md)\n~~~\n- [Still code](c.md)\n~~~~\n"
        "- [Real](real.md) — real\n"
    )
    assert [e.file for e in ix.parse_index(text)] == ["real.md"]
    # A write repairs dangling lines: the examples are no lines of the index, they stay.
    assert (
        ix.apply(text, {"new.md": "- [N](new.md)"}, present={"real.md"}) == f"{text}- [N](new.md)\n"
    )
    assert ix.unlisted(text, ["file.md", "real.md"]) == ["file.md"]
    # "```x```" on one line is a code span, not a fence.
    assert [e.file for e in ix.parse_index("```x```\n- [A](a.md)\n")] == ["a.md"]


INDEX = """# Index

- [Colon](colon.md): hook colon
- [A1](a(1).md) — paren
- **[Bold](bold.md)** — bold
1. [Num](num.md) — numbered
See also [notes](notes.md).
"""


async def _quiet(check: Any, seconds: float = 0.5) -> None:
    """`check` holds for `seconds` (the first load's orphan pass runs in the background)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert check()
        await asyncio.sleep(0.02)


async def test_a_hand_written_index_gets_no_second_lines(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    memdir.mkdir(parents=True)
    for file in ("colon.md", "a(1).md", "bold.md", "num.md", "notes.md"):
        (memdir / file).write_text(memory_text(file[:-3], "d", "user", "body"))
    (memdir / "MEMORY.md").write_text(INDEX)
    listed = await daemon.call("memory.list", cwd=str(project))
    # Before: colon.md, a(1).md, bold.md, num.md and notes.md were orphans, and the first
    # load appended a generated line for each.
    assert listed["index"]["orphans"] == []
    await _quiet(lambda: (memdir / "MEMORY.md").read_text() == INDEX)
    await daemon.call("memory.delete", cwd=str(project), path="colon.md")
    text = (memdir / "MEMORY.md").read_text()
    assert "colon.md" not in text  # before: the user's line stayed, dangling
    await daemon.call(
        "memory.write",
        cwd=str(project),
        type="user",
        name="Num",
        description="new",
        body="b",
        file="num.md",
    )
    text = (memdir / "MEMORY.md").read_text()
    assert text.count("num.md") == 1
    assert "- [Num](num.md) — new" in text
