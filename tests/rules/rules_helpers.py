"""Helpers shared by the Layer 1 tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memoryd.rules.model import ContextRequest, ContextResult
from tests.conftest import IsolatedEnv


def request_in(env: IsolatedEnv, cwd: Path, **options: Any) -> ContextRequest:
    """A request for `cwd` (its own project root unless given) in the test's isolated HOME."""
    options.setdefault("project_root", cwd)
    return ContextRequest(
        cwd=cwd, config_dir=env.config_dir, managed_dir=env.managed_dir, home=env.home, **options
    )


def loaded(result: ContextResult, root: Path) -> list[str]:
    """Loaded paths under `root`, relative, in load order."""
    return [str(f.path.relative_to(root)) for f in result.files if f.path.is_relative_to(root)]


def skips(result: ContextResult, root: Path) -> dict[str, str]:
    return {
        str(s.path.relative_to(root)): s.reason
        for s in result.skipped
        if s.path.is_relative_to(root)
    }
