"""`memctl memory` end to end: the curses UI in a pseudo-terminal, and the numbered fallback."""

from __future__ import annotations

import fcntl
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyte
import pytest

from tests.clients.conftest import memctl_env, run_memctl, run_memctl_notified
from tests.clients.fake_daemon import FakeDaemon, FakeError

DOWN = "\x1bOB"  # xterm in keypad (application) mode, as curses sets it


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    path.mkdir()
    return path


@pytest.fixture
def editor(tmp_path: Path) -> tuple[str, Path]:
    """An $EDITOR that records the files it was asked to open."""
    log = tmp_path / "editor.log"
    script = tmp_path / "editor.sh"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> "{log}"\n')
    script.chmod(0o755)
    return str(script), log


@pytest.fixture
def scripted(fake_daemon: FakeDaemon, project: Path, tmp_path: Path) -> FakeDaemon:
    memdir = tmp_path / "memdir"
    memdir.mkdir()
    now = time.time()
    settings: dict[str, Any] = {"autoMemoryEnabled": True, "autoDreamEnabled": False}
    fake_daemon.on(
        "memory.list",
        lambda _p: {
            "instruction_files": [
                {"path": str(project / "CLAUDE.md"), "type": "Project", "parent": None},
                {
                    "path": str(project / "docs" / "style.md"),
                    "type": "Project",
                    "parent": str(project / "CLAUDE.md"),
                },
            ],
            "memories": [
                {
                    "path": str(memdir / "old_note.md"),
                    "name": "Old note",
                    "description": "kept for history",
                    "type": "project",
                    "mtime": now - 2 * 86400,
                    "team": False,
                },
            ],
            "memory_dir": str(memdir),
            "team_dir": str(memdir / "team"),
        },
    )
    fake_daemon.on("settings.get", lambda _p: {"settings": dict(settings), "sources": {}})

    def set_setting(params: dict[str, Any]) -> dict[str, Any]:
        settings[params["key"]] = params["value"]
        return {"path": "/x/settings.json", **params}

    fake_daemon.on("settings.set", set_setting)
    fake_daemon.on(
        "memory.history",
        {"versions": [{"version": "20260101T000000-1", "mtime": now - 3600, "size": 40}]},
    )
    fake_daemon.on("memory.restore", lambda p: {"path": p["path"], "restored": p["version"]})
    return fake_daemon


class Pty:
    """memctl in a pseudo-terminal: keys in, screen bytes collected by a reader thread."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
        self.master = master
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memctl", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        os.close(slave)
        self.output = b""
        self.screen = pyte.Screen(140, 40)
        self._stream = pyte.ByteStream(self.screen)
        self._lock = threading.Lock()
        self._stop = False
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop:
            ready, _, _ = select.select([self.master], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                with self._lock:
                    self.output += chunk
                    self._stream.feed(chunk)

    def send(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def wait_for(self, check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline or (self.proc.poll() is not None and not check()):
                raise AssertionError(
                    f"timed out waiting for {what}; exit={self.proc.poll()}; screen:\n{self.text()}"
                )
            time.sleep(0.02)

    def text(self) -> str:
        with self._lock:
            return "\n".join(line.rstrip() for line in self.screen.display)

    def screen_has(self, text: str) -> Callable[[], bool]:
        return lambda: text in self.text()

    def cursor_on(self, text: str) -> Callable[[], bool]:
        """The picker's marker (`>`, in place of the indent) is on the row showing `text`."""
        return lambda: any(
            line.startswith(">") and text in line for line in self.text().splitlines()
        )

    def close(self) -> int:
        try:
            return self.proc.wait(timeout=20)
        finally:
            self._stop = True
            self._thread.join(timeout=5)
            os.close(self.master)


@pytest.fixture
def pty_memctl(scripted: FakeDaemon, project: Path, editor: tuple[str, Path]) -> Iterator[Pty]:
    env = memctl_env(TERM="xterm-256color", VISUAL=editor[0], ESCDELAY="25")
    term = Pty(["--socket", str(scripted.socket_path), "memory"], env, project)
    try:
        yield term
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
            term.close()


def test_memory_ui_in_a_pty(
    pty_memctl: Pty,
    scripted: FakeDaemon,
    project: Path,
    editor: tuple[str, Path],
    isolated_env: Any,
) -> None:
    term = pty_memctl
    log = editor[1]
    term.wait_for(term.screen_has("Type to filter"), "the first screen")
    assert "Project memory" in term.text()
    assert "    ↳ ./docs/style.md  (@-import)" in term.text()

    # Type-to-filter, Enter: "Project memory" is created empty, exclusively, and opened.
    term.send("project memory")
    term.wait_for(term.screen_has("Filter: project memory"), "the filter line")
    term.send("\r")
    term.wait_for(
        lambda: log.exists() and str(project / "CLAUDE.md") in log.read_text(), "the editor"
    )
    assert (project / "CLAUDE.md").read_text() == ""

    # A saved-memory notification shows up while the menu waits for keys.
    scripted.wait_for_subscriber()
    term.wait_for(lambda: len(scripted.calls("settings.get")) >= 2, "the menu again")
    scripted.notify("memory/saved", {"path": "/m/feedback_tabs.md", "project": str(project)})
    term.wait_for(term.screen_has("memory saved: feedback_tabs.md"), "the notification")

    # Arrow keys: from the top, down to "Project memory" ... then filter to the dream toggle.
    term.send("dream")
    term.wait_for(term.screen_has("Filter: dream"), "the dream filter")
    term.send("\r")
    term.wait_for(lambda: scripted.calls("settings.set") != [], "the toggle")
    assert scripted.calls("settings.set") == [{"key": "autoDreamEnabled", "value": True}]

    # The menu drawn again, the toggle's line under it, before the next keys are typed.
    term.wait_for(
        term.screen_has("Auto dream (background consolidation): on"), "the menu after the toggle"
    )

    # History and restore of a memory: filter, Enter, Down to "History", Enter, Enter, Yes.
    term.send("old note")
    term.wait_for(term.screen_has("Filter: old note"), "the memory filter")
    term.send("\r")
    term.wait_for(term.screen_has("History and restore"), "the memory menu")
    term.send(DOWN)
    term.wait_for(term.cursor_on("History and restore"), "the cursor on History")
    term.send("\r")
    term.wait_for(lambda: scripted.calls("memory.history") != [], "the history call")
    term.wait_for(term.screen_has("20260101T000000-1"), "the version list")
    term.send("\r")
    term.wait_for(term.screen_has("Restore old_note.md"), "the confirmation")
    term.send(DOWN)
    term.wait_for(term.cursor_on("Yes"), "the cursor on Yes")
    term.send("\r")
    term.wait_for(lambda: scripted.calls("memory.restore") != [], "the restore")
    restore = scripted.calls("memory.restore")[0]
    assert restore["version"] == "20260101T000000-1"
    assert restore["path"].endswith("old_note.md")

    # Esc leaves.
    term.wait_for(term.screen_has("restored old_note.md"), "the restored message")
    term.send("\x1b")
    assert term.close() == 0


def test_plain_fallback_numbers_and_filter(
    scripted: FakeDaemon, project: Path, editor: tuple[str, Path], isolated_env: Any
) -> None:
    env = memctl_env(VISUAL=editor[0])
    user_memory = isolated_env.config_dir / "CLAUDE.md"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "memctl",
            "--socket",
            str(scripted.socket_path),
            "memory",
            "--cwd",
            str(project),
        ],
        input="1\nauto memory\n1\n\n\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "  1. User memory" in done.stdout
    assert "Project instructions" in done.stdout
    assert "  4.     ↳ ./docs/style.md  (@-import)" in done.stdout
    assert "[filter: auto memory]" in done.stdout
    assert user_memory.exists()
    assert user_memory.read_text() == ""
    assert str(user_memory) in editor[1].read_text()
    assert scripted.calls("settings.set") == [{"key": "autoMemoryEnabled", "value": False}]


def test_list_mode_and_bad_cwd(scripted: FakeDaemon, project: Path) -> None:
    done = run_memctl(
        "--socket", str(scripted.socket_path), "memory", "--list", "--cwd", str(project)
    )
    assert done.returncode == 0, done.stderr
    assert "Memories (1)" in done.stdout
    assert "  9. project            2d  Old note  — kept for history" in done.stdout
    assert scripted.calls("memory.list") == [{"cwd": str(project)}]
    bad = run_memctl(
        "--socket", str(scripted.socket_path), "memory", "--cwd", str(project / "nope")
    )
    assert bad.returncode == 2
    assert "no such directory" in bad.stderr


def test_daemon_errors_are_reported(fake_daemon: FakeDaemon, project: Path) -> None:
    def refuse(_: dict[str, Any]) -> Any:
        raise FakeError(-32602, "invalid params: cwd: no such directory")

    fake_daemon.on("memory.list", refuse)
    done = run_memctl(
        "--socket", str(fake_daemon.socket_path), "memory", "--list", "--cwd", str(project)
    )
    assert done.returncode == 1
    assert "error -32602: invalid params: cwd: no such directory" in done.stderr


def test_no_history_method_is_a_message(
    scripted: FakeDaemon, project: Path, editor: tuple[str, Path]
) -> None:
    del scripted.handlers["memory.history"]
    env = memctl_env(VISUAL=editor[0])
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "memctl",
            "--socket",
            str(scripted.socket_path),
            "memory",
            "--cwd",
            str(project),
        ],
        input="old note\n1\n2\n\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "no history for old_note.md" in done.stdout


def test_unknown_terminal_falls_back_to_numbers(
    scripted: FakeDaemon, project: Path, editor: tuple[str, Path]
) -> None:
    env = memctl_env(TERM="no-such-terminal-xyz", VISUAL=editor[0])
    term = Pty(["--socket", str(scripted.socket_path), "memory"], env, project)
    try:
        term.wait_for(term.screen_has("Number to choose"), "the numbered menu")
        assert "numbered menu instead" in term.text()
        assert "  2. Project memory" in term.text()
        term.send("2\r")
        term.wait_for(lambda: editor[1].exists(), "the editor")
        term.send("\r")
        assert term.close() == 0
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
            term.close()
    assert (project / "CLAUDE.md").exists()


NOTE_TEXT = "---\nname: Old note\ndescription: kept for history\ntype: project\n---\n\nV0\n"
EDITED = "---\nname: Old note\ndescription: kept, edited\ntype: project\nextra: 1\n---\n\nV2\n"


@pytest.fixture
def writing_editor(tmp_path: Path) -> tuple[str, Path]:
    """An $EDITOR that logs the file it got, with its mode and its folder's, then saves
    EDITED over it (or leaves it alone when `unchanged` exists next to the log)."""
    log = tmp_path / "editor.log"
    script = tmp_path / "editor.py"
    script.write_text(
        "import os, stat, sys\n"
        "path = sys.argv[1]\n"
        "mode = lambda p: oct(stat.S_IMODE(os.stat(p).st_mode))\n"
        f"with open({str(log)!r}, 'a') as log:\n"
        "    log.write(f'{path} {mode(path)} {mode(os.path.dirname(path))}\\n')\n"
        f"if not os.path.exists({str(tmp_path / 'unchanged')!r}):\n"
        f"    open(path, 'w').write({EDITED!r})\n"
    )
    return f"{sys.executable} {script}", log


@pytest.fixture
def note(scripted: FakeDaemon, tmp_path: Path) -> dict[str, Any]:
    """The fake's memory file: `content` is what memory.read answers (a test may change it)."""
    state: dict[str, Any] = {"content": NOTE_TEXT, "reads": 0}

    def read(params: dict[str, Any]) -> dict[str, Any]:
        state["reads"] += 1
        content = state["content"]
        if state.get("changed_after_read") == state["reads"]:
            state["content"] = state["changed_to"]  # another client writes meanwhile
        return {"path": params["path"], "content": content}

    scripted.on("memory.read", read)
    scripted.on("memory.snapshot", lambda p: {"path": p["path"], "version": "1-edit"})
    scripted.on("memory.write", lambda p: {"path": p["file"], "created": False, "warnings": []})
    state["path"] = str(tmp_path / "memdir" / "old_note.md")
    return state


def test_a_memory_is_edited_as_a_private_copy_and_saved_through_the_daemon(
    scripted: FakeDaemon, project: Path, writing_editor: tuple[str, Path], note: dict[str, Any]
) -> None:
    # Found by a bug hunt: the version was kept before the editor started and the editor
    # saved over the file itself, so a write made while it was open was kept nowhere.
    done = run_plain(scripted, project, "old note\n1\n1\n\n", VISUAL=writing_editor[0])
    assert done.returncode == 0, done.stderr
    edited, file_mode, folder_mode = writing_editor[1].read_text().split()
    assert edited != note["path"]
    assert Path(edited).name == "old_note.md"
    assert (file_mode, folder_mode) == ("0o600", "0o700")
    assert not Path(edited).parent.exists()  # the copy is removed once saved
    assert scripted.calls("memory.snapshot") == [{"cwd": str(project), "path": note["path"]}]
    assert scripted.calls("memory.write") == [
        {
            "cwd": str(project),
            "type": "project",
            "name": "Old note",
            "description": "kept, edited",
            "body": "\nV2\n",
            "file": note["path"],
            "team": False,
        }
    ]
    assert "saved old_note.md" in done.stdout
    assert "frontmatter keys a memory file does not keep were left out: extra" in done.stdout


def test_an_unchanged_copy_writes_nothing(
    scripted: FakeDaemon,
    project: Path,
    writing_editor: tuple[str, Path],
    note: dict[str, Any],
    tmp_path: Path,
) -> None:
    (tmp_path / "unchanged").write_text("")
    done = run_plain(scripted, project, "old note\n1\n1\n\n", VISUAL=writing_editor[0])
    assert done.returncode == 0, done.stderr
    assert "old_note.md: no changes, nothing saved" in done.stdout
    assert scripted.calls("memory.snapshot") == []
    assert scripted.calls("memory.write") == []


def test_a_write_made_while_the_editor_was_open_is_not_overwritten_unasked(
    scripted: FakeDaemon, project: Path, writing_editor: tuple[str, Path], note: dict[str, Any]
) -> None:
    concurrent = NOTE_TEXT.replace("V0", "V1: written by an agent meanwhile")
    note.update(changed_after_read=1, changed_to=concurrent)
    done = run_plain(scripted, project, "old note\n1\n1\nn\n\n", VISUAL=writing_editor[0])
    assert done.returncode == 0, done.stderr
    assert (
        "old_note.md was changed by someone else while it was being edited; that version is "
        "kept in history (1-edit)" in done.stdout
    )
    assert scripted.calls("memory.snapshot") != []  # the other version is in history
    assert scripted.calls("memory.write") == []
    edited = Path(writing_editor[1].read_text().split()[0])
    assert f"old_note.md not saved; your text is in {edited}" in done.stdout
    assert edited.read_text() == EDITED  # the user's text is kept too
    # Yes: saved over it (the other version stays in history).
    note.update(content=NOTE_TEXT, reads=0)
    done = run_plain(scripted, project, "old note\n1\n1\ny\n\n", VISUAL=writing_editor[0])
    assert done.returncode == 0, done.stderr
    assert len(scripted.calls("memory.write")) == 1
    assert "saved old_note.md" in done.stdout


def test_a_copy_that_cannot_be_saved_is_kept(
    scripted: FakeDaemon, project: Path, writing_editor: tuple[str, Path], note: dict[str, Any]
) -> None:
    def refuse(_: dict[str, Any]) -> Any:
        raise FakeError(-32602, "invalid params: type: must be one of user, feedback")

    scripted.on("memory.write", refuse)
    done = run_plain(scripted, project, "old note\n1\n1\n\n", VISUAL=writing_editor[0])
    assert done.returncode == 0, done.stderr
    edited = Path(writing_editor[1].read_text().split()[0])
    assert (
        f"old_note.md not saved: invalid params: type: must be one of user, feedback; your "
        f"text is in {edited}" in done.stdout
    )
    assert edited.read_text() == EDITED


@contextmanager
def ctrl_c_reaches_children() -> Iterator[None]:
    """Processes started meanwhile get SIGINT's default, as from a terminal. A test run
    started in the background by a script (`pytest … &`: SIGINT ignored) passed its SIG_IGN
    on, which exec keeps and Python leaves alone: the SIGINT a test sent did nothing."""
    was = signal.signal(signal.SIGINT, signal.default_int_handler)  # reset to default by exec
    try:
        yield
    finally:
        if was is not None:
            signal.signal(signal.SIGINT, was)


def test_ctrl_c_at_the_save_question_keeps_the_edited_copy(
    scripted: FakeDaemon, project: Path, writing_editor: tuple[str, Path], note: dict[str, Any]
) -> None:
    # Found by a bug hunt (session 19): Ctrl-C at "Save your edit over …?" ended memctl and
    # deleted the private copy with the user's text; "no" keeps it and says where.
    note.update(changed_after_read=1, changed_to=NOTE_TEXT.replace("V0", "V1: an agent's"))
    sock = str(scripted.socket_path)
    with ctrl_c_reaches_children():
        proc = subprocess.Popen(
            [sys.executable, "-m", "memctl", "--socket", sock, "memory", "--cwd", str(project)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=memctl_env(VISUAL=writing_editor[0]),
        )
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(b"old note\n1\n1\n")
    proc.stdin.flush()
    shown = b""
    while b"[y/N] " not in shown:
        chunk = os.read(proc.stdout.fileno(), 65536)
        assert chunk, shown.decode()
        shown += chunk
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    edited = Path(writing_editor[1].read_text().split()[0])
    assert edited.read_text() == EDITED
    assert f"memctl: old_note.md not saved; your text is in {edited}" in err.decode()
    assert scripted.calls("memory.write") == []
    shutil.rmtree(edited.parent)  # the kept copy is the user's to remove


class _Told:
    """A UI that records what it is told and answers no."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def message(self, text: str) -> None:
        self.said.append(text)

    def confirm(self, question: str) -> bool:
        return False


def test_a_save_memoryd_does_not_answer_in_time_keeps_the_edited_copy(
    writing_editor: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A daemon that does not answer the save within the client's timeout (stopped, stuck on
    # a lock): the TimeoutError left edit_memory, whose cleanup deleted the copy with the
    # user's edit, and ended the UI.
    from memctl.memory_edit import edit_memory

    class Conn:
        def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
            if method == "memory.read":
                return {"path": params["path"], "content": NOTE_TEXT}
            if method == "memory.snapshot":
                return {"path": params["path"], "version": "1-edit"}
            raise TimeoutError("memoryd did not answer within 30 s")

    monkeypatch.setenv("VISUAL", writing_editor[0])
    ui = _Told()
    edit_memory(Conn(), ui, str(tmp_path), tmp_path / "memdir" / "old_note.md", team=False)
    edited = Path(writing_editor[1].read_text().split()[0])
    assert edited.read_text() == EDITED
    assert any(f"your text is in {edited}" in line for line in ui.said), ui.said
    shutil.rmtree(edited.parent)


def test_memory_fields() -> None:
    from memctl.memory_edit import memory_fields

    assert memory_fields(EDITED) == (
        {"type": "project", "name": "Old note", "description": "kept, edited", "body": "\nV2\n"},
        ["extra"],
    )
    assert memory_fields("\ufeff---\r\nname: a\r\ndescription: b\r\ntype: user\r\n---\r\nx") == (
        {"type": "user", "name": "a", "description": "b", "body": "x"},
        [],
    )
    assert "no frontmatter" in str(memory_fields("just text"))
    assert "no type" in str(memory_fields("---\nname: a\ndescription: b\n---\nx"))
    assert "not valid YAML" in str(memory_fields("---\nname: [a\n---\nx"))
    assert "not a list of keys" in str(memory_fields("---\n- a\n---\nx"))


def run_plain(daemon: FakeDaemon, project: Path, answers: str, **env: str) -> Any:
    """`memctl memory` on the numbered menu, fed `answers`."""
    sock = str(daemon.socket_path)
    return subprocess.run(
        [sys.executable, "-m", "memctl", "--socket", sock, "memory", "--cwd", str(project)],
        input=answers,
        capture_output=True,
        text=True,
        env=memctl_env(**env),
        timeout=30,
        check=False,
    )


def test_an_answer_that_is_no_number_on_the_list_is_said(
    scripted: FakeDaemon, project: Path
) -> None:
    # Found by a bug hunt: "²" and a number of 5000 digits pass str.isdigit() and made int()
    # raise: a traceback instead of "… is not on the list".
    done = run_plain(scripted, project, "²\n" + "9" * 5000 + "\n0\n\n")
    assert done.returncode == 0, done.stderr
    assert "² is not on the list" in done.stdout
    assert "99999999999999999999… is not on the list" in done.stdout
    assert "0 is not on the list" in done.stdout


def test_an_answer_line_that_never_ends_is_the_end_of_input(
    scripted: FakeDaemon, project: Path
) -> None:
    # Found by the session 24 hunt: `memctl memory < /dev/zero` read its one endless line
    # whole (a MemoryError traceback once memory ran out). 65,536 characters and a newline
    # are still an answer (a filter here); one more character without one ends the menu.
    done = run_plain(scripted, project, "x" * 65_536 + "\n" + "\0" * 2_000_000)
    assert done.returncode == 0, done.stderr
    assert "[filter: xxxx" in done.stdout
    assert done.stdout.endswith("(a line over 65,536 characters: taken as the end of input)\n\n")


def test_an_editor_variable_that_cannot_be_split_is_said(
    scripted: FakeDaemon, project: Path
) -> None:
    # Found by a bug hunt: shlex.split raised on an unclosed quote, a traceback that ended the
    # UI after "Project memory" had been created empty.
    done = run_plain(scripted, project, "2\n\n", VISUAL="", EDITOR='code --wait "')
    assert done.returncode == 0, done.stderr
    assert (
        "cannot start the editor: $EDITOR is 'code --wait \"': no closing quotation; "
        "set $VISUAL or $EDITOR" in done.stdout
    )
    assert not (project / "CLAUDE.md").exists()
    # An editor that is not there: the file created for it is taken back.
    done = run_plain(scripted, project, "2\n\n", VISUAL=str(project / "no-such-editor"))
    assert done.returncode == 0, done.stderr
    assert "cannot start editor" in done.stdout
    assert not (project / "CLAUDE.md").exists()


def test_a_file_created_for_an_editor_that_fails_is_taken_back(
    scripted: FakeDaemon, project: Path, tmp_path: Path
) -> None:
    # Found by a bug hunt (session 22): an editor quitting with an error (vim's :cq, `false`)
    # left "Project memory" created empty: an untracked CLAUDE.md in the project's git.
    done = run_plain(scripted, project, "2\n\n", VISUAL="false")
    assert done.returncode == 0, done.stderr
    target = project / "CLAUDE.md"
    assert f"editor exited with code 1: {target}, created empty for it, is removed" in done.stdout
    assert "created empty)" not in done.stdout
    assert not target.exists()
    # What the failing editor wrote stays, and so does a file that was there before.
    writes = tmp_path / "writes.sh"
    writes.write_text('#!/bin/sh\necho kept > "$1"\nexit 3\n')
    writes.chmod(0o755)
    done = run_plain(scripted, project, "2\n\n", VISUAL=str(writes))
    assert "editor exited with code 3" in done.stdout
    assert target.read_text() == "kept\n"
    done = run_plain(scripted, project, "2\n\n", VISUAL="false")
    assert target.read_text() == "kept\n"
    target.write_text("")
    done = run_plain(scripted, project, "2\n\n", VISUAL="false")
    assert target.exists()  # empty, but not created by this choice


def test_an_edited_copy_that_cannot_be_read_says_where_it_is(
    scripted: FakeDaemon, project: Path, note: dict[str, Any], tmp_path: Path
) -> None:
    # Found by a bug hunt (session 22): the copy was kept but the message did not say where.
    script = tmp_path / "latin1.sh"
    script.write_text('#!/bin/sh\nprintf "caf\\351\\n" >> "$1"\n')  # not UTF-8
    script.chmod(0o755)
    done = run_plain(scripted, project, "old note\n1\n1\n\n", VISUAL=str(script))
    assert done.returncode == 0, done.stderr
    said = re.search(
        r"old_note.md not saved: the edited copy cannot be read \(.*\); your text "
        r"is in (\S+)\n",
        done.stdout,
    )
    assert said is not None, done.stdout
    copy = Path(said.group(1))
    assert copy.read_bytes().endswith(b"caf\xe9\n")
    shutil.rmtree(copy.parent)


def test_a_dangling_symlink_is_never_edited_through(
    scripted: FakeDaemon, project: Path, editor: tuple[str, Path], tmp_path: Path
) -> None:
    # Found by a bug hunt: a cloned repository's CLAUDE.md, a link to a missing
    # ~/.ssh/authorized_keys, was listed as missing, the O_NOFOLLOW create failed silently and
    # the editor saved what the user typed through the link.
    target = tmp_path / "ssh" / "authorized_keys"
    (project / "CLAUDE.md").symlink_to(target)
    done = run_plain(scripted, project, "2\n3\n\n", VISUAL=editor[0])
    assert done.returncode == 0, done.stderr
    assert f"Project memory  ./CLAUDE.md (a symbolic link to {target}, which does not exist)" in (
        done.stdout
    )
    refusal = f"not opening {project / 'CLAUDE.md'}: it is a symbolic link to {target}"
    assert done.stdout.count(refusal) == 2  # "Project memory" and the instruction file's row
    assert not editor[1].exists()
    assert not target.exists()
    assert (project / "CLAUDE.md").is_symlink()


def test_a_folder_or_file_that_cannot_be_created_is_said(
    scripted: FakeDaemon, project: Path, editor: tuple[str, Path], tmp_path: Path
) -> None:
    # Found by a bug hunt: mkdir of the team folder (a file in its place) and of the user
    # memory's folder raised outside any try: a traceback that ended the UI.
    (tmp_path / "memdir" / "team").write_text("a file where the team folder goes\n")
    (tmp_path / "afile").write_text("")
    config = tmp_path / "afile" / "claude"
    done = run_plain(
        scripted,
        project,
        "team folder\n1\n1\n\n",
        VISUAL=editor[0],
        CLAUDE_CONFIG_DIR=str(config),
    )
    assert done.returncode == 0, done.stderr
    assert f"cannot open {tmp_path / 'memdir' / 'team'}: File exists" in done.stdout
    assert f"cannot create {config / 'CLAUDE.md'}: File exists" in done.stdout
    assert not editor[1].exists()


def test_a_toggle_says_what_is_in_effect_and_which_file_decides(
    scripted: FakeDaemon, project: Path
) -> None:
    # Found by a bug hunt: with the project's .claude/settings.json saying false, the toggle
    # wrote true to the user settings and said "Auto memory: on (user settings)"; it stayed off.
    project_file = str(project / ".claude" / "settings.json")
    user: dict[str, Any] = {"autoDreamEnabled": False}

    def get(_: dict[str, Any]) -> dict[str, Any]:
        return {
            "settings": {**user, "autoMemoryEnabled": False},
            "sources": {"autoMemoryEnabled": "project", "autoDreamEnabled": "user"},
            "files": [
                {"source": "user", "path": "/h/.claude/settings.json", "error": None},
                {"source": "project", "path": project_file, "error": None},
            ],
        }

    def set_setting(params: dict[str, Any]) -> dict[str, Any]:
        user[params["key"]] = params["value"]
        return {"path": "/h/.claude/settings.json", **params}

    scripted.on("settings.get", get)
    scripted.on("settings.set", set_setting)
    done = run_plain(scripted, project, "auto memory\n1\ndream\n1\n\n")
    assert done.returncode == 0, done.stderr
    assert (
        f"Auto memory: still off: the project settings ({project_file}) decide it over the "
        "user settings (/h/.claude/settings.json), which now say on" in done.stdout
    )
    assert "Auto memory: on" not in done.stdout
    # A toggle the user settings decide says so, and where.
    assert (
        "Auto dream (background consolidation): on, from the user settings "
        "(/h/.claude/settings.json)" in done.stdout
    )
    assert scripted.calls("settings.set") == [
        {"key": "autoMemoryEnabled", "value": True},
        {"key": "autoDreamEnabled", "value": True},
    ]


# -- the open menu follows the project (context/changed), an older daemon, a flood ----------------


def _with_rule(handler: Any, rule: Path, gate: threading.Event) -> Any:
    """`memory.list` that waits for `gate` (a daemon slow to answer), then lists `rule` too."""

    def listing(params: dict[str, Any]) -> Any:
        assert gate.wait(30)
        result = handler(params)
        result["instruction_files"].append(
            {"path": str(rule), "type": "Project", "parent": None, "globs": ["**/*.go"]}
        )
        return result

    return listing


def test_the_open_menu_lists_again_when_the_projects_files_change(
    pty_memctl: Pty, scripted: FakeDaemon, project: Path
) -> None:
    """The memory UI did not subscribe to context/changed: a rule file added while it was
    open (another program, a `git checkout`) showed only after a choice. It is listed again
    in the background: the keys work while the daemon takes its time to answer."""
    term = pty_memctl
    term.wait_for(term.screen_has("Type to filter"), "the first screen")
    scripted.wait_for_subscriber()
    rule = project / ".claude" / "rules" / "go.md"
    gate = threading.Event()
    scripted.on("memory.list", _with_rule(scripted.handlers["memory.list"], rule, gate))
    listed = len(scripted.calls("memory.list"))
    scripted.notify("context/changed", {"project": "/elsewhere", "paths": ["/elsewhere/x.md"]})
    scripted.notify("context/changed", {"project": str(project), "paths": [str(rule)], "more": 0})
    term.wait_for(lambda: len(scripted.calls("memory.list")) > listed, "the list loaded again")
    term.send("zz")  # memory.list has not answered: the picker still takes keys
    term.wait_for(term.screen_has("Filter: zz"), "the filter, while the list loads")
    term.send("\x15")  # Ctrl-U
    term.wait_for(term.screen_has("Type to filter"), "the filter cleared")
    gate.set()
    term.wait_for(term.screen_has("./.claude/rules/go.md  paths: **/*.go"), "the new rule")
    assert f"context changed: {project} (.claude/rules/go.md)" in term.text()
    assert "/elsewhere" not in term.text()  # another project's change is not this menu's
    term.send("\x1b")
    assert term.close() == 0


OLD_EVENTS = ["memory/saved", "team/synced", "team/secret_blocked", "team/conflict", "worker/error"]


def _refusing_subscribe(daemon: FakeDaemon, refuse: Callable[[list[str]], str | None]) -> None:
    """Make `daemon` answer a `subscribe` whose events `refuse` objects to with -32602."""
    dispatch = daemon._dispatch

    def dispatching(request: dict[str, Any], conn: Any) -> dict[str, Any] | None:
        events = (request.get("params") or {}).get("events")
        message = refuse(events) if request.get("method") == "subscribe" else None
        if message is None:
            return dispatch(request, conn)
        daemon.requests.append(("subscribe", request.get("params") or {}))
        error = {"code": -32602, "message": message}
        return {"jsonrpc": "2.0", "id": request.get("id"), "error": error}

    daemon._dispatch = dispatching  # type: ignore[method-assign]


def test_a_daemon_older_than_context_changed_is_asked_for_the_events_it_knows(
    scripted: FakeDaemon, project: Path
) -> None:
    def older(events: list[str]) -> str | None:
        unknown = sorted(set(events) - set(OLD_EVENTS))
        if not unknown:
            return None
        return (
            f"invalid params: events: unknown event(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(OLD_EVENTS))}"
        )

    _refusing_subscribe(scripted, older)
    done = run_memctl_notified(
        scripted,
        "memory",
        notes=[("memory/saved", {"path": "/m/feedback_tabs.md", "project": str(project)})],
        stdin="nothing like it\n\n\n",
        cwd=project,
    )
    assert done.returncode == 0, done.stderr
    subscribes = [p["events"] for p in scripted.calls("subscribe")]
    assert subscribes[:2] == [[*OLD_EVENTS, "context/changed"], OLD_EVENTS]
    assert "* memory saved: feedback_tabs.md" in done.stdout
    assert "could not subscribe" not in done.stdout


def test_a_refused_subscription_is_said_once_and_the_menu_works(
    scripted: FakeDaemon, project: Path
) -> None:
    """A refusal that names no known events (before: an RpcError out of the UI, exit 1)."""
    _refusing_subscribe(scripted, lambda _events: "invalid params: events: too many")
    done = run_plain(scripted, project, "auto memory\n1\n\n")  # a toggle, the menu again
    assert done.returncode == 0, done.stderr
    assert len(scripted.calls("subscribe")) >= 2  # the menu listed twice, subscribing each time
    said = "could not subscribe to notifications: invalid params: events: too many"
    assert done.stdout.count(said) == 1
    assert "  2. Project memory" in done.stdout


class _Flood:
    """A connection a notification is always waiting on."""

    def __init__(self) -> None:
        self.read = 0

    def poll_notification(self, wait_s: float) -> dict[str, Any]:
        self.read += 1
        if self.read > 100_000:
            raise AssertionError("poll read on for as long as notifications came")
        return {"method": "memory/saved", "params": {"path": f"/m/n{self.read}.md", "project": "/"}}


def test_a_flood_of_notifications_leaves_the_menu_its_keys() -> None:
    """The picker polls between keys; a poll read until nothing was waiting, so a daemon
    sending faster than it read held the menu for as long as the flood lasted."""
    from memctl.commands.memory import Notifications

    conn = _Flood()
    notes = Notifications(conn, "/proj")
    notes.subscribed = True
    lines = notes.poll()
    assert conn.read == Notifications.READ_PER_POLL
    assert lines == [
        *(f"memory saved: n{i}.md" for i in range(1, Notifications.LINES_PER_POLL + 1)),
        f"… and {Notifications.READ_PER_POLL - Notifications.LINES_PER_POLL} more notifications",
    ]
    assert notes.changed  # a memory of this project ("/" holds it) was saved: list again


def test_a_background_load_that_raises_is_said_and_the_next_one_runs(
    scripted: FakeDaemon, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memctl.commands import memory

    real = memory.load_items
    calls = 0

    def load_items(conn: Any, cwd: Path) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ValueError("could not convert string to float: 'soon'")
        return real(conn, cwd)

    monkeypatch.setattr(memory, "load_items", load_items)
    reloader = memory.Reloader(scripted.socket_path, project)
    reloader.request()
    assert reloader.take(10.0) == (None, "ValueError: could not convert string to float: 'soon'")
    reloader.request()
    items, failed = reloader.take(10.0)
    assert failed is None
    assert items is not None
    assert items[0].label == "Memory files"
