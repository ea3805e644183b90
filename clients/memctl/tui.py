"""A small full-screen picker on curses: arrow keys, type-to-filter, live status lines.

`pick(stdscr, …)` runs inside `curses.wrapper`; it returns the chosen item or None (Esc on an
empty filter, Ctrl-C, Ctrl-D). Imported only by the interactive memory UI, so plain memctl
commands never pay for curses.
"""

from __future__ import annotations

import contextlib
import curses
import unicodedata
from collections.abc import Callable, Sequence

from memctl.memory_menu import Item, filter_items
from memctl.output import one_line

HELP = "↑/↓ move · Enter choose · type to filter · Esc back"
# The menu's own symbols where the terminal's encoding lacks them (an ASCII locale, LC_ALL=C);
# any other character it lacks is shown as an escape (`é` as `\xe9`), as the plain menu
# prints it: curses drew é as a raw Latin-1 byte there and dropped ↑, ↳ and CJK without a word.
_ASCII_SYMBOLS = str.maketrans({"↑": "Up", "↓": "Down", "·": "-", "↳": "`-", "—": "-", "…": "..."})
ESC = 27
CTRL_C = 3
CTRL_D = 4
CTRL_U = 21
BACKSPACES = {curses.KEY_BACKSPACE, 127, 8}
ENTERS = {curses.KEY_ENTER, 10, 13}


def _put(stdscr: curses.window, row: int, col: int, text: str, attr: int = 0) -> None:
    height, width = stdscr.getmaxyx()
    if row >= height or col >= width - 1:
        return
    shown = shown_in(one_line(text), stdscr.encoding)
    # Writing into the last cell of the screen raises although the text is drawn.
    with contextlib.suppress(curses.error):
        stdscr.addstr(row, col, fit(shown, width - 1 - col), attr)


def shown_in(text: str, encoding: str) -> str:
    """`text` as a terminal of `encoding` can show it (itself under UTF-8)."""
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return text.translate(_ASCII_SYMBOLS).encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:  # an encoding Python does not know: curses does its best
        pass
    return text


def cells(char: str) -> int:
    """Terminal cells one character takes: 2 for wide (CJK, most emoji), 0 for combining marks
    and format characters (a zero-width joiner, a variation selector), else 1."""
    if unicodedata.category(char) in ("Mn", "Me") or (
        unicodedata.category(char) == "Cf" and char != "\xad"
    ):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def fit(text: str, width: int) -> str:
    """The longest start of `text` that takes at most `width` cells. Cutting by characters
    (addnstr) let a CJK description run twice the screen width, into the next row."""
    used = 0
    for index, char in enumerate(text):
        used += cells(char)
        if used > width:
            return text[:index]
    return text


class Picker:
    """State of one picker screen; `handle(key)` is separate from drawing so tests can drive it."""

    def __init__(self, items: Sequence[Item], query: str = "") -> None:
        self.items = list(items)
        self.query = query
        self.cursor = 0  # index into `visible`
        self.top = 0
        self.refilter()

    def refilter(self) -> None:
        self.visible = filter_items(self.items, self.query)
        self.cursor = self._next_selectable(0, 1)

    def _next_selectable(self, start: int, step: int) -> int:
        index = start
        while 0 <= index < len(self.visible):
            if self.visible[index].selectable:
                return index
            index += step
        # Nothing selectable in that direction: stay where we were (or on the first one).
        if 0 <= self.cursor < len(self.visible) and self.visible[self.cursor].selectable:
            return self.cursor
        return next((i for i, item in enumerate(self.visible) if item.selectable), -1)

    def replace(self, items: Sequence[Item]) -> None:
        """Show `items` instead (the list loaded again), the filter kept and the cursor on the
        item it was on when that is still listed, else near where it was."""
        was = self.current()
        self.items = list(items)
        self.visible = filter_items(self.items, self.query)
        key = None if was is None else (was.action, was.target)
        for index, item in enumerate(self.visible):
            if item.selectable and (item.action, item.target) == key:
                self.cursor = index
                return
        self.cursor = self._next_selectable(max(min(self.cursor, len(self.visible) - 1), 0), 1)

    def current(self) -> Item | None:
        return self.visible[self.cursor] if 0 <= self.cursor < len(self.visible) else None

    def move(self, step: int) -> None:
        if self.cursor < 0:
            return
        target = min(max(self.cursor + step, 0), len(self.visible) - 1)
        direction = 1 if step > 0 else -1
        found = self._next_selectable(target, direction)
        if found == self.cursor and abs(step) > 1:
            found = self._next_selectable(target, -direction)
        self.cursor = found

    def handle(self, key: int | str) -> tuple[bool, Item | None]:
        """Apply one key. Returns (done, choice)."""
        if key in ENTERS or key == "\n" or key == "\r":
            choice = self.current()
            return (choice is not None, choice)
        if key in (ESC, "\x1b"):
            if self.query:
                self.query = ""
                self.refilter()
                return (False, None)
            return (True, None)
        if key in (CTRL_C, CTRL_D, "\x03", "\x04"):
            return (True, None)
        if key in (CTRL_U, "\x15"):
            self.query = ""
            self.refilter()
        elif key in BACKSPACES or key in ("\x7f", "\x08"):
            self.query = self.query[:-1]
            self.refilter()
        elif key == curses.KEY_UP:
            self.move(-1)
        elif key == curses.KEY_DOWN:
            self.move(1)
        elif key == curses.KEY_PPAGE:
            self.move(-10)
        elif key == curses.KEY_NPAGE:
            self.move(10)
        elif key == curses.KEY_HOME:
            self.cursor = self._next_selectable(0, 1)
        elif key == curses.KEY_END:
            self.cursor = self._next_selectable(len(self.visible) - 1, -1)
        elif isinstance(key, str) and key.isprintable():
            self.query += key
            self.refilter()
        return (False, None)


def pick(
    stdscr: curses.window,
    title: str,
    items: Sequence[Item],
    *,
    status: list[str],
    poll: Callable[[], list[str]] | None = None,
    reload: Callable[[], Sequence[Item] | None] | None = None,
) -> Item | None:
    """Run the picker until a choice or Esc. `status` lines show at the bottom (newest last).
    Between keys `poll` adds status lines and `reload` may give the items loaded again, shown
    at once (a choice always picks what the screen showed: the screen is redrawn before the
    next key is read)."""
    curses.curs_set(0)
    stdscr.keypad(True)
    stdscr.timeout(200)
    picker = Picker(items)
    while True:
        _draw(stdscr, title, picker, status)
        try:
            key: int | str = stdscr.get_wch()
        except curses.error:
            key = -1
        except KeyboardInterrupt:
            return None
        if key == -1 or key == curses.KEY_RESIZE:
            if poll is not None:
                status.extend(poll())
                keep_last(status)
            fresh = reload() if reload is not None else None
            if fresh is not None:
                picker.replace(fresh)
            continue
        done, choice = picker.handle(key)
        if done:
            return choice


def _draw(stdscr: curses.window, title: str, picker: Picker, status: list[str]) -> None:
    height, width = stdscr.getmaxyx()
    stdscr.erase()
    _put(stdscr, 0, 0, title, curses.A_BOLD)
    _put(stdscr, 1, 0, f"Filter: {picker.query}" if picker.query else "Type to filter")
    shown_status = status[-3:]
    list_top = 3
    list_height = max(1, height - list_top - len(shown_status) - 2)
    if picker.cursor >= 0:
        if picker.cursor < picker.top:
            picker.top = picker.cursor
        elif picker.cursor >= picker.top + list_height:
            picker.top = picker.cursor - list_height + 1
    if not picker.visible:
        _put(stdscr, list_top, 2, "(nothing matches)")
    for row, item in enumerate(picker.visible[picker.top : picker.top + list_height]):
        index = picker.top + row
        if not item.selectable:
            _put(stdscr, list_top + row, 0, item.text(), curses.A_BOLD | curses.A_UNDERLINE)
        elif index == picker.cursor:
            # The marker takes the place of indentation, never of text (a row of indent 0).
            text = item.text()
            text = text[2:] if text.startswith("  ") else text
            _put(stdscr, list_top + row, 0, "> " + text, curses.A_REVERSE)
        else:
            _put(stdscr, list_top + row, 0, item.text())
    for offset, line in enumerate(shown_status):
        _put(stdscr, height - 1 - len(shown_status) + offset, 0, line, curses.A_DIM)
    _put(stdscr, height - 1, 0, HELP if width > len(HELP) else "Esc back", curses.A_DIM)
    stdscr.refresh()


# Status lines kept: the screen shows the last 3; a long session's notifications (or a flood
# of them) grew the list for as long as the menu was open.
STATUS_KEPT = 100


def keep_last(status: list[str]) -> None:
    """Drop all but the newest STATUS_KEPT lines of `status`, in place."""
    del status[:-STATUS_KEPT]
