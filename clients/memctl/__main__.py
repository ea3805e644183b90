"""`memctl`: start, stop and talk to the memoryd daemon.

Exit codes: 0 ok, 1 the daemon answered with an error, 2 bad usage, 3 the daemon is not
running (or did not become healthy), 4 a timeout.
Each subcommand lives in `memctl/commands/<name>.py` and exposes `register(subparsers)`;
they are found by name, so adding a command means adding a file.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from typing import Any, NoReturn

from memctl import commands
from memctl.global_flags import accept_after_command, add_global_flags
from memctl.output import (
    EXIT_DOWN,
    EXIT_RPC,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    UsageError,
    clipped,
    fail,
    older_daemon_hint,
    quiet_stdout,
    ready_streams,
    stdout_failure,
)
from memoryd_client import DaemonUnavailable, RpcError

# Commands registered by a module of another name; every other command's module is its name.
# Knowing this up front lets a run import just the module it needs (start-up time is a goal).
COMMAND_MODULES = {
    "start": "daemon",
    "stop": "daemon",
    "restart": "daemon",
    "status": "daemon",
    "memory-history": "memory_history",
    "memory-restore": "memory_history",
    "claude-code": "claude_setup",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = Parser(prog="memctl", description="Control and query memoryd.")
    parser.add_argument("--version", action=VersionAction, help="print memctl's version and exit")
    add_global_flags(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in [only] if only else _command_names():
        module = importlib.import_module(f"{commands.__name__}.{name}")
        module.register(sub)
    accept_after_command(parser)  # `memctl status --json` as well as `memctl --json status`
    return parser


class Parser(argparse.ArgumentParser):
    """memctl's parser (and, as add_subparsers' default class, every command's). With `--json`
    a usage error is a JSON object on stdout too, exit 2: it was only argparse's usage text on
    stderr, and a script reading stdout as JSON got nothing to read."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        message = clipped(message)  # argparse echoes the argument it refuses, of any length
        if Parser.json_errors:
            fail(argparse.Namespace(json=True), f"{self.prog}: {message}", EXIT_USAGE)
            sys.exit(EXIT_USAGE)
        super().error(message)


def wants_json(argv: list[str]) -> bool:
    """`--json` among the flags (before a `--`, after which words are values)."""
    words = argv[: argv.index("--")] if "--" in argv else argv
    return "--json" in words


class VersionAction(argparse.Action):
    """`--version`, looked up only when asked for (package metadata is slow to read)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from memoryd_client.version import installed_version

        sys.stdout.write(f"memctl {installed_version()}\n")
        parser.exit()


def module_for(argv: list[str]) -> str | None:
    """The module of the command named in `argv`, when it is plainly there (else None)."""
    rest = iter(argv)
    for word in rest:
        if word == "--socket":
            next(rest, None)
        elif word.startswith("-"):
            if word in ("-h", "--help"):
                return None
        else:
            name = COMMAND_MODULES.get(word, word)
            return name if name in _command_names() else None
    return None


def _command_names() -> list[str]:
    # A directory listing, not pkgutil.iter_modules: pkgutil imports inspect (~8 ms).
    names = {
        entry[:-3]
        for folder in commands.__path__
        for entry in os.listdir(folder)
        if entry.endswith(".py") and not entry.startswith("_")
    }
    return sorted(names)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ready_streams()
    try:
        try:
            code = _run(argv)
        finally:  # after --help's SystemExit too
            sys.stdout.flush()  # what is still buffered fails here, not in the interpreter's exit
    except (OSError, SystemExit) as exc:
        failure = stdout_failure()
        if failure is None:
            if isinstance(exc, BrokenPipeError):  # the reader closed the pipe: it had enough
                quiet_stdout()
                return 0
            raise
        # A full disk (ENOSPC, EIO, EDQUOT, EFBIG): said once, whatever was being written
        # (a reply, an error under --json, --help); it was a traceback out of the write.
        quiet_stdout()
        with contextlib.suppress(OSError):
            sys.stderr.write(f"memctl: cannot write standard output: {failure.strerror}\n")
        return EXIT_RPC
    return code


def _run(argv: list[str]) -> int:
    if module_for(argv) == "hook":
        # Hooks run on every prompt: skip building every subcommand's parser. Global flags may
        # come first (`memctl --socket P hook stop`); the hook's own parser takes them too, and
        # never exits 2 (Claude Code reads that as "block").
        from memctl.commands import hook

        index = argv.index("hook")
        return hook.main([*argv[:index], *argv[index + 1 :]])
    Parser.json_errors = wants_json(argv)
    parser = build_parser(module_for(argv))
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except DaemonUnavailable as exc:
        return fail(args, str(exc), EXIT_DOWN)
    except RpcError as exc:
        hint = older_daemon_hint(exc.code, exc.message)
        return fail(args, f"error {exc.code}: {exc.message}{hint}", EXIT_RPC, code=exc.code)
    except TimeoutError as exc:
        return fail(args, str(exc), EXIT_TIMEOUT)
    except UsageError as exc:
        return fail(args, str(exc), EXIT_USAGE)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
