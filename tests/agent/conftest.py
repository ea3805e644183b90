"""Fixtures shared by the agent tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def linked_memory(tmp_path: Path) -> Path:
    """A memory dir known by a link to it (a linked ~/.claude): the link, as the model is given it."""
    real_dir = tmp_path / "real-memory"
    real_dir.mkdir()
    linked = tmp_path / "linked"
    linked.symlink_to(real_dir)
    return linked
