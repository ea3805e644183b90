"""Where the user's config home is: the rule clients and the daemon share. Standard library only.

A variable naming a folder counts only when it is an absolute path: a relative HOME or
CLAUDE_CONFIG_DIR named a folder under each process's working directory, so the daemon kept
memory under wherever it was started and its replies carried relative paths.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def home() -> Path:
    """$HOME when absolute, else the home folder of the user's entry in the password database.
    RuntimeError when neither is there."""
    value = os.environ.get("HOME")
    if value and os.path.isabs(value):
        return Path(value)
    import pwd  # only on this fallback path

    try:
        return Path(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        raise RuntimeError(
            f"HOME is {'not set' if not value else f'relative ({value!r})'} and uid "
            f"{os.getuid()} has no entry in the password database: set HOME to an absolute path"
        ) from None


def expand_home(value: str) -> str:
    """`value` with a leading `~` or `~/` made `home()` (`~user` as the system has it)."""
    if value == "~" or value.startswith("~/"):
        return str(home()) + value[1:]
    return os.path.expanduser(value)


def utf8_argument(argument: str) -> str | None:
    """A command-line argument or a path from the OS (the current directory) as the UTF-8
    text its bytes are; None when they are not UTF-8. Under a locale whose encoding is ASCII
    (LC_ALL=C with Python's UTF-8 mode off) the UTF-8 bytes of "café" reach Python as lone
    surrogates: they are read again as UTF-8. The OS calls still take `argument` itself."""
    try:
        argument.encode("utf-8")
    except UnicodeEncodeError:
        try:
            return os.fsencode(argument).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return argument


def os_path(text: str) -> str:
    """A path the protocol names (UTF-8 text, each byte that is not UTF-8 a lone surrogate
    `\\udcXX`, as replies carry it) as this process's OS calls take it: the same text under a
    UTF-8 locale; under an ASCII one (LC_ALL=C, Python's UTF-8 mode off) "café" could not be
    named to open() at all (UnicodeEncodeError), its bytes are lone surrogates there."""
    try:
        return os.fsdecode(text.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:  # a surrogate no byte makes: no file has that name
        return text


def protocol_path(path: str) -> str:
    """`os_path`'s inverse: a path from the OS (an environment variable, a folder the process
    made) as the protocol names it, each byte that is not UTF-8 a lone surrogate."""
    return os.fsencode(path).decode("utf-8", "surrogateescape")


def not_utf8_folder(path: str, named: str, flag: str) -> str:
    """Why the project folder `path`, whose bytes are not UTF-8, cannot be sent to memoryd
    (the protocol is JSON, its strings UTF-8: a folder named in other bytes, Latin-1 say,
    reached it as U+FFFD and came back "no such directory: …�…"), with what to do instead.
    `named`: how the folder is named to the user; `flag`: how they give another."""
    shown = os.fsencode(path).decode("utf-8", "backslashreplace")
    return (
        f"{named} {shown} cannot be sent to memoryd: its path is not UTF-8, and the protocol "
        f"is JSON (UTF-8); pass {flag} with a UTF-8 path to the project (a symbolic link with "
        "a UTF-8 name will do), or rename the folder"
    )


def xdg_dir(name: str) -> Path | None:
    """`$name` (an XDG base directory) when set to an absolute path; the XDG spec has a
    relative one ignored, as it would name a different folder from every working directory."""
    value = os.environ.get(name)
    return Path(value) if value and os.path.isabs(value) else None


def runtime_dir_problem(value: str) -> str | None:
    """Why `value` ($XDG_RUNTIME_DIR) is no runtime folder of the user's, None when it is one.
    The XDG spec has it absolute, owned by the user and open to nobody else (0700); what a
    login session made and `su` without a login left behind, or another user's, is none.
    The socket rule passes such a folder over (the editors apply the same checks)."""
    if not os.path.isabs(value):
        return "it is not an absolute path"
    try:
        info = os.stat(value)
    except FileNotFoundError:
        return "it does not exist (the login session that made it ended, or `su` without a login)"
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a folder"
    if info.st_uid != os.getuid():
        return f"it belongs to uid {info.st_uid}, not to you (uid {os.getuid()})"
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        return f"its mode is {mode:04o}, open to others (a runtime folder is 0700)"
    return None


def socket_name_problem(sock: Path) -> str | None:
    """Why `sock` cannot be a socket's path by its last part alone, None when it can: the
    root folder (`--socket /`, `MEMORYD_SOCKET=/`) or a folder's `..` or `.`, beside which
    no lock, status file or log can be named (`/`: a ValueError traceback; `DIR/..`: the
    daemon's lock left in DIR as `...lock`). The daemon and memctl refuse it alike."""
    if not sock.name:
        what = "is the root folder"
    elif sock.name in (".", ".."):  # pathlib drops a `.` inside a path, never a `..`
        what = f"ends in {sock.name!r}, a folder"
    else:
        return None
    return (
        f"the socket path {sock} {what}, not a socket: give --socket or MEMORYD_SOCKET the "
        "path of memoryd's socket"
    )


def state_dir() -> Path:
    """memoryd's own per-user state (approvals, sync state, history, hook state, logs)."""
    return (xdg_dir("XDG_STATE_HOME") or home() / ".local" / "state") / "memoryd"


def config_dir() -> Path:
    """The config home: user instruction files, projects/, settings.json. $CLAUDE_CONFIG_DIR
    (`~` expanded) when it names an absolute path, else ~/.claude."""
    configured = expand_home(os.environ.get("CLAUDE_CONFIG_DIR", ""))
    return Path(configured) if os.path.isabs(configured) else home() / ".claude"
