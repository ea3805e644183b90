"""What the full-screen picker draws, on a window that records each row (no terminal needed)."""

from __future__ import annotations

import unicodedata

from memctl import memory_menu, tui
from memctl.memory_menu import Item
from memctl.tui import Picker


class Window:
    """The part of a curses window `tui._draw` uses: each row's text as it was written."""

    def __init__(self, height: int, width: int, encoding: str = "utf-8") -> None:
        self.height, self.width = height, width
        self.encoding = encoding  # the terminal's, as curses has it from the locale
        self.rows: dict[int, str] = {}

    def getmaxyx(self) -> tuple[int, int]:
        return self.height, self.width

    def erase(self) -> None:
        self.rows.clear()

    def addstr(self, row: int, col: int, text: str, attr: int = 0) -> None:
        self.rows[row] = " " * col + text

    def addnstr(self, row: int, col: int, text: str, n: int, attr: int = 0) -> None:
        self.addstr(row, col, text[:n], attr)

    def refresh(self) -> None:
        pass


def width_of(text: str) -> int:
    # Only the text of these tests: CJK is 2 cells, everything else 1.
    return sum(2 if unicodedata.east_asian_width(c) == "W" else 1 for c in text)


def draw(items: list[Item], height: int = 12, width: int = 40, encoding: str = "utf-8") -> Window:
    window = Window(height, width, encoding)
    tui._draw(window, "title", Picker(items), [])  # type: ignore[arg-type]
    return window


def test_cells() -> None:
    assert [tui.cells(c) for c in "a部😀é\u0301\u200d\ufe0f"] == [1, 2, 2, 1, 0, 0, 0]
    assert tui.fit("部署日程", 5) == "部署"
    assert tui.fit("abc", 5) == "abc"
    assert tui.fit("e\u0301x", 1) == "e\u0301"


def test_wide_text_is_cut_by_cells_not_characters() -> None:
    # Found by a bug hunt: rows were cut to `width - 1` characters, so a CJK description took
    # up to twice the screen width, wrapped, and its end stayed on the next memory's row.
    description = "部署在每周四进行，质量保证签字之后才能合并，冻结期间不允许任何合并请求"
    items = [
        Item("Memories", "header"),
        Item("project  now  部署日程", "memory", "/m/a.md", f"— {description}", indent=1),
        Item("user  now  bravo", "memory", "/m/b.md", "— plain one", indent=1),
    ]
    window = draw(items)
    for text in window.rows.values():
        assert width_of(text) <= window.width - 1, text
    assert any(text.endswith("bravo  — plain one") for text in window.rows.values())


def test_the_highlighted_row_keeps_its_text() -> None:
    # Found by a bug hunt: the highlighted row was "> " + text[2:], which ate the first two
    # characters of a row of indent 0: a version kept "now ago" showed as "w ago".
    versions = memory_menu.version_items(
        {"versions": [{"version": "v2", "mtime": 100.0}, {"version": "v1", "mtime": 0.0}]},
        100.0,
    )
    bare = Item("now ago    v0", "version", "v0")  # indent 0, as history rows had
    window = draw([Item("Versions", "header"), bare, *versions])
    assert window.rows[4] == "> now ago    v0"
    window = draw([Item("Versions", "header"), *versions])
    assert window.rows[4] == ">   now ago    v2"
    assert window.rows[5] == "    1m ago     v1"


def test_a_list_loaded_again_keeps_the_filter_and_the_cursors_item() -> None:
    a = Item("a.md", "edit", "/p/a.md", indent=1)
    b = Item("b.md", "edit", "/p/b.md", indent=1)
    c = Item("c.md", "edit", "/p/c.md", indent=1)
    picker = Picker([Item("Files", "header"), a, b, c], query=".md")
    picker.move(1)
    assert picker.current() == b
    new = Item("new.md", "edit", "/p/new.md", indent=1)
    picker.replace([Item("Files", "header"), new, a, b, c])
    assert picker.query == ".md"
    assert picker.current() == b  # not whatever moved into its row
    picker.replace([Item("Files", "header"), a, c])  # b is gone: a row near where it was
    assert picker.current() == c
    picker.replace([Item("Files", "header")])
    assert picker.current() is None


def test_status_lines_are_kept_bounded() -> None:
    status = [f"line {i}" for i in range(tui.STATUS_KEPT + 50)]
    tui.keep_last(status)
    assert status == [f"line {i}" for i in range(50, tui.STATUS_KEPT + 50)]


def test_what_an_ascii_terminal_cannot_show_is_escaped_and_cut_as_shown() -> None:
    # Found in session 24: under LC_ALL=C curses drew "é" as a raw Latin-1 byte and dropped
    # "↑", "↳" and CJK without a word; they are escapes (the menu's own symbols ASCII) now, and
    # the row is cut to the screen as escaped.
    items = [
        Item("Memories", "header"),
        Item("user  now  café 部署日程部署日程部署日程", "memory", "/m/a.md", "— x", indent=1),
        Item("style.md", "edit", "/p/style.md", "(@-import)", indent=2),
    ]
    window = draw(items, width=60, encoding="ascii")
    rows = list(window.rows.values())
    assert all(text.isascii() for text in rows), rows
    assert any("caf\\xe9 \\u90e8" in text for text in rows), rows
    assert all(len(text) <= window.width - 1 for text in rows), rows
    assert "        `- style.md  (@-import)" in rows
    assert rows[-1] == "Up/Down move - Enter choose - type to filter - Esc back"
