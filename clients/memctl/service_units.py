"""The login-service files `memctl service install` writes, rendered from the shipped templates.

The templates (`memctl/units/`, also at the repository's `systemd/` and `launchd/`) carry
placeholders: `@MEMORYD@` the absolute command of the installed daemon, `@SOCKET@` the socket
the clients' rule computes, `@LOG_FILE@` (and for launchd `@ERR_FILE@`). Lines starting `#@`
describe the template and are dropped, and so is the plist's XML comment. Pure: paths in, file texts out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from memctl import installation

TEMPLATES = Path(__file__).parent / "units"
SYSTEMD_UNITS = ("memoryd.socket", "memoryd.service")
LAUNCHD_LABEL = "com.memoryd.daemon"
# The first line of every file memctl writes: how `uninstall` knows a file is its own.
MARKER = "written by `memctl service install`"


@dataclass(frozen=True)
class UnitFile:
    path: Path
    text: str


def daemon_command() -> list[str]:
    """The running installation's daemon, as an absolute command (never a bare name)."""
    return installation.command("memoryd", "memoryd")


def _xml_text(value: str) -> str:
    """`value` as XML character data (xml.sax.saxutils.escape, without its ~20 ms import)."""
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# The plist template's own comment names the placeholders, which become paths: a path with
# `--` (HOME=/Users/jean--luc) is not allowed in an XML comment. It is dropped, as `#@` lines are.
_XML_COMMENT = re.compile(r"[ \t]*<!--.*?-->[ \t]*\n?", re.DOTALL)


def _template(name: str) -> str:
    text = (TEMPLATES / name).read_text(encoding="utf-8")
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("#@"))


def _systemd_word(value: str) -> str:
    # `%` starts a specifier in unit files; whitespace would split the word.
    return _systemd_quoted(value.replace("%", "%%"))


def _systemd_quoted(value: str) -> str:
    """One word of a command line in a unit file (its `%` specifiers already written)."""
    if any(c.isspace() or c in "\"'\\" for c in value):
        value = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return value


def systemd_socket_spec(socket: Path, runtime_dir: str | None) -> str:
    """`%t/…` when the socket is in the runtime dir (what systemd's %t is), else the path."""
    if runtime_dir:
        try:
            return "%t/" + socket.relative_to(runtime_dir).as_posix().replace("%", "%%")
        except ValueError:
            pass
    return socket.as_posix().replace("%", "%%")


def systemd_units(
    unit_dir: Path, command: list[str], socket: Path, log_file: Path, runtime_dir: str | None
) -> list[UnitFile]:
    socket_spec = systemd_socket_spec(socket, runtime_dir)
    values = {
        "@MEMORYD@": " ".join(_systemd_word(w) for w in command),
        # ExecStart splits at whitespace, ListenStream= does not: one spec, two spellings.
        "@SOCKET_ARG@": _systemd_quoted(socket_spec),
        "@SOCKET@": socket_spec,
        "@LOG_FILE@": _systemd_word(str(log_file)),
    }
    files = []
    for name in SYSTEMD_UNITS:
        text = _template(name)
        for key, value in values.items():
            text = text.replace(key, value)
        files.append(UnitFile(unit_dir / name, f"# {MARKER}\n{text}"))
    return files


def launchd_plist(
    agents_dir: Path, command: list[str], socket: Path, log_file: Path, err_file: Path
) -> UnitFile:
    lines: list[str] = []
    template = _XML_COMMENT.sub("", _template(f"{LAUNCHD_LABEL}.plist"))
    for line in template.splitlines(keepends=True):
        if line.strip() == "<string>@MEMORYD@</string>":
            indent = line[: len(line) - len(line.lstrip())]
            lines.extend(f"{indent}<string>{_xml_text(word)}</string>\n" for word in command)
            continue
        for key, value in (
            ("@SOCKET@", socket),
            ("@LOG_FILE@", log_file),
            ("@ERR_FILE@", err_file),
        ):
            line = line.replace(key, _xml_text(str(value)))
        lines.append(line)
    text = "".join(lines)
    # The marker goes in a comment after the XML declaration, which must stay first.
    head, rest = text.split("\n", 1)
    return UnitFile(agents_dir / f"{LAUNCHD_LABEL}.plist", f"{head}\n<!-- {MARKER} -->\n{rest}")
