"""Fixtures for auto memory tests: a project directory and helpers to write memory files."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import IsolatedEnv

# A plain memory for tests that only need one written.
USER = {
    "type": "user",
    "name": "Prefers short answers",
    "description": "answer style",
    "body": "Keep answers short.",
}


@pytest.fixture
def project(isolated_env: IsolatedEnv) -> Path:
    """A git repository (so the canonical root is known) outside the config dir."""
    root = isolated_env.root / "work" / "repo"
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture
def memdir(isolated_env: IsolatedEnv, project: Path) -> Path:
    """The default memory dir of `project` (not created)."""
    from memoryd.core.project import sanitize_key

    return isolated_env.config_dir / "projects" / sanitize_key(project.resolve()) / "memory"


def memory_text(name: str, description: str, type_: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\ntype: {type_}\n---\n\n{body}\n"
