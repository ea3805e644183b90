"""memctl's global flags (`--socket`, `--json`), accepted before the command and after it.

Users type `memctl status --json` as often as `memctl --json status`; argparse only knows a
parser's own flags, so every subcommand (and sub-subcommand) gets the global ones too. There
they default to SUPPRESS: a flag given before the command and not repeated after it keeps its
value instead of being reset by the subcommand's default.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from memoryd_client import paths


def socket_path(text: str) -> Path:
    """`--socket`'s value, for every command and the hooks. An empty one is refused: as a Path
    it is ".", the current folder, and memctl said memoryd was not running there. A leading
    `~` is the home folder, as for $MEMORYD_SOCKET: the value often comes from an editor's or
    Claude Code's JSON settings, where no shell expands it (it was a folder named ~)."""
    if not text:
        raise argparse.ArgumentTypeError(
            "an empty path: give the daemon's socket, or leave --socket out"
        )
    try:
        return Path(paths.expand_home(text))
    except RuntimeError as exc:  # `~` with no usable HOME nor password entry
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_global_flags(parser: argparse.ArgumentParser, default: Any = None) -> None:
    known = parser._option_string_actions  # a command may define one itself (hook: --socket)
    if "--socket" not in known:
        parser.add_argument(
            "--socket",
            type=socket_path,
            default=default,
            help="daemon socket (default: $MEMORYD_SOCKET, …)",
        )
    if "--json" not in known:
        parser.add_argument(
            "--json",
            action="store_true",
            default=False if default is None else default,
            help="print machine-readable JSON",
        )


def accept_after_command(parser: argparse.ArgumentParser) -> None:
    """Give every subcommand below `parser`, at any depth, the global flags."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                add_global_flags(command, default=argparse.SUPPRESS)
                accept_after_command(command)
