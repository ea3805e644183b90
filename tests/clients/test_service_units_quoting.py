"""The units `memctl service install` writes name odd paths as systemd will read them: a HOME
with spaces, quotes, `%`, a backslash, `$$` or `${…}` (systemd's unquoting, specifiers and
ExecStart's variable substitution emulated from systemd.service(5) and systemd.exec(5))."""

from __future__ import annotations

import json
import plistlib
import re
import subprocess
from pathlib import Path

import pytest

from memctl import service_units
from tests.clients.conftest import memctl_env, run_memctl

ODD = [
    "John Smith",
    'it\'s "quoted"',
    "100%h done",
    "back\\slash",
    "a$$b",
    "${HOME}x",
    "$USER",
    "line\nExecStartPre=/bin/touch /tmp/pwned\n#",  # a line break ended ExecStart's line
    "cr\rbell\x07del\x7ftab\t",
]
_VARIABLE = re.compile(r"\$\$|\$\{(\w+)\}")


_C_ESCAPES = {"n": "\n", "r": "\r", "t": "\t"}


def _words(value: str) -> list[str]:
    """The words of a directive's value as systemd splits them: double quotes, C escapes
    (`\\n`, `\\x01`, `\\\\`, `\\"`); `%%` is one `%`."""
    words: list[str] = []
    i, n = 0, len(value)
    while i < n:
        if value[i] in " \t":
            i += 1
            continue
        word, quoted = "", False
        while i < n and (quoted or value[i] not in " \t"):
            c = value[i]
            if c == '"':
                quoted, i = not quoted, i + 1
            elif c == "\\" and value[i + 1] == "x":
                word, i = word + chr(int(value[i + 2 : i + 4], 16)), i + 4
            elif c == "\\":
                word, i = word + _C_ESCAPES.get(value[i + 1], value[i + 1]), i + 2
            else:
                word, i = word + c, i + 1
        words.append(word.replace("%%", "%"))
    return words


def _substituted(word: str) -> str:
    """ExecStart's substitution of one word after the program, with an environment in which
    every variable is set (so a `${NAME}` that reaches systemd shows)."""
    return _VARIABLE.sub(lambda m: "$" if m.group() == "$$" else f"<{m.group(1)}>", word)


def _directive(text: str, name: str) -> str:
    (line,) = [x for x in text.split("\n") if x.startswith(f"{name}=")]
    return line.split("=", 1)[1]


@pytest.mark.parametrize("odd", ODD)
def test_exec_start_and_environment_carry_a_home_of_odd_characters(
    tmp_path: Path, odd: str
) -> None:
    home = tmp_path / odd
    program = home / "venv $x" / "bin" / "memoryd"
    command = [str(program), "--flag-of-$HOME"]
    # ListenStream= takes a path as it is: install refuses a socket path with a control
    # character (below), so here such a HOME holds no socket.
    socket = (tmp_path if "\n" in odd else home) / "run" / "memoryd.sock"
    log = home / ".local" / "state" / "memoryd" / "memoryd.log"
    environment = {"XDG_STATE_HOME": str(home / ".local" / "state")}
    env_file = home / ".config" / "memoryd" / "env"
    socket_unit, service = service_units.systemd_units(
        tmp_path / "units", command, socket, log, None, environment, env_file=env_file
    )
    words = _words(_directive(service.text, "ExecStart"))
    # The program's path is taken as written; the arguments go through substitution.
    assert [words[0], *map(_substituted, words[1:])] == [
        *command,
        "--socket",
        str(socket),
        "--log-file",
        str(log),
        "--idle-timeout",
        "3600",
    ]
    # Environment= does no substitution: `$` is itself there.
    assert _words(_directive(service.text, "Environment")) == [
        f"XDG_STATE_HOME={environment['XDG_STATE_HOME']}"
    ]
    assert _directive(socket_unit.text, "ListenStream").replace("%%", "%") == str(socket)


def _install(
    tmp_path: Path, home: Path, manager: str, *flags: str
) -> subprocess.CompletedProcess[str]:
    home.mkdir(parents=True, exist_ok=True)
    env = memctl_env(HOME=str(home), PATH="/nonexistent")  # no systemctl, no launchctl
    for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        env.pop(name, None)
    return run_memctl(*flags, "service", "install", "--manager", manager, "--dry-run", env=env)


def test_a_socket_path_with_a_line_break_is_refused(tmp_path: Path) -> None:
    sock = tmp_path / "run\nAccept=yes" / "m.sock"
    done = _install(tmp_path, tmp_path / "home", "systemd", "--socket", str(sock))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "holds a control character, which a unit file cannot name" in done.stdout
    assert "would write" not in done.stdout


def test_a_plist_names_a_home_with_a_line_break_and_refuses_what_xml_cannot_write(
    tmp_path: Path,
) -> None:
    sock = tmp_path / "m.sock"
    plain = _install(tmp_path, tmp_path / "a\nb", "launchd", "--json", "--socket", str(sock))
    text = "\n".join(json.loads(plain.stdout)["lines"])
    start = text.index("<?xml")
    plist = plistlib.loads(text[start : text.index("</plist>") + len("</plist>")].encode())
    assert plist["StandardErrorPath"] == str(tmp_path / "a\nb" / "Library/Logs/memoryd/memoryd.err")
    for odd, stray in (("bell\x07", "\x07"), ("cr\rx", "\r")):
        done = _install(tmp_path, tmp_path / odd, "launchd", "--socket", str(sock))
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert f"would name a path holding the control character {stray!r}" in done.stdout
