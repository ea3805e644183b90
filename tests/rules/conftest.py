"""Fixtures for Layer 1 tests: a folder-tree builder and a loader bound to the temp HOME."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memoryd.rules.loader import load_context
from memoryd.rules.model import ContextResult
from memoryd.rules.realfs import RealFS
from tests.conftest import IsolatedEnv
from tests.rules.rules_helpers import request_in


@dataclass(frozen=True)
class Tree:
    root: Path

    def write(self, rel: str, text: str = "") -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def write_bytes(self, rel: str, data: bytes) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    def link(self, rel: str, target: str | Path) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, path)
        return path

    def mkdir(self, rel: str) -> Path:
        path = self.root / rel
        path.mkdir(parents=True, exist_ok=True)
        return path

    def git_repo(self, rel: str = ".") -> Path:
        """A folder that gitfacts sees as a repository root (a `.git` dir with a HEAD)."""
        repo = self.root / rel
        (repo / ".git").mkdir(parents=True, exist_ok=True)
        (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        return repo


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    root = (tmp_path / "ws").resolve()
    root.mkdir()
    return Tree(root)


Loader = Callable[..., ContextResult]


@pytest.fixture
def load(isolated_env: IsolatedEnv) -> Loader:
    def _load(
        cwd: Path,
        *,
        project_root: Path | None = None,
        touched: tuple[Path | str, ...] = (),
        **options: Any,
    ) -> ContextResult:
        request = request_in(
            isolated_env,
            cwd,
            project_root=project_root or cwd,
            touched=frozenset(Path(t) for t in touched),
            **options,
        )
        return load_context(request, RealFS())

    return _load
