"""`memctl memory`: the memory UI.

Lists every instruction file in effect (grouped by type, @-imports under their parent), always
offers "User memory" and "Project memory" (created empty, exclusively, when missing), opens the
choice in `$VISUAL`/`$EDITOR` (a memory: a private copy, saved through the daemon by
`memory_edit.py`), opens the auto memory and team folders, toggles auto memory and
auto dream in user settings, lists auto memories with type, age and description, and shows a
memory's history with restore. Saved-memory notifications appear as they arrive, and the list
is loaded again (in the background) when the project's instruction files or memories change.

On a terminal it is a full-screen picker (curses: arrows, type-to-filter); otherwise a plain
numbered list read from stdin, where a number chooses and any other text filters.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memctl.output import EXIT_USAGE, client, emit, fail, one_line, printable
from memctl.project_dir import project_cwd
from memoryd_client.paths import config_dir, os_path, protocol_path

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from memctl.memory_menu import Item

    # The main list loaded again, or None: its argument is how long to wait for a load under way.
    Reload = Callable[[float], Sequence[Item] | None]

# The menu, curses and shell helpers are imported inside the functions that use them:
# every memctl command imports this module to build its parser, and must start fast.

EVENTS = [
    "memory/saved",
    "team/synced",
    "team/secret_blocked",
    "team/conflict",
    "worker/error",
    "context/changed",  # the project's instruction files changed: the list is loaded again
]
# Events after which the main list is loaded again, when they are about this project.
LIST_CHANGED = ("context/changed", "memory/saved")
INVALID_PARAMS = -32602


def register(sub: Any) -> None:
    parser = sub.add_parser("memory", help="the memory UI: instruction files and auto memories")
    parser.add_argument("--cwd", type=Path, help="project directory (default: the current one)")
    parser.add_argument(
        "--list", action="store_true", help="print the numbered list and exit (no prompt)"
    )
    parser.add_argument(
        "--plain", action="store_true", help="numbered prompts even on a terminal (no curses)"
    )
    parser.set_defaults(func=run)


# -- the two front ends ------------------------------------------------------------------------


# A list being loaded again is waited for this long before a numbered prompt (the plain menu
# cannot redraw while it waits for a line); a slower one is shown at the prompt after.
PLAIN_RELOAD_WAIT_S = 5.0


class PlainUI:
    """Numbered lists on stdout, answers from stdin. A non-number filters the list."""

    def __init__(self, poll: Callable[[], list[str]]) -> None:
        self.poll = poll

    def _flush_status(self) -> None:
        for line in self.poll():
            print(one_line(f"* {line}"))

    def message(self, text: str) -> None:
        self._flush_status()
        print(one_line(text))

    def choose(
        self,
        title: str,
        items: Sequence[Item],
        reload: Reload | None = None,
    ) -> Item | None:
        """A choice from `items`; `reload` may give them loaded again, shown at the next
        prompt (a number always chooses from the list printed before it)."""
        from memctl import memory_menu

        query = ""
        while True:
            self._flush_status()
            fresh = reload(PLAIN_RELOAD_WAIT_S) if reload is not None else None
            if fresh is not None:
                items = fresh
            shown = memory_menu.filter_items(items, query)
            text, choices = memory_menu.numbered(shown)
            print("\n" + one_line(title + (f"  [filter: {query}]" if query else "")))
            print(printable(text) if choices else "  (nothing matches)")
            sys.stdout.write("Number to choose, text to filter, Enter to go back: ")
            sys.stdout.flush()
            line = _read_line()
            if not line:
                print()
                return None
            answer = line.strip()
            if not answer:
                if query:
                    query = ""
                    continue
                return None
            if answer.isdigit():
                # isdigit() is true for "²" and for 5000 digits, which int() refuses.
                number = int(answer) if answer.isdecimal() and len(answer) < 10 else None
                if number is not None and number in choices:
                    return choices[number]
                echo = answer if len(answer) <= 20 else answer[:20] + "…"
                print(f"{one_line(echo)} is not on the list")
                continue
            query = answer

    def confirm(self, question: str) -> bool:
        sys.stdout.write(f"{one_line(question)} [y/N] ")
        sys.stdout.flush()
        return _read_line().strip().lower() in ("y", "yes")


# An answer longer than this is none a person typed: `< /dev/zero`, a line that never ends,
# was read whole into memory until a MemoryError traceback.
MAX_ANSWER_CHARS = 65_536


def _read_line() -> str:
    """A line of the plain menu's standard input; "" (end of input) when it cannot be read: one
    opened for writing only (`0>file`: EBADF) or a terminal gone (EIO) was a traceback; or when
    it is longer than MAX_ANSWER_CHARS (said, the rest of it left unread)."""
    try:
        line = sys.stdin.readline(MAX_ANSWER_CHARS + 1)
    except OSError:
        return ""
    if len(line) > MAX_ANSWER_CHARS and not line.endswith("\n"):
        print(f"\n(a line over {MAX_ANSWER_CHARS:,} characters: taken as the end of input)")
        return ""
    return line


class CursesUI:
    """Full-screen pickers; each menu is its own curses session, so editors run in between."""

    def __init__(self, poll: Callable[[], list[str]]) -> None:
        self.poll = poll
        self.status: list[str] = []
        self.plain: PlainUI | None = None  # set when the terminal cannot do curses
        os.environ.setdefault("ESCDELAY", "25")  # Esc answers at once, not after a second

    def message(self, text: str) -> None:
        if self.plain is not None:
            self.plain.message(text)
        else:
            self._keep([text])

    def _keep(self, lines: list[str]) -> None:
        from memctl import tui

        self.status.extend(lines)
        tui.keep_last(self.status)

    def choose(
        self,
        title: str,
        items: Sequence[Item],
        reload: Reload | None = None,
    ) -> Item | None:
        import curses

        from memctl import tui

        if self.plain is not None:
            return self.plain.choose(title, items, reload)
        self._keep(self.poll())
        try:
            result: Item | None = curses.wrapper(
                lambda stdscr: tui.pick(
                    stdscr,
                    title,
                    items,
                    status=self.status,
                    poll=self.poll,
                    # between keys: never waiting for a load under way
                    reload=None if reload is None else lambda: reload(0.0),
                )
            )
        except curses.error as exc:
            # An unknown $TERM or a terminal too small to start: the numbered menu still works.
            self.plain = PlainUI(self.poll)
            self.plain.message(f"(full-screen menu unavailable: {exc}; numbered menu instead)")
            for line in self.status:
                self.plain.message(line)
            return self.plain.choose(title, items, reload)
        return result

    def confirm(self, question: str) -> bool:
        from memctl.memory_menu import Item

        yes = Item("Yes", "command", "yes", indent=1)
        no = Item("No", "command", "no", indent=1)
        return self.choose(question, [Item(question, "header"), no, yes]) == yes


UI = PlainUI | CursesUI


# -- actions -----------------------------------------------------------------------------------


def project_root(cwd: Path, listing: dict[str, Any]) -> Path:
    """The daemon's project root when it says, else the git work tree top, else cwd (each as
    the protocol names it, as `cwd` is)."""
    for key in ("project_root", "root"):
        value = listing.get(key)
        if isinstance(value, str) and value.startswith("/"):
            return Path(value)
    try:
        out = subprocess.run(
            ["git", "-C", os_path(str(cwd)), "rev-parse", "--show-toplevel"],
            capture_output=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return cwd
    # Bytes, not text in the locale's encoding: a UTF-8 top folder under an ASCII locale was a
    # UnicodeDecodeError.
    top = out.stdout.decode("utf-8", "surrogateescape").strip()
    return Path(top) if out.returncode == 0 and top.startswith("/") else cwd


def create_empty(path: Path) -> bool:
    """Create `path` empty with O_EXCL (never truncating a file that appeared meanwhile) and
    O_NOFOLLOW (never through a link planted meanwhile); its missing folders 0700. False when
    something is there already; OSError when it cannot be created."""
    from memoryd_client.private_dirs import make_private_dirs

    make_private_dirs(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def dangling_link(path: Path) -> str | None:
    """Where `path` points when it is a symbolic link to nothing: an editor saving it would
    create that file, wherever it is (a cloned repository's CLAUDE.md -> ~/.ssh/...)."""
    if not path.is_symlink() or path.exists():
        return None
    try:
        return protocol_path(os.readlink(path))
    except OSError:
        return "?"


def editor_command() -> list[str]:
    """$VISUAL, else $EDITOR, split as a shell would (`code --wait`), else vi. ValueError,
    naming the variable, when it cannot be split (an unclosed quote)."""
    import shlex

    for var in ("VISUAL", "EDITOR"):
        value = os.environ.get(var, "").strip()
        if value:
            try:
                words = shlex.split(value)
            except ValueError as exc:
                raise ValueError(f"${var} is {value!r}: {str(exc).lower()}") from exc
            if words:
                return words
    return ["vi"]


def run_editor(path: Path, ui: UI, editor: list[str] | None = None) -> int | None:
    """The editor's exit code, or None when it could not start (and the UI was told why)."""
    try:
        command = [*(editor or editor_command()), str(path)]
    except ValueError as exc:
        ui.message(f"cannot start the editor: {exc}; set $VISUAL or $EDITOR")
        return None
    try:
        return subprocess.run(command, check=False).returncode
    except OSError as exc:
        ui.message(
            f"cannot start editor {command[0]!r}: {exc.strerror or exc}; set $VISUAL or $EDITOR"
        )
        return None


def edit_file(path: Path, ui: UI) -> None:
    """Open an instruction file (`path` as the protocol names it) in the editor; a missing one
    is created empty first, never through a symbolic link, and only when the editor can be
    started."""
    try:
        editor = editor_command()
    except ValueError as exc:
        ui.message(f"cannot start the editor: {exc}; set $VISUAL or $EDITOR")
        return
    local = Path(os_path(str(path)))
    created = False
    target = dangling_link(local)
    if target is None and not os.path.lexists(local):
        try:
            created = create_empty(local)
        except OSError as exc:
            ui.message(f"cannot create {path}: {exc.strerror or exc}")
            return
        target = dangling_link(local)  # a link planted between the check and the create
    if target is not None:
        ui.message(
            f"not opening {path}: it is a symbolic link to {target}, which does not exist, "
            "and saving would create that file; remove the link or create its target yourself"
        )
        return
    if local.is_symlink():
        ui.message(f"{path} is a symbolic link: editing {protocol_path(str(local.resolve()))}")
    code = run_editor(local, ui, editor)
    # The file exists only because of this choice: taken back when the editor could not start,
    # or failed (`:cq` in vim) and left it empty (it stayed, an untracked CLAUDE.md in git).
    if created and code != 0 and _remove_if_empty(local):
        if code is not None:
            ui.message(f"editor exited with code {code}: {path}, created empty for it, is removed")
        return
    if code is None:
        return
    if created:
        ui.message(f"{path} (new, created empty)")
    ui.message(f"edited {path}" if code == 0 else f"editor exited with code {code}")


def _remove_if_empty(path: Path) -> bool:
    """Remove `path` when it is (still) an empty regular file; whether it was removed."""
    with contextlib.suppress(OSError):
        info = path.lstat()
        if stat.S_ISREG(info.st_mode) and info.st_size == 0:
            path.unlink()
            return True
    return False


def open_folder(path: Path, ui: UI) -> None:
    """Open a folder (`path` as the protocol names it), made first when missing."""
    import shutil

    from memoryd_client.private_dirs import make_private_dirs

    local = os_path(str(path))
    try:
        make_private_dirs(Path(local))
    except OSError as exc:
        ui.message(f"cannot open {path}: {exc.strerror or exc}")
        return
    if sys.platform == "darwin":
        command = ["open", local]
    elif shutil.which("xdg-open") and (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        command = ["xdg-open", local]
    else:
        # No desktop: the editor's directory view.
        if run_editor(Path(local), ui) is not None:
            ui.message(f"opened {path}")
        return
    try:
        subprocess.run(command, check=False)
    except OSError as exc:
        ui.message(f"cannot open {path}: {exc.strerror or exc}")
        return
    ui.message(f"opened {path}")


def memory_menu_for(conn: Any, ui: UI, cwd: str, item: Item) -> None:
    from memctl import memory_menu
    from memctl.memory_menu import Item

    path = Path(item.target)
    actions = [
        Item(item.label.strip(), "header"),
        Item("Open in editor", "command", "edit", str(path), indent=1),
        Item("History and restore", "command", "history", indent=1),
    ]
    choice = ui.choose(f"Memory {path.name}", actions)
    if choice is None:
        return
    from memoryd_client import RpcError

    if choice.target == "edit":
        from memctl.memory_edit import edit_memory

        edit_memory(conn, ui, cwd, path, team=item.value is True)
        return

    try:
        history = conn.memory_history(cwd, str(path))
    except RpcError as exc:
        ui.message(f"no history for {path.name}: {exc.message}")
        return
    versions = memory_menu.version_items(history, time.time())
    if not versions:
        ui.message(f"{path.name} has no earlier versions")
        return
    picked = ui.choose(
        f"History of {path.name} (newest first)", [Item("Versions", "header"), *versions]
    )
    if picked is None or not ui.confirm(f"Restore {path.name} to version {picked.target}?"):
        return
    try:
        conn.memory_restore(cwd, str(path), picked.target)
    except RpcError as exc:
        ui.message(f"restore failed: {exc.message}")
        return
    ui.message(f"restored {path.name} to version {picked.target}")


def toggle(conn: Any, ui: UI, cwd: str, item: Item) -> None:
    """Flip a setting in the user settings, then say what is in effect: a project, local or
    policy file that sets the key wins over the user's, and the switch may not move."""
    from memctl.memory_menu import TOGGLES
    from memoryd_client import RpcError

    wanted = not item.value
    word = {True: "on", False: "off"}
    try:
        written = conn.settings_set(item.target, wanted)
        current = conn.settings_get(cwd)
    except RpcError as exc:
        ui.message(f"{item.label}: not changed: {exc.message}")
        return
    user_file = written.get("path") if isinstance(written, dict) else None
    default = next((d for key, _, d in TOGGLES if key == item.target), False)
    values = current.get("settings") if isinstance(current.get("settings"), dict) else {}
    sources = current.get("sources") if isinstance(current.get("sources"), dict) else {}
    effective = bool(values.get(item.target, default))
    source = str(sources.get(item.target, "default"))
    files = current.get("files") if isinstance(current.get("files"), list) else []
    deciding = next(
        (f.get("path") for f in files if isinstance(f, dict) and f.get("source") == source), None
    )
    where = f"{source} settings" + (f" ({deciding})" if deciding else "")
    if effective == wanted:
        ui.message(f"{item.label}: {word[wanted]}, from the {where}")
    else:
        mine = "user settings" + (f" ({user_file})" if user_file else "")
        ui.message(
            f"{item.label}: still {word[effective]}: the {where} decide it over the {mine}, "
            f"which now say {word[wanted]}"
        )


def act(conn: Any, ui: UI, cwd: str, item: Item) -> None:
    if item.action == "edit":
        edit_file(Path(item.target), ui)
    elif item.action == "open_dir":
        open_folder(Path(item.target), ui)
    elif item.action == "toggle":
        toggle(conn, ui, cwd, item)
    elif item.action == "memory":
        memory_menu_for(conn, ui, cwd, item)


# -- the command -------------------------------------------------------------------------------


FEATURE_UNAVAILABLE = -32003


def fetch_listing(conn: Any, cwd: Path) -> dict[str, Any]:
    """`memory.list`, or — with auto memory off — the instruction files alone.

    The menu must still open when auto memory is off: it is where the user turns it back on.
    """
    from memoryd_client import RpcError

    try:
        listing: dict[str, Any] = conn.memory_list(str(cwd))
    except RpcError as exc:
        if exc.code != FEATURE_UNAVAILABLE:
            raise
        context = conn.get_context(str(cwd))
        files = [f for f in context.get("files", []) if f.get("type") not in ("AutoMem", "TeamMem")]
        return {"instruction_files": files, "memories": [], "unavailable": exc.message}
    return listing


def load_items(conn: Any, cwd: Path) -> tuple[list[Item], dict[str, Any]]:
    from memctl import memory_menu

    listing = fetch_listing(conn, cwd)
    settings = conn.settings_get(str(cwd))
    home = os.environ.get("HOME")
    # Every path in the menu as the protocol names it (the daemon's are): the one from the
    # environment too, whose bytes under an ASCII locale are lone surrogates.
    items = memory_menu.build_items(
        listing,
        settings,
        user_memory=Path(protocol_path(str(config_dir() / "CLAUDE.md"))),
        project_memory=project_root(cwd, listing) / "CLAUDE.md",
        now=time.time(),
        home=None if home is None else protocol_path(home),
        cwd=str(cwd),
    )
    return items, listing


def run(args: argparse.Namespace) -> int:
    from memoryd_client import DaemonUnavailable

    if args.cwd is not None:
        args.cwd = str(args.cwd.expanduser())
    # project_cwd: absolute, sendable as UTF-8, the working folder not deleted (exit 2 else).
    # The menu holds every path as the protocol names it, and names a file to the OS through
    # `os_path` (under an ASCII locale "café" is not the name open() takes).
    cwd = Path(project_cwd(args))
    try:
        folder = stat.S_ISDIR(os.stat(os_path(str(cwd))).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        folder = False
    except OSError as exc:  # a name over 255 bytes, a folder it may not enter: a traceback
        return fail(args, f"--cwd: cannot read {cwd}: {exc.strerror or exc}", EXIT_USAGE)
    if not folder:
        return fail(args, f"--cwd: no such directory: {cwd}", EXIT_USAGE)
    with client(args, timeout=30.0) as conn:
        if args.list or args.json:
            from memctl import memory_menu

            items, listing = load_items(conn, cwd)
            text, _ = memory_menu.numbered(items)
            if listing.get("unavailable"):
                text += f"\n({listing['unavailable']})"
            emit(args, listing, text)
            return 0
        notes = Notifications(conn, str(cwd))
        reloader = Reloader(conn.socket_path, cwd)

        def fresh(wait_s: float) -> list[Item] | None:
            """The main list loaded again once the project changed (None until it is)."""
            if notes.changed:
                notes.changed = False
                reloader.request()
            loaded, failed = reloader.take(wait_s)
            if failed is not None:
                ui.message(f"could not list again: {failed}")
            return loaded

        interactive = (
            sys.stdout.isatty()
            and sys.stdin.isatty()
            and not args.plain
            and os.environ.get("TERM", "dumb") != "dumb"
        )
        ui: UI = CursesUI(notes.poll) if interactive else PlainUI(notes.poll)
        title = f"memoryd — memory for {cwd}"
        shown_unavailable = None
        items = []
        while True:
            try:
                refused = notes.subscribe()
                if refused is not None:
                    ui.message(refused)
                # What changed until now is in this list; a load in the background started
                # before it is older.
                notes.changed = False
                reloader.settled()
                items, listing = load_items(conn, cwd)
            except DaemonUnavailable as exc:
                if not items:  # never listed: nothing to show
                    raise
                # Still down after a choice (a restart under way, a stop): the last list is
                # shown again, and the menu connects again once memoryd is back.
                ui.message(notes.lost(exc))
                listing = {"unavailable": shown_unavailable}
            unavailable = listing.get("unavailable")
            if unavailable and unavailable != shown_unavailable:
                ui.message(str(unavailable))
            shown_unavailable = unavailable
            choice = ui.choose(title, items, fresh)
            if choice is None:
                return 0
            # A connection a restart ended is found here, so the choice's call connects again.
            for line in notes.poll():
                ui.message(line)
            try:
                act(conn, ui, str(cwd), choice)
            except DaemonUnavailable as exc:
                ui.message(f"{choice.label.strip()}: not finished: {notes.lost(exc)}")


class Notifications:
    """The UI's subscription, kept across a daemon restart. A restart ends the connection: the
    call that finds it fails (DaemonUnavailable) and the next connects again, without the
    subscription; the menu subscribes each time it lists, and `poll` once memoryd is back
    (a restart ended the UI with exit 3, and an edit being saved was lost).

    `changed` is set when the project's instruction files or memories changed (context/changed,
    memory/saved of this project), or memoryd came back (they may have changed meanwhile)."""

    RETRY_S = 1.0  # between attempts to reach a daemon that went away (the picker polls 5/s)
    # A flood of notifications (a daemon sending thousands a second) is read at most this many
    # a poll, and shown as this many lines and a count: a poll reading until none was waiting
    # never returned while the flood lasted, and the menu took no key.
    READ_PER_POLL = 500
    LINES_PER_POLL = 5

    def __init__(self, conn: Any, cwd: str) -> None:
        self.conn = conn
        self.cwd = cwd
        self.subscribed = False
        self.retry_at = 0.0
        self.changed = False
        self.refused: str | None = None  # the daemon's refusal of the subscription, once said

    def subscribe(self) -> str | None:
        """Subscribe on the current connection; a line to show when the daemon refused (said
        once, not at every listing), else None. A daemon older than one of EVENTS refuses the
        whole set (-32602 naming the events it knows): those it knows are asked for then, as
        the editors do."""
        from memctl.notifications import known_events
        from memoryd_client import RpcError

        # Every time, not once: a call may have connected again meanwhile (an edit's save
        # after a restart), and a connection of its own has no subscription. A later
        # subscribe replaces the set, so it never doubles a notification.
        try:
            try:
                self.conn.subscribe(EVENTS)
            except RpcError as exc:
                kept = known_events(exc.message, EVENTS) if exc.code == INVALID_PARAMS else None
                if kept is None:
                    raise
                self.conn.subscribe(kept)
        except RpcError as exc:
            # No notifications, but the menu works: said once, as Neovim and VS Code say it.
            self.subscribed = True  # polled all the same, so a lost connection is seen
            line = f"could not subscribe to notifications: {exc.message}"
            said, self.refused = self.refused, line
            return None if said == line else line
        self.subscribed = True
        self.refused = None
        return None

    def lost(self, exc: Exception) -> str:
        self.subscribed = False
        return f"memoryd went away ({exc}); the menu connects again when it is back"

    def poll(self) -> list[str]:
        """Lines for the notifications already received or waiting, without blocking (but
        for connecting again, at most once a second, after memoryd went away)."""
        from memctl.notifications import concerns, describe
        from memoryd_client import DaemonUnavailable

        lines: list[str] = []
        if not self.subscribed and time.monotonic() >= self.retry_at:
            try:
                refused = self.subscribe()
                lines.append("connected to memoryd again")
                lines.extend([refused] if refused is not None else [])
                self.changed = True
            except DaemonUnavailable:
                self.retry_at = time.monotonic() + self.RETRY_S
        shown: list[str] = []
        more = 0
        gone: list[str] = []
        for _ in range(self.READ_PER_POLL):
            if not self.subscribed:
                break
            try:
                message = self.conn.poll_notification(0.01)
            except DaemonUnavailable as exc:
                gone.append(self.lost(exc))
                break
            if message is None:
                break
            event = message.get("method")
            params = message.get("params")
            about_this = isinstance(params, dict) and concerns(params.get("project"), self.cwd)
            if event in LIST_CHANGED and about_this:
                self.changed = True
            if event == "context/changed" and not about_this:
                continue  # another project's instruction files: nothing this menu shows
            if len(shown) < self.LINES_PER_POLL:
                shown.append(describe(message))
            else:
                more += 1
        if more:
            shown.append(f"… and {more} more notification{'s' if more != 1 else ''}")
        return lines + shown + gone


class Reloader:
    """The main list loaded again in a thread, on a connection of its own, after the project
    changed while the menu is open: a daemon slow to answer (a memory.list of 10 s) never holds
    the keys, and the menu's own connection stays the UI thread's. Loads asked for while one
    runs make one more load after it, not one each."""

    def __init__(self, socket_path: Path, cwd: Path) -> None:
        self.socket_path = socket_path
        self.cwd = cwd
        self._lock = threading.Condition()
        self._running = False
        self._again = False
        self._generation = 0  # bumped when the menu lists itself: older loads are dropped
        self._items: list[Item] | None = None
        self._failed: str | None = None

    def request(self) -> None:
        with self._lock:
            if self._running:
                self._again = True
                return
            self._running = True
        threading.Thread(target=self._load, name="memctl-memory-reload", daemon=True).start()

    def settled(self) -> None:
        """The menu is listing itself now: what a load started before would give is older."""
        with self._lock:
            self._generation += 1
            self._items = self._failed = None

    def take(self, wait_s: float = 0.0) -> tuple[list[Item] | None, str | None]:
        """The items loaded since the last take (or None), and why a load failed (or None);
        a load under way is waited for up to `wait_s` seconds."""
        with self._lock:
            self._lock.wait_for(lambda: not self._running, timeout=wait_s)
            taken = self._items, self._failed
            self._items = self._failed = None
            return taken

    def _load(self) -> None:
        from memoryd_client import Client, RpcError

        while True:
            with self._lock:
                generation = self._generation
                self._again = False
            items: list[Item] | None = None
            failed: str | None = None
            try:
                with Client(self.socket_path, timeout=30.0) as conn:
                    items, _ = load_items(conn, self.cwd)
            except RpcError as exc:
                failed = exc.message
            except OSError as exc:
                # down (the menu says so through its own connection) or too slow: the list
                # shown stays, and the menu lists again after the next choice
                failed = None if isinstance(exc, ConnectionError) else str(exc)
            except Exception as exc:  # the thread's end: what it raised is said in the menu
                # A reply the list cannot be built from: left uncaught it ended the thread with
                # the load still marked running (no load ever again, the numbered menu waiting
                # 5 s at each prompt) and printed a traceback over the curses screen.
                failed = f"{type(exc).__name__}: {exc}"
            with self._lock:
                if generation == self._generation:
                    self._items, self._failed = items, failed
                if not self._again:
                    self._running = False
                    self._lock.notify_all()
                    return
