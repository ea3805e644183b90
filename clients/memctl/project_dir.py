"""The project a command acts on: `--cwd DIR`, else the directory memctl runs in."""

from __future__ import annotations

import argparse
import os
from typing import Any

from memctl.output import EXIT_USAGE, fail
from memoryd_client.paths import not_utf8_folder, utf8_argument

CWD_HELP = "the project directory (default: the current one)"


def add_cwd_argument(parser: Any, help: str = CWD_HELP) -> None:
    parser.add_argument("--cwd", default=None, help=help)


def project_cwd(args: argparse.Namespace) -> str:
    """The absolute `--cwd`, else the current directory's, as UTF-8 text: what the daemon
    resolves. A path that is not UTF-8 ends memctl (exit 2) with `not_utf8_folder`'s message."""
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
        where = "the current directory" if args.cwd is None else "--cwd"
        raise SystemExit(fail(args, not_utf8_folder(cwd, where, "--cwd"), EXIT_USAGE))
    return sendable
