"""The units `memctl service install` writes name odd paths as systemd will read them: a HOME
with spaces, quotes, `%`, a backslash, `$$` or `${…}` (systemd's unquoting, specifiers and
ExecStart's variable substitution emulated from systemd.service(5) and systemd.exec(5))."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from memctl import service_units

ODD = [
    "John Smith",
    'it\'s "quoted"',
    "100%h done",
    "back\\slash",
    "a$$b",
    "${HOME}x",
    "$USER",
]
_VARIABLE = re.compile(r"\$\$|\$\{(\w+)\}")


def _words(value: str) -> list[str]:
    # Double quotes and backslash escapes as systemd unquotes them; `%%` is one `%`.
    return [word.replace("%%", "%") for word in shlex.split(value)]


def _substituted(word: str) -> str:
    """ExecStart's substitution of one word after the program, with an environment in which
    every variable is set (so a `${NAME}` that reaches systemd shows)."""
    return _VARIABLE.sub(lambda m: "$" if m.group() == "$$" else f"<{m.group(1)}>", word)


def _directive(text: str, name: str) -> str:
    (line,) = [x for x in text.splitlines() if x.startswith(f"{name}=")]
    return line.split("=", 1)[1]


@pytest.mark.parametrize("odd", ODD)
def test_exec_start_and_environment_carry_a_home_of_odd_characters(
    tmp_path: Path, odd: str
) -> None:
    home = tmp_path / odd
    program = home / "venv $x" / "bin" / "memoryd"
    command = [str(program), "--flag-of-$HOME"]
    socket = home / "run" / "memoryd.sock"
    log = home / ".local" / "state" / "memoryd" / "memoryd.log"
    environment = {"XDG_STATE_HOME": str(home / ".local" / "state")}
    socket_unit, service = service_units.systemd_units(
        tmp_path / "units", command, socket, log, None, environment
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
