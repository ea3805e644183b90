"""Projects: cwd → canonical root, cached, re-validated, bounded."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from memoryd.core.project import sanitize_key
from memoryd.daemon import projects as projects_mod
from memoryd.daemon.projects import Projects


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_worktrees_map_to_the_main_root_and_remote_changes_are_seen(tmp_path: Path) -> None:
    main = tmp_path / "repo"
    main.mkdir()
    git("init", "-q", "-b", "main", cwd=main)
    git(
        "-c",
        "user.email=a@b",
        "-c",
        "user.name=a",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "x",
        cwd=main,
    )
    git("worktree", "add", "-q", str(tmp_path / "wt"), cwd=main)
    projects = Projects()
    assert projects.resolve(tmp_path / "wt").root == main.resolve()
    assert projects.resolve(main).facts.repo_slug is None
    git("remote", "add", "origin", "git@github.com:acme/widgets.git", cwd=main)
    assert projects.resolve(main).facts.repo_slug == "acme/widgets"
    assert sanitize_key("/a/b.c") == "-a-b-c"


def test_the_cache_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(projects_mod, "MAX_CACHED_DIRS", 3)
    projects = Projects()
    dirs = []
    for i in range(5):
        d = tmp_path / f"d{i}"
        d.mkdir()
        dirs.append(d)
        projects.resolve(d)
    assert list(projects._cache) == dirs[2:]
