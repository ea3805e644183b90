"""The memory UI's menu as data, and the picker's key handling (no terminal needed)."""

from __future__ import annotations

import curses
from pathlib import Path

from memctl import memory_menu
from memctl.memory_menu import Item
from memctl.tui import Picker

FILES = [
    {"path": "/home/u/.claude/CLAUDE.md", "type": "User", "parent": None},
    {"path": "/home/u/notes/style.md", "type": "User", "parent": "/home/u/.claude/CLAUDE.md"},
    {"path": "/home/u/notes/deeper.md", "type": "User", "parent": "/home/u/notes/style.md"},
    {"path": "/p/CLAUDE.md", "type": "Project", "parent": None},
    {"path": "/p/.claude/rules/api.md", "type": "Project", "parent": None, "globs": ["src/api/**"]},
    {"path": "/etc/claude-code/CLAUDE.md", "type": "Managed", "parent": None},
    {"path": "/p/CLAUDE.local.md", "type": "Local", "parent": None},
]
NOW = 1_000_000.0
LISTING = {
    "instruction_files": FILES,
    "memories": [
        {
            "path": "/m/old.md",
            "name": "Old one",
            "description": "aged",
            "type": "project",
            "mtime": NOW - 3 * 86400,
            "team": False,
        },
        {
            "path": "/m/team/t.md",
            "name": "Shared",
            "description": "for all",
            "type": "reference",
            "mtime": NOW - 120,
            "team": True,
        },
    ],
    "memory_dir": "/m",
    "team_dir": "/m/team",
}
SETTINGS = {
    "settings": {"autoMemoryEnabled": True, "autoDreamEnabled": False},
    "sources": {"autoMemoryEnabled": "user"},
}


def build(tmp_path: Path) -> list[Item]:
    user = tmp_path / "CLAUDE.md"
    user.write_text("x")
    return memory_menu.build_items(
        LISTING,
        SETTINGS,
        user_memory=user,
        project_memory=tmp_path / "missing" / "CLAUDE.md",
        now=NOW,
        home="/home/u",
        cwd="/p",
    )


def test_groups_in_load_order_with_imports_indented(tmp_path: Path) -> None:
    items = build(tmp_path)
    headers = [i.label for i in items if not i.selectable]
    assert headers == [
        "Memory files",
        "Managed (policy) instructions",
        "User instructions",
        "Project instructions",
        "Local instructions",
        "Auto memory",
        "Memories (2)",
    ]
    by_target = {i.target: i for i in items}
    assert by_target["/home/u/.claude/CLAUDE.md"].indent == 1
    assert by_target["/home/u/notes/style.md"].indent == 2
    assert by_target["/home/u/notes/deeper.md"].indent == 3
    assert by_target["/home/u/notes/style.md"].text() == "        ↳ ~/notes/style.md  (@-import)"
    assert (
        by_target["/p/.claude/rules/api.md"].text()
        == "    ./.claude/rules/api.md  paths: src/api/**"
    )
    # The import stays right under its parent, inside the parent's group.
    targets = [i.target for i in items]
    assert targets.index("/home/u/notes/style.md") == targets.index("/home/u/.claude/CLAUDE.md") + 1


def test_user_and_project_memory_always_offered(tmp_path: Path) -> None:
    items = build(tmp_path)
    first = [i for i in items if i.action == "edit"][:2]
    assert [i.label for i in first] == ["User memory", "Project memory"]
    assert "(missing" not in first[0].detail
    # Nothing was created by listing it: the menu must not claim otherwise.
    assert first[1].detail.endswith("(missing: choosing it creates it empty)")
    assert "created empty)" not in " ".join(i.detail for i in items)


def test_toggles_folders_and_memories(tmp_path: Path) -> None:
    items = build(tmp_path)
    toggles = [i for i in items if i.action == "toggle"]
    assert [(i.target, i.value) for i in toggles] == [
        ("autoMemoryEnabled", True),
        ("autoDreamEnabled", False),
    ]
    assert toggles[0].text() == "    [x] Auto memory  (from user)"
    assert toggles[1].body().startswith("[ ] Auto dream")
    assert [(i.label, i.target) for i in items if i.action == "open_dir"] == [
        ("Open auto memory folder", "/m"),
        ("Open team folder", "/m/team"),
    ]
    memories = [i for i in items if i.action == "memory"]
    assert [i.target for i in memories] == ["/m/team/t.md", "/m/old.md"]  # newest first
    assert memories[0].label.split() == ["team/reference", "2m", "Shared"]
    assert memories[1].label.split() == ["project", "3d", "Old", "one"]
    assert memories[1].detail == "— aged"


def test_age() -> None:
    assert memory_menu.age(NOW, NOW) == "now"
    assert memory_menu.age(NOW - 90, NOW) == "1m"
    assert memory_menu.age(NOW - 5 * 3600, NOW) == "5h"
    assert memory_menu.age(NOW - 15 * 86400, NOW) == "2w"
    assert memory_menu.age(None, NOW) == "?"
    assert memory_menu.age(NOW + 50, NOW) == "now"


def test_filter_keeps_headers_of_matches(tmp_path: Path) -> None:
    items = build(tmp_path)
    shown = memory_menu.filter_items(items, "DREAM")
    assert [i.label for i in shown] == ["Auto memory", "Auto dream (background consolidation)"]
    shown = memory_menu.filter_items(items, "project mem")
    assert [i.label for i in shown] == ["Memory files", "Project memory"]
    assert memory_menu.filter_items(items, "zzz") == []
    assert memory_menu.filter_items(items, "  ") == items


def test_numbered_fallback(tmp_path: Path) -> None:
    text, choices = memory_menu.numbered(build(tmp_path))
    lines = text.splitlines()
    assert lines[0] == "Memory files"
    assert lines[1].startswith("  1. User memory")
    assert choices[2].label == "Project memory"
    assert all(item.selectable for item in choices.values())
    assert any(line.startswith("  5.     ↳ ~/notes/style.md") for line in lines)


def test_numbered_rows_stay_one_line_each(tmp_path: Path) -> None:
    # Found by a bug hunt: a teammate's memory named "alpha\n  9. User memory …" printed a
    # line of its own that the numbered menu's reader took for entry 9.
    forged = "alpha\n  9. User memory  ~/.claude/CLAUDE.md\u2028x"
    listing = {
        "memories": [
            {"path": "/m/x.md", "name": forged, "description": "d\r\te", "type": "user"},
        ]
    }
    items = memory_menu.build_items(
        listing, {}, user_memory=tmp_path / "u.md", project_memory=tmp_path / "p.md", now=NOW
    )
    text, _ = memory_menu.numbered(items)
    assert len(text.splitlines()) == len(items)
    assert not any(line.startswith("  9. User memory") for line in text.splitlines())
    row = next(line for line in text.splitlines() if "alpha" in line)
    assert row.endswith("alpha\\n  9. User memory  ~/.claude/CLAUDE.md\\u2028x  — d\\r\\te")


def test_a_memory_with_a_problem_says_it(tmp_path: Path) -> None:
    # Found by a bug hunt (session 19): a file without frontmatter or with an unknown type
    # was a row of "?" that did not say why; Neovim and VS Code show the daemon's problem.
    listing = {
        "memories": [
            {"path": "/m/nofm.md", "name": "nofm", "type": None, "problem": "no frontmatter"},
            {"path": "/m/ok.md", "name": "ok", "description": "fine", "type": "user"},
        ]
    }
    items = memory_menu.build_items(
        listing, {}, user_memory=tmp_path / "u.md", project_memory=tmp_path / "p.md", now=NOW
    )
    rows = {i.target: i for i in items if i.action == "memory"}
    assert rows["/m/nofm.md"].label.split()[0] == "?"
    assert rows["/m/nofm.md"].detail == "—   ! no frontmatter"
    assert rows["/m/ok.md"].detail == "— fine"
    assert memory_menu.filter_items(items, "frontmatter")[1:] == [rows["/m/nofm.md"]]


def test_malformed_listing_does_not_crash(tmp_path: Path) -> None:
    items = memory_menu.build_items(
        {
            "instruction_files": [None, {"path": 3}, {"path": "/a.md", "parent": "/gone.md"}],
            "memories": "x",
        },
        {"settings": "nope"},
        user_memory=tmp_path / "u.md",
        project_memory=tmp_path / "p.md",
        now=NOW,
    )
    assert any(i.target == "/a.md" and i.indent == 2 for i in items)
    assert [i.value for i in items if i.action == "toggle"] == [True, False]


def test_version_items() -> None:
    history = {
        "versions": [
            {"version": "v2", "mtime": NOW - 7200, "size": 12},
            {"id": "v1"},
            {"size": 3},
            "bad",
        ]
    }
    items = memory_menu.version_items(history, NOW)
    assert [i.target for i in items] == ["v2", "v1"]
    assert items[0].label.split() == ["2h", "ago", "v2"]
    assert items[0].detail == "12 bytes"
    assert memory_menu.version_items({}, NOW) == []


def test_picker_keys(tmp_path: Path) -> None:
    picker = Picker(build(tmp_path))
    assert picker.current() is not None
    assert picker.current().label == "User memory"
    picker.handle(curses.KEY_DOWN)
    assert picker.current().label == "Project memory"  # type: ignore[union-attr]
    picker.handle(curses.KEY_UP)
    picker.handle(curses.KEY_UP)  # stays on the first selectable line, never on a header
    assert picker.current().label == "User memory"  # type: ignore[union-attr]
    for char in "dream":
        picker.handle(char)
    assert picker.query == "dream"
    done, choice = picker.handle("\n")
    assert done
    assert choice is not None
    assert choice.target == "autoDreamEnabled"
    picker.handle(curses.KEY_BACKSPACE)
    assert picker.query == "drea"
    assert picker.handle("\x1b") == (False, None)  # Esc clears the filter first
    assert picker.query == ""
    picker.handle(curses.KEY_END)
    assert picker.current().action == "memory"  # type: ignore[union-attr]
    for char in "zzz":
        picker.handle(char)
    assert picker.handle("\n") == (False, None)  # nothing to choose
    picker.handle("\x15")
    assert picker.handle("\x1b") == (True, None)  # Esc on an empty filter leaves


def test_short_path_is_never_relative_to_the_root() -> None:
    # Found by a bug hunt (session 22): `memctl memory --cwd /` listed "./home/me/…".
    from memctl.memory_menu import short_path

    assert short_path("/home/me/.claude/CLAUDE.md", "/home/me", "/") == "~/.claude/CLAUDE.md"
    assert short_path("/etc/claude/CLAUDE.md", "/home/me", "//") == "/etc/claude/CLAUDE.md"
    assert short_path("/src/app/CLAUDE.md", "/home/me", "/src/app") == "./CLAUDE.md"
    assert short_path("/src/app/CLAUDE.md", "/home/me", "/src/app/") == "./CLAUDE.md"
