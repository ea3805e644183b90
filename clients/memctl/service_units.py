"""The login-service files `memctl service install` writes, rendered from the shipped templates.

The templates (`memctl/units/`, also at the repository's `systemd/` and `launchd/`) carry
placeholders: `@MEMORYD@` the absolute command of the installed daemon, `@SOCKET@` the socket
the clients' rule computes, `@LOG_FILE@` (and for launchd `@ERR_FILE@`), `@ENVIRONMENT@` the
variables carried from install's environment. Lines starting `#@` describe the template and are
dropped, and so is the plist's XML comment. Pure: paths in, file texts out.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from memctl import installation

TEMPLATES = Path(__file__).parent / "units"
SYSTEMD_UNITS = ("memoryd.socket", "memoryd.service")
LAUNCHD_LABEL = "com.memoryd.daemon"


def launchd_target() -> str:
    """The LaunchAgent as `launchctl print|kickstart|bootout` name it."""
    return f"gui/{os.getuid()}/{LAUNCHD_LABEL}"


# The first line of every file memctl writes: how `uninstall` knows a file is its own.
MARKER = "written by `memctl service install`"


# What decides which files memoryd reads and writes (and whether it writes auto memory at all),
# read by the daemon and the clients alike. A service manager starts the daemon without the login
# shell's environment, so a daemon run by it would use other files than the hooks and memctl the
# user runs (memories, history and include approvals seemingly gone): install carries them over.
CARRIED_VARIABLES = (
    "CLAUDE_CONFIG_DIR",
    "MEMORYD_AUTO_MEMORY_DIR",
    "MEMORYD_MANAGED_DIR",
    "CLAUDE_CODE_DISABLE_AUTO_MEMORY",
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
)
# Of those, the ones that name a folder: a relative one is ignored (XDG) or depends on the
# working directory, so it is not carried.
_FOLDER_VARIABLES = frozenset(CARRIED_VARIABLES) - {"CLAUDE_CODE_DISABLE_AUTO_MEMORY"}


def carried_environment(environ: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(what the unit sets, in CARRIED_VARIABLES order; what is set but not carried, and why)."""
    carried: dict[str, str] = {}
    left_out: dict[str, str] = {}
    for name in CARRIED_VARIABLES:
        value = environ.get(name)
        if not value:
            continue
        if name in _FOLDER_VARIABLES:
            value = os.path.expanduser(value)
            if not os.path.isabs(value):
                left_out[name] = "not an absolute path"
                continue
        if "\n" in value or "\r" in value:  # a unit file or plist line cannot hold it
            left_out[name] = "holds a line break"
            continue
        carried[name] = value
    return carried, left_out


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


def _exec_word(value: str) -> str:
    """A word of ExecStart= after the program: systemd replaces `${NAME}` in those (and a
    word `$NAME`) when it starts the service, and `$$` is one `$` (a HOME holding `$$` or
    `${…}` named another log file). The program's path and Environment= take `$` as it is."""
    return _systemd_word(value.replace("$", "$$"))


def _systemd_quoted(value: str) -> str:
    """One word of a command line in a unit file (its `%` specifiers already written). A
    control character is written as its C escape, which systemd reads back: a raw line break
    ended the line, and what followed was a directive of its own (`ExecStartPre=…`)."""
    if any(c.isspace() or c in "\"'\\" or _control(c) for c in value):
        value = value.replace("\\", "\\\\").replace('"', '\\"')
        value = (
            '"'
            + "".join(_C_ESCAPES.get(c, f"\\x{ord(c):02x}") if _control(c) else c for c in value)
            + '"'
        )
    return value


_C_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _control(c: str) -> bool:
    return c < " " or c == "\x7f"


def has_control(text: str) -> bool:
    """Does `text` hold a control character (which a unit file's raw value cannot name)?"""
    return any(_control(c) for c in text)


def stray_control(text: str) -> str | None:
    """The first control character of a rendered file but its tabs and line ends, or None:
    one XML 1.0 cannot write (a plist naming a path that holds it), or a carriage return
    (which a plist's reader takes for a line end)."""
    return next((c for c in text if c < " " and c not in "\t\n"), None)


def systemd_socket_spec(socket: Path, runtime_dir: str | None) -> str:
    """`%t/…` when the socket is in the runtime dir (what systemd's %t is), else the path."""
    if runtime_dir:
        try:
            return "%t/" + socket.relative_to(runtime_dir).as_posix().replace("%", "%%")
        except ValueError:
            pass
    return socket.as_posix().replace("%", "%%")


def systemd_units(
    unit_dir: Path,
    command: list[str],
    socket: Path,
    log_file: Path,
    runtime_dir: str | None,
    environment: Mapping[str, str] | None = None,
    *,
    env_file: Path,
) -> list[UnitFile]:
    socket_spec = systemd_socket_spec(socket, runtime_dir)
    lines = [f"Environment={_systemd_word(f'{k}={v}')}\n" for k, v in (environment or {}).items()]
    program, *arguments = command
    values = {
        "@MEMORYD@": " ".join([_systemd_word(program), *map(_exec_word, arguments)]),
        # ExecStart splits at whitespace and replaces variables, ListenStream= does neither:
        # one spec, two spellings.
        "@SOCKET_ARG@": _systemd_quoted(socket_spec.replace("$", "$$")),
        "@SOCKET@": socket_spec,
        "@LOG_FILE@": _exec_word(str(log_file)),
        # EnvironmentFile= takes the rest of its line as the path: `%` escaped, no quoting.
        "@ENV_FILE@": str(env_file).replace("%", "%%"),
        "@ENVIRONMENT@\n": "".join(lines),  # last: no placeholder is looked for in its values
    }
    files = []
    for name in SYSTEMD_UNITS:
        text = _template(name)
        for key, value in values.items():
            text = text.replace(key, value)
        files.append(UnitFile(unit_dir / name, f"# {MARKER}\n{text}"))
    return files


def _plist_environment(environment: Mapping[str, str], indent: str) -> str:
    if not environment:
        return ""
    inner = indent * 2
    entries = "".join(
        f"{inner}<key>{_xml_text(k)}</key>\n{inner}<string>{_xml_text(v)}</string>\n"
        for k, v in environment.items()
    )
    return f"{indent}<key>EnvironmentVariables</key>\n{indent}<dict>\n{entries}{indent}</dict>\n"


def launchd_plist(
    agents_dir: Path,
    command: list[str],
    socket: Path,
    log_file: Path,
    err_file: Path,
    environment: Mapping[str, str] | None = None,
) -> UnitFile:
    lines: list[str] = []
    template = _template(f"{LAUNCHD_LABEL}.plist").replace(
        "    <!-- @ENVIRONMENT@ -->\n", _plist_environment(environment or {}, "    ")
    )
    template = _XML_COMMENT.sub("", template)
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
