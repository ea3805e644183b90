"""Helpers shared by the Layer 1 tests."""

from __future__ import annotations

from pathlib import Path

from memoryd.rules.model import ContextResult


def loaded(result: ContextResult, root: Path) -> list[str]:
    """Loaded paths under `root`, relative, in load order."""
    return [str(f.path.relative_to(root)) for f in result.files if f.path.is_relative_to(root)]


def skips(result: ContextResult, root: Path) -> dict[str, str]:
    return {
        str(s.path.relative_to(root)): s.reason
        for s in result.skipped
        if s.path.is_relative_to(root)
    }
