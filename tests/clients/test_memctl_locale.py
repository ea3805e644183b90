"""memctl under a locale whose encoding is not UTF-8 (ISO-8859-1: Python's stdout is latin-1).

Found by a bug hunt: a memory named in CJK or with an emoji ended `memctl memory --list`,
`recall` and their `--json` in a UnicodeEncodeError traceback (exit 1). PYTHONIOENCODING gives
stdout the encoding such a locale gives it, without needing the locale installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.clients.conftest import memctl_env
from tests.clients.fake_daemon import FakeDaemon

NAME = "日本語 café 🎉"


def _memctl(fake: FakeDaemon, project: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "memctl", "--socket", str(fake.socket_path), *args],
        cwd=project,
        capture_output=True,
        env=memctl_env(PYTHONIOENCODING="latin-1"),
        timeout=30,
        check=False,
    )


def test_what_a_latin1_terminal_cannot_show_is_escaped(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    memory = {
        "path": str(tmp_path / "m" / "user_cafe.md"),
        "name": NAME,
        "description": "unicode body é",
        "type": "user",
        "mtime": time.time(),
        "team": False,
    }
    fake_daemon.on("memory.list", {"instruction_files": [], "memories": [memory]})
    fake_daemon.on("settings.get", {"settings": {}, "sources": {}})

    listed = _memctl(fake_daemon, project, "memory", "--list")
    assert listed.returncode == 0, listed.stderr.decode()
    text = listed.stdout.decode("latin-1")
    assert "\\u65e5\\u672c\\u8a9e café \\U0001f389  \\u2014 unicode body é" in text

    as_json = _memctl(fake_daemon, project, "memory", "--list", "--json")
    assert as_json.returncode == 0, as_json.stderr.decode()
    assert json.loads(as_json.stdout.decode("ascii"))["memories"][0]["name"] == NAME

    fake_daemon.on("memory.read", lambda _p: {"content": NAME})
    called = _memctl(fake_daemon, project, "call", "memory.read", '{"path": "x"}')
    assert called.returncode == 0, called.stderr.decode()
    assert json.loads(called.stdout.decode("ascii")) == {"content": NAME}


def test_a_byte_typed_at_the_menu_that_is_not_utf8_filters(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    # Found by a bug hunt (session 19): under a UTF-8 locale (en_US.UTF-8; PYTHONIOENCODING
    # gives stdin the same strict decoding) a Latin-1 terminal's "é" typed at the numbered
    # menu was a UnicodeDecodeError traceback.
    fake_daemon.on("memory.list", {"instruction_files": [], "memories": []})
    fake_daemon.on("settings.get", {"settings": {}, "sources": {}})
    project = tmp_path / "proj"
    project.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "memctl", "--socket", str(fake_daemon.socket_path), "memory"],
        cwd=project,
        input=b"caf\xe9\n\n\n",
        capture_output=True,
        env=memctl_env(PYTHONIOENCODING="utf-8"),
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert "[filter: caf\ufffd]" in done.stdout.decode()


def test_utf8_arguments_under_an_ascii_locale_are_sent(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    # Found by a bug hunt (session 23): with LC_ALL=C and Python's UTF-8 mode off, the
    # arguments' encoding is ASCII and "café" arrived as lone surrogates: refused as "not valid
    # UTF-8". Bytes that are not UTF-8 are still refused.
    fake_daemon.on("recall", {"memories": [], "selector": "local"})
    fake_daemon.on("memory.read", {"content": "x"})
    env = memctl_env(LC_ALL="C", PYTHONUTF8="0")
    env.pop("PYTHONIOENCODING", None)
    socket = ["--socket", str(fake_daemon.socket_path)]
    for args in (
        ["recall", NAME],
        ["call", "memory.read", json.dumps({"path": NAME}, ensure_ascii=False)],
        ["recall", b"caf\xe9".decode("utf-8", "surrogateescape")],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "memctl", *socket, *args],
            cwd=tmp_path,
            capture_output=True,
            env=env,
            timeout=30,
            check=False,
        )
        if args[-1].startswith("caf\udce9"):
            assert (done.returncode, done.stderr) == (2, b"memctl: the query is not valid UTF-8\n")
        else:
            assert done.returncode == 0, done.stderr
    assert [call["query"] for call in fake_daemon.calls("recall")] == [NAME]
    assert fake_daemon.calls("memory.read") == [{"path": NAME}]


def test_a_utf8_folder_and_method_under_an_ascii_locale_are_sent(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    # Found by a bug hunt (session 23): with LC_ALL=C and Python's UTF-8 mode off, a project
    # folder named "café" (the current one or --cwd) and `call`'s method name were refused as
    # not UTF-8, their UTF-8 bytes being lone surrogates here; a Latin-1 folder still is.
    fake_daemon.on("recall", {"memories": [], "selector": "local"})
    fake_daemon.on("café.ping", {"pong": True})
    env = memctl_env(LC_ALL="C", PYTHONUTF8="0")
    env.pop("PYTHONIOENCODING", None)
    utf8 = tmp_path / "café"
    latin1 = os.fsdecode(bytes(tmp_path) + b"/caf\xe9")
    utf8.mkdir()
    os.mkdir(latin1)

    def memctl(cwd: str | Path, *args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "memctl", "--socket", str(fake_daemon.socket_path), *args],
            cwd=cwd,
            capture_output=True,
            env=env,
            timeout=30,
            check=False,
        )

    for done in (
        memctl(utf8, "recall", "tabs"),
        memctl(tmp_path, "recall", "tabs", "--cwd", str(utf8)),
        memctl(tmp_path, "call", "café.ping"),
    ):
        assert (done.returncode, done.stderr) == (0, b"")
    assert [call["cwd"] for call in fake_daemon.calls("recall")] == [str(utf8)] * 2
    assert fake_daemon.calls("café.ping") == [{}]

    refused = memctl(latin1, "recall", "tabs")
    assert refused.returncode == 2
    assert b"caf\\xe9 cannot be sent to memoryd: its path is not UTF-8" in refused.stderr


def test_a_memory_path_under_an_ascii_locale_is_sent_as_utf8(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    # Found by a session 23 hunt: memory-history sent a UTF-8 name's lone surrogates as they
    # came (and a path that is not UTF-8 the same way).
    fake_daemon.on("memory.history", {"path": NAME, "exists": True, "versions": []})
    env = memctl_env(LC_ALL="C", PYTHONUTF8="0")
    env.pop("PYTHONIOENCODING", None)

    socket = str(fake_daemon.socket_path)

    def history(path: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "memctl", "--socket", socket, "memory-history", path],
            cwd=tmp_path,
            capture_output=True,
            env=env,
            timeout=30,
            check=False,
        )

    done = history(os.fsdecode(NAME.encode("utf-8")))
    assert done.returncode == 0, done.stderr
    assert [call["path"] for call in fake_daemon.calls("memory.history")] == [NAME]
    refused = history(os.fsdecode(b"caf\xe9.md"))
    assert (refused.returncode, refused.stderr) == (2, b"memctl: the path is not valid UTF-8\n")
    assert len(fake_daemon.calls("memory.history")) == 1


def test_the_memory_ui_works_in_a_utf8_folder_under_an_ascii_locale(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    # Found by a session 23 hunt, fixed in session 24: with LC_ALL=C and Python's UTF-8 mode
    # off the memory UI refused a folder named "café" (its files could not be named to this
    # locale's OS calls); it names them by their UTF-8 bytes now, and shows what the locale
    # cannot hold as escapes (curses drew é as a Latin-1 byte and dropped ↑ and ↳).
    from tests.clients.test_memory_ui import Pty

    project = tmp_path / "café"
    project.mkdir()
    memory = project / "mem" / "note_café.md"
    log = tmp_path / "editor.log"
    editor = tmp_path / "editor.sh"
    # Records the file it was given, and changes a memory copy's description.
    editor.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$1" >> "{log}"\n'
        'case "$1" in *.md) [ -s "$1" ] && sed -i s/old/new/ "$1";; esac\nexit 0\n'
    )
    editor.chmod(0o755)
    fake_daemon.on(
        "memory.list",
        {
            "instruction_files": [],
            "memories": [
                {"path": str(memory), "name": "Café note", "type": "user", "description": "d"}
            ],
        },
    )
    fake_daemon.on("settings.get", {"settings": {}, "sources": {}})
    text = "---\nname: Café note\ndescription: old\ntype: user\n---\nbody é\n"
    fake_daemon.on("memory.read", {"content": text})
    fake_daemon.on("memory.snapshot", {"version": "1"})
    fake_daemon.on("memory.write", {"warnings": []})
    env = memctl_env(LC_ALL="C", PYTHONUTF8="0", TERM="xterm", VISUAL=str(editor))
    env.pop("PYTHONIOENCODING", None)

    socket = ["--socket", str(fake_daemon.socket_path)]
    listed = subprocess.run(
        [sys.executable, "-m", "memctl", *socket, "memory", "--list"],
        cwd=project,
        capture_output=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert (listed.returncode, listed.stderr) == (0, b"")
    assert b"Caf\\xe9 note" in listed.stdout

    term = Pty([*socket, "memory"], env, project)
    try:
        term.wait_for(term.screen_has("Up/Down move"), "the first screen")
        assert f"memory for {tmp_path}/caf\\xe9" in term.text()
        term.send("project memory")
        term.wait_for(term.screen_has("Filter: project memory"), "the filter")
        term.send("\r")
        term.wait_for(term.screen_has("(new, created empty)"), "the file created and edited")
        assert (project / "CLAUDE.md").read_bytes() == b""
        term.send("note")
        term.wait_for(term.screen_has("Filter: note"), "the memory filter")
        term.send("\r")
        term.wait_for(term.screen_has("Open in editor"), "the memory menu")
        term.send("\r")
        term.wait_for(term.screen_has("saved note_caf\\xe9.md"), "the memory saved")
        term.send("\x1b")
        assert term.close() == 0
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
            term.close()
    opened = log.read_bytes().splitlines()
    assert opened[0] == bytes(project / "CLAUDE.md")
    assert opened[1].endswith(b"/note_caf\xc3\xa9.md")
    assert [call["file"] for call in fake_daemon.calls("memory.write")] == [str(memory)]
    assert fake_daemon.calls("memory.write")[0]["description"] == "new"
