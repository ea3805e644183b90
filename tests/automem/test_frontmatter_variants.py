"""Memory files as people and other tools write them: a name or description YAML 1.1 would
type (a number, a date, `no`) is the text written, as Claude Code (YAML 1.2) reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.automem import memfile
from tests.conftest import DaemonHandle


@pytest.mark.parametrize(
    ("name", "description"),
    [
        ("2024", "3.10"),
        ("2024-01-02", "no"),
        ("yes", "2024-01-02 10:11:12"),
        ("0x1F", "1e3"),
        ("true", "on"),
    ],
)
def test_typed_looking_names_and_descriptions_are_text(name: str, description: str) -> None:
    text = f"---\nname: {name}\ndescription: {description}\ntype: project\n---\nbody\n"
    parsed = memfile.parse_memory(text, "fallback")
    assert (parsed.name, parsed.description, parsed.type, parsed.problem) == (
        name,
        description,
        "project",
        None,
    )
    assert memfile.load_frontmatter(text).metadata["name"] == name


def test_other_keys_keep_their_yaml_types() -> None:
    meta = memfile.load_frontmatter(
        "---\nname: 2024\ndescription: d\ntype: user\ncount: 3\nwhen: 2024-01-02\n---\n"
    ).metadata
    assert meta["count"] == 3
    assert str(meta["when"]) == "2024-01-02"
    assert memfile.parse_memory("---\nname: ~\ntype: user\n---\nb", "f").name == "f"


async def test_a_memory_named_by_a_number_is_listed_and_updated_by_its_name(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    memdir.mkdir(parents=True)
    path = memdir / "project_2024.md"
    path.write_text("---\nname: 2024\ndescription: 3.10\ntype: project\n---\nPython 3.10.\n")
    listed = await daemon.call("memory.list", cwd=str(project))
    (memory,) = listed["memories"]
    # Before: name "project_2024" (the file's), description "3.1", "missing name; …".
    assert (memory["name"], memory["description"], memory["problem"]) == ("2024", "3.10", None)
    res = await daemon.call(
        "memory.write",
        cwd=str(project),
        type="project",
        name="2024",
        description="3.10",
        body="Python 3.10, still.",
    )
    assert res["path"] == str(path)  # before: a second file, project_2024_2.md
    assert sorted(p.name for p in memdir.glob("*.md")) == ["MEMORY.md", "project_2024.md"]


@pytest.mark.parametrize(
    "header",
    [
        "name:\tTabbed\ndescription:\ttab separated\ntype:\tproject\n",
        "name:  \tTabbed\ndescription: tab\tseparated\ntype: project\ntags:\n  -\ta\n",
    ],
)
def test_a_tab_after_the_colon_is_a_separator(header: str) -> None:
    parsed = memfile.parse_memory(f"---\n{header}---\nbody\n", "fallback")
    # Before: "broken frontmatter: ScannerError", the file's stem as its name, no type.
    assert (parsed.name, parsed.description, parsed.type, parsed.problem) == (
        "Tabbed",
        "tab separated",
        "project",
        None,
    )


def test_a_tab_in_a_quoted_or_block_value_is_kept() -> None:
    meta = memfile.load_frontmatter(
        '---\nname: "a\tb"\ndescription: |\n  c\td\ntype: user\n---\n'
    ).metadata
    assert (meta["name"], meta["description"]) == ("a\tb", "c\td\n")


async def test_a_tabbed_memory_is_listed_whole_and_updated_in_place(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    memdir.mkdir(parents=True)
    path = memdir / "project_tabbed.md"
    path.write_text("---\nname:\tTabbed\ndescription:\tx\ntype:\tproject\nowner:\tdana\n---\nb\n")
    (memory,) = (await daemon.call("memory.list", cwd=str(project)))["memories"]
    assert (memory["name"], memory["type"], memory["problem"]) == ("Tabbed", "project", None)
    res = await daemon.call(
        "memory.write", cwd=str(project), type="project", name="Tabbed", description="y", body="c"
    )
    assert res["path"] == str(path)
    assert "owner:\tdana\n" in path.read_text()  # the user's line, as written
