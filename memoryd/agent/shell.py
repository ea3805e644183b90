"""The read-only shell: a parser and allow-list, never a shell.

A command is split with a small quote-aware scanner, then `shlex`; anything a shell would
interpret — pipes, redirection, chaining, substitution, expansion, globbing — is refused
before the program is looked at. Only `ls find cat stat wc head tail` may run, with the
options that can write, follow links out, or read file lists from elsewhere refused. Every
path argument is then checked against the agent's policy by the caller (`ShellPlan.paths`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from memoryd.agent.policy import Denied

PROGRAMS = frozenset({"ls", "find", "cat", "stat", "wc", "head", "tail"})
MAX_COMMAND = 4_000

# Outside single quotes these always mean shell syntax (substitution, expansion).
_ALWAYS = {"$": "variable expansion or command substitution", "`": "command substitution"}
# Outside any quotes these are operators.
_OPERATORS = {
    ";": "command chaining",
    "&": "background or chaining",
    "|": "pipes",
    "<": "redirection",
    ">": "redirection",
    "(": "subshells",
    ")": "subshells",
    "{": "brace expansion",
    "}": "brace expansion",
    "\n": "multiple commands",
    "\r": "multiple commands",
}
_GLOBS = frozenset("*?[")

# find primaries that run programs, write files, delete, or read their starting points from a
# file we did not check (`-files0-from`, GNU findutils 4.9+).
_FIND_FORBIDDEN = frozenset(
    {
        "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
        "-fls", "-files0-from",
    }
)  # fmt: skip
# find options that follow symlinks (out of the allowed roots).
_FIND_FOLLOW = frozenset({"-L", "-H", "-follow"})
# find primaries whose next argument is a file name, not a pattern.
_FIND_FILE_ARGS = frozenset({"-newer", "-anewer", "-cnewer", "-samefile"})
# find primaries whose next argument is a value (a pattern, a number, a type...).
_FIND_VALUE_ARGS = frozenset(
    {
        "-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex",
        "-type", "-xtype", "-size", "-mtime", "-mmin", "-atime", "-amin", "-ctime", "-cmin",
        "-maxdepth", "-mindepth", "-perm", "-user", "-group", "-uid", "-gid", "-links",
        "-inum", "-printf", "-regextype", "-newermt", "-used", "-fstype", "-context",
    }
)  # fmt: skip
# Options that make these programs dereference links, follow files forever, or read a list of
# file names from a file we did not check.
_DENIED_OPTIONS = {
    "ls": ("-L", "--dereference"),
    "stat": ("-L", "--dereference"),
    "wc": ("--files0-from",),
    "tail": ("-f", "-F", "--follow", "--retry"),
    "head": (),
    "cat": (),
}
# Short options that take a value as the next argument.
_VALUE_OPTIONS = {
    "head": frozenset({"-n", "-c"}),
    "tail": frozenset({"-n", "-c", "-s", "--pid"}),
    "stat": frozenset({"-c", "--format", "--printf"}),
    "ls": frozenset(
        {"-I", "--ignore", "-w", "--width", "-T", "--tabsize", "--hide", "--block-size"}
    ),
    "wc": frozenset(),
    "cat": frozenset(),
}


@dataclass(frozen=True)
class ShellPlan:
    """A command that passed the syntax and allow-list checks."""

    program: str
    argv: tuple[str, ...]  # the full argv, program first
    paths: tuple[str, ...]  # the arguments that name files, to check against the policy


def _check_syntax(command: str) -> None:
    quote: str | None = None
    escaped = False
    for ch in command:
        if escaped:
            escaped = False
            continue
        if quote == "'":
            if ch == "'":
                quote = None
            continue
        if ch in _ALWAYS:
            raise Denied(f"{_ALWAYS[ch]} ({ch!r}) is not allowed in the read-only shell")
        if quote == '"':
            if ch == "\\":
                escaped = True
            elif ch == '"':
                quote = None
            continue
        if ch == "\\":
            escaped = True
        elif ch in ("'", '"'):
            quote = ch
        elif ch in _OPERATORS:
            raise Denied(
                f"{_OPERATORS[ch]} ({ch!r}) is not allowed: run one command, no shell syntax"
            )
        elif ch in _GLOBS:
            raise Denied(f"unquoted glob {ch!r}: globs are not expanded here; use the Glob tool")
        elif ch == "~":
            raise Denied("'~' is not expanded here; use an absolute path")
    if quote is not None:
        raise Denied("unterminated quote in the command")


def parse(command: str) -> ShellPlan:
    """Check `command` and return what to run, or raise Denied with the reason."""
    if not isinstance(command, str) or not command.strip():
        raise Denied("an empty command")
    if len(command) > MAX_COMMAND:
        raise Denied(f"the command is longer than {MAX_COMMAND} characters")
    if "\x00" in command:
        raise Denied("the command contains a NUL byte")
    _check_syntax(command)
    try:
        argv = shlex.split(command, posix=True)
    except ValueError as exc:
        raise Denied(f"cannot parse the command: {exc}") from exc
    if not argv:
        raise Denied("an empty command")
    program = argv[0]
    if "=" in program:
        raise Denied("environment assignments are not allowed")
    if program not in PROGRAMS:
        allowed = " ".join(sorted(PROGRAMS))
        raise Denied(f"{program!r} is not allowed; the read-only shell runs only: {allowed}")
    args = argv[1:]
    paths = _find_paths(args) if program == "find" else _plain_paths(program, args)
    return ShellPlan(program, tuple(argv), tuple(paths))


def _plain_paths(program: str, args: list[str]) -> list[str]:
    denied = _DENIED_OPTIONS[program]
    takes_value = _VALUE_OPTIONS[program]
    paths: list[str] = []
    options_done = False
    skip_next = False
    for arg in args:
        if skip_next:
            skip_next = False
            continue
        if options_done or arg == "-" or not arg.startswith("-"):
            if arg == "-":
                raise Denied("reading standard input is not allowed")
            paths.append(arg)
            continue
        if arg == "--":
            options_done = True
            continue
        name = arg.split("=", 1)[0]
        if _is_denied_option(arg, name, denied):
            raise Denied(f"option {arg!r} of {program} is not allowed")
        if arg in takes_value:
            skip_next = True
    return paths


def _is_denied_option(arg: str, name: str, denied: tuple[str, ...]) -> bool:
    if name.startswith("--"):
        # GNU getopt accepts any unambiguous prefix of a long option (`--files0` is
        # `--files0-from`, `--foll` is `--follow`), so a prefix of a denied one is denied too.
        return any(d.startswith("--") and d.startswith(name) for d in denied)
    return name in denied or any(f"-{c}" in denied for c in arg[1:])


def _find_paths(args: list[str]) -> list[str]:
    paths: list[str] = []
    i = 0
    # Leading options, as GNU find reads them (-P is the safe default; -L/-H follow links;
    # -D takes a value; `--` ends them), then the starting points: each one is checked.
    while i < len(args):
        arg = args[i]
        if arg in _FIND_FOLLOW:
            raise Denied(f"find {arg} follows symlinks and is not allowed")
        if arg == "-D":
            raise Denied("find -D (debug output) is not allowed in the read-only shell")
        if arg == "--":
            i += 1
            break
        if arg != "-P" and not arg.startswith("-O"):
            break
        i += 1
    while i < len(args) and not args[i].startswith("-") and args[i] not in ("!", "(", ")"):
        paths.append(args[i])
        i += 1
    if not paths:
        paths.append(".")
    while i < len(args):
        arg = args[i]
        if arg in _FIND_FORBIDDEN:
            raise Denied(f"find {arg} is not allowed in the read-only shell")
        if arg in _FIND_FOLLOW:
            raise Denied(f"find {arg} follows symlinks and is not allowed")
        if arg in _FIND_FILE_ARGS or _is_newer_xy_file(arg):
            if i + 1 >= len(args):
                raise Denied(f"find {arg} needs a file")
            paths.append(args[i + 1])
            i += 2
            continue
        if arg in _FIND_VALUE_ARGS:
            i += 2
            continue
        i += 1
    return paths


def _is_newer_xy_file(arg: str) -> bool:
    """`-newerXY REF`: REF names a file unless Y is `t` (then it is a date)."""
    return len(arg) == 8 and arg.startswith("-newer") and arg[7] != "t"
