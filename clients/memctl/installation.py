"""The commands of the installation memctl runs from, by absolute path.

A login service and Claude Code's hooks do not get the user's shell PATH, so what
`memctl service install` and `memctl claude-code install` write names the installation's
scripts absolutely: the script next to this interpreter (a venv, pipx or `uv tool` environment
keeps them together), else this interpreter running the module.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path


def command(script: str, module: str) -> list[str]:
    interpreter = Path(os.path.abspath(sys.executable))  # not resolved: a venv's python is a link
    path = interpreter.parent / script
    if path.is_file() and os.access(path, os.X_OK):
        return [str(path)]
    return [str(interpreter), "-m", module]


def has_module(name: str) -> bool:
    """Whether this installation has `name` (an optional extra's package), without importing it."""
    return importlib.util.find_spec(name) is not None
