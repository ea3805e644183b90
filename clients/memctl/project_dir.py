"""The project a command acts on: `--cwd DIR`, else the directory memctl runs in."""

from __future__ import annotations

import argparse
import os
from typing import Any

from memctl.output import EXIT_USAGE, fail
from memoryd_client.paths import utf8_argument

CWD_HELP = "the project directory (default: the current one)"


def add_cwd_argument(parser: Any, help: str = CWD_HELP) -> None:
    parser.add_argument("--cwd", default=None, help=help)


def not_utf8(path: str, given: bool) -> str:
    """Why `path`, whose bytes are not UTF-8, cannot be sent to the daemon (the protocol is
    JSON, its strings UTF-8: a folder named in other bytes, Latin-1 say, reached it as U+FFFD
    and came back "no such directory: …�…"), with what to do instead."""
    shown = os.fsencode(path).decode("utf-8", "backslashreplace")
    where = "--cwd" if given else "the current directory"
    return (
        f"{where} {shown} cannot be sent to memoryd: its path is not UTF-8, and the "
        "protocol is JSON (UTF-8); pass --cwd with a UTF-8 path to the project (a symbolic "
        "link with a UTF-8 name will do), or rename the folder"
    )


def project_cwd(args: argparse.Namespace) -> str:
    """The absolute `--cwd`, else the current directory's, as UTF-8 text: what the daemon
    resolves. A path that is not UTF-8 ends memctl (exit 2) with `not_utf8`'s message."""
    try:
        cwd = os.path.abspath(args.cwd or os.getcwd())
    except FileNotFoundError:  # getcwd (or abspath of a relative --cwd) in a deleted folder
        message = (
            "the working directory no longer exists: run memctl from a folder that exists, "
            "or pass --cwd with an absolute path"
        )
        raise SystemExit(fail(args, message, EXIT_USAGE)) from None
    # Under an ASCII locale a UTF-8 folder ("café") is lone surrogates here: the same text.
    sendable = utf8_argument(cwd)
    if sendable is None:
        raise SystemExit(fail(args, not_utf8(cwd, given=args.cwd is not None), EXIT_USAGE))
    return sendable
