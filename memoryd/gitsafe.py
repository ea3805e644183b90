"""git's `safe.directory`: the repositories another user owns that the user trusts anyway.

git (since CVE-2022-24765) refuses a repository whose folder, `.git` or git dir another user
owns, unless `safe.directory` in the protected configuration names it: the system file
(`$GIT_CONFIG_SYSTEM`, else `/etc/gitconfig`; none with `GIT_CONFIG_NOSYSTEM`) and the global
ones (`$GIT_CONFIG_GLOBAL`, else `$XDG_CONFIG_HOME/git/config` and `~/.gitconfig`), read in
that order with their `include.path`s; never the repository's own config. A value of `*`
trusts every repository, an empty one empties the list read so far, and any other value is
the repository's path after `~` expansion, compared as written.

`read_config` is the config reader (git's grammar, `include.path` followed) that gitfacts
reads a repository's remote with too. A config and its includes may read 64 files and 2 MiB in
all, else nothing in them counts (a downloaded folder's `.git/config` is read on the daemon's
loop; git has no such bound).

Only what every git since 2.36 accepts is accepted here: git 2.46 also takes `/*` after a
folder (every repository below it), `.`, and values that name the folder through a link or
with a trailing slash; older ones (2.39 on Debian 12) do not, and a repository a git refuses
must not be trusted. `includeIf` is not followed (its conditions need a repository), nor are
`-c` / `GIT_CONFIG_PARAMETERS` / `GIT_CONFIG_COUNT` settings of one git command.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable
from pathlib import Path

from memoryd.fsutil import read_regular_file

_CONFIG_CAP = 1024 * 1024
_MAX_INCLUDE_DEPTH = 10  # git's own limit
# What one config file and its includes may read in all. git has no such limit, but git is not
# the daemon's event loop: includes that fan out (200 `path` lines in each of 4 levels) were
# 200**4 reads, and a file including itself read 10 MiB.
_MAX_FILES = 64
_TOTAL_CAP = 2 * _CONFIG_CAP


class BadConfig(Exception):
    """A line git would refuse to read (or includes nested too deep): git then refuses every
    command, so nothing in it counts."""


Entry = tuple[str, str, str | None]  # (section, key, value); a key alone has the value None
# Whether an `includeIf "<condition>"` of the file at the path holds.
Condition = Callable[[str, Path], bool]


def config_files() -> tuple[Path, ...]:
    """The system and global config files git reads `safe.directory` from, in order."""
    files: list[Path] = []
    if not _env_true("GIT_CONFIG_NOSYSTEM"):
        files.append(Path(os.environ.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig"))
    explicit = os.environ.get("GIT_CONFIG_GLOBAL")
    if explicit:
        files.append(Path(explicit))
    else:
        home = os.environ.get("HOME")
        xdg = os.environ.get("XDG_CONFIG_HOME")
        if xdg:
            files.append(Path(xdg) / "git" / "config")
        elif home:
            files.append(Path(home) / ".config" / "git" / "config")
        if home:
            files.append(Path(home) / ".gitconfig")
    return tuple(files)


def is_safe_directory(path: Path) -> bool:
    """Whether `safe.directory` trusts the repository whose worktree (or git dir) is `path`,
    a real path."""
    values: list[str | None] = []
    try:
        for file in config_files():
            values += [v for s, k, v in read_config(file) if (s, k) == ("safe", "directory")]
    except BadConfig:
        return False
    safe = False
    for value in values:
        if not value:
            safe = False
        elif value == "*" or expand_home(value) == str(path):
            safe = True
    return safe


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def expand_home(value: str) -> str | None:
    """git's `~` and `~user` expansion of a path value; None when it cannot be expanded."""
    if not value.startswith("~"):
        return value
    user = value[1:].partition("/")[0]
    if user:
        try:
            home = pwd.getpwnam(user).pw_dir
        except KeyError:
            return None
    else:
        home = os.environ.get("HOME") or ""
        if not home:
            return None
    return home + value[1 + len(user) :]


def read_config(
    file: Path, include_if: Condition | None = None, read: list[Path] | None = None
) -> list[Entry]:
    """Every variable of `file` and of the files it includes (`include.path`, and the
    `includeIf` ones whose condition `include_if` holds), in the order git reads them. A
    missing or unreadable file has none, as git skips it; raises BadConfig where git fails.
    Each file looked for is added to `read`. More than `_MAX_FILES` files or `_TOTAL_CAP`
    bytes in all is BadConfig too."""
    entries: list[Entry] = []
    _read(file, entries, 0, include_if, read if read is not None else [], _Budget())
    return entries


class _Budget:
    def __init__(self) -> None:
        self.files = _MAX_FILES
        self.bytes = _TOTAL_CAP


def _read(
    file: Path,
    out: list[Entry],
    depth: int,
    include_if: Condition | None,
    read: list[Path],
    budget: _Budget,
) -> None:
    budget.files -= 1
    if budget.files < 0:
        raise BadConfig
    read.append(file)
    try:
        data = read_regular_file(file, min(_CONFIG_CAP, budget.bytes), follow_links=True)
    except OSError:
        return  # missing or unreadable: git skips it too
    budget.bytes -= len(data)
    if len(data) > _CONFIG_CAP or budget.bytes < 0:
        raise BadConfig
    for entry in _entries(data.decode("utf-8", errors="replace")):
        out.append(entry)
        section, key, value = entry
        if key != "path" or not value:
            continue
        if section == "include" or (
            section.startswith('includeif "')
            and include_if is not None
            and include_if(section[len('includeif "') : -1], file)
        ):
            if depth >= _MAX_INCLUDE_DEPTH:
                raise BadConfig
            target = expand_home(value)
            if target is not None:  # relative to the including file, as git reads it
                _read(file.parent / target, out, depth + 1, include_if, read, budget)


def _entries(text: str) -> list[Entry]:
    """(section, key, value) of every variable, in order; sections with a subsection are
    named `name "sub"` (`[name.sub]`, git's older spelling, too, its subsection in lower case
    as git reads it) so they never pass for `safe` or `include`. Follows git's config.c."""
    text = text.replace("\r\n", "\n")
    if text.startswith("\ufeff"):
        text = text[1:]
    entries: list[Entry] = []
    section: str | None = None
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\n":
            i += 1
        elif c in "#;":
            i = _line_end(text, i)
        elif c == "[":
            section, i = _section(text, i + 1)
        elif c.isalpha():
            start = i
            while i < n and (text[i].isalnum() or text[i] == "-"):
                i += 1
            key = text[start:i].lower()
            while i < n and text[i] in " \t":
                i += 1
            value: str | None = None
            if i < n and text[i] == "=":
                value, i = _value(text, i + 1)
            elif i < n and text[i] != "\n":
                raise BadConfig
            if section is None:
                raise BadConfig
            entries.append((section, key, value))
        else:
            raise BadConfig
    return entries


def _line_end(text: str, i: int) -> int:
    end = text.find("\n", i)
    return len(text) if end < 0 else end + 1


def _section(text: str, i: int) -> tuple[str, int]:
    start = i
    while i < len(text) and (text[i].isalnum() or text[i] in "-."):
        i += 1
    name = text[start:i].lower()
    if i < len(text) and text[i] == "]":
        base, dot, lowered = name.partition(".")
        return (f'{base} "{lowered}"' if dot else name), i + 1
    if i >= len(text) or text[i] not in " \t":
        raise BadConfig
    while i < len(text) and text[i] in " \t":
        i += 1
    if i >= len(text) or text[i] != '"':
        raise BadConfig
    i += 1
    sub: list[str] = []
    while i < len(text) and text[i] != '"':
        if text[i] == "\n":
            raise BadConfig
        if text[i] == "\\":
            i += 1
            if i >= len(text) or text[i] == "\n":
                raise BadConfig
        sub.append(text[i])
        i += 1
    if text[i + 1 : i + 2] != "]":
        raise BadConfig
    return f'{name} "{"".join(sub)}"', i + 2


_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "b": "\b"}


def _value(text: str, i: int) -> tuple[str, int]:
    """A value after `=`: quotes kept together, escapes, `\\` + newline continues the line,
    a comment outside quotes ends it, whitespace around it dropped."""
    out: list[str] = []
    pending_space = 0
    quoted = False
    n = len(text)
    while True:
        if i >= n:
            if quoted:
                raise BadConfig
            break
        c = text[i]
        i += 1
        if c == "\n":
            if quoted:
                raise BadConfig
            break
        if not quoted and c in " \t":
            if out:
                pending_space += 1
            continue
        if not quoted and c in "#;":
            i = _line_end(text, i)
            break
        if pending_space:
            out.append(" " * pending_space)
            pending_space = 0
        if c == "\\":
            if i >= n:
                raise BadConfig
            escaped = text[i]
            i += 1
            if escaped == "\n":
                continue
            if escaped not in _ESCAPES:
                raise BadConfig
            out.append(_ESCAPES[escaped])
        elif c == '"':
            quoted = not quoted
        else:
            out.append(c)
    return "".join(out), i
