"""The project a command acts on: `--cwd DIR`, else the directory memctl runs in."""

from __future__ import annotations

import argparse
import os
from typing import Any

CWD_HELP = "the project directory (default: the current one)"


def add_cwd_argument(parser: Any, help: str = CWD_HELP) -> None:
    parser.add_argument("--cwd", default=None, help=help)


def project_cwd(args: argparse.Namespace) -> str:
    """The absolute `--cwd`, else the current directory's: what the daemon resolves."""
    return os.path.abspath(args.cwd or os.getcwd())
