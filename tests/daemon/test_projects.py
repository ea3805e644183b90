"""Projects: cwd → canonical root, cached, re-validated, bounded."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from memoryd.core.project import project_key, sanitize_key
from memoryd.daemon import projects as projects_mod
from memoryd.daemon.projects import Projects
from tests.conftest import DaemonHandle, IsolatedEnv


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


async def test_the_project_folder_is_the_one_claude_code_names(
    daemon: DaemonHandle, isolated_env: IsolatedEnv, tmp_path: Path
) -> None:
    # Found by a bug hunt: Claude Code's `path.replace(/[^a-zA-Z0-9]/g, '-')` replaces UTF-16
    # code units, so an emoji (a surrogate pair) is two dashes; memoryd made one, and read and
    # wrote another memory folder than Claude Code's for the same project.
    assert project_key("/src/app🚀") == "-src-app--"
    assert project_key("/src/日本/é.x") == "-src------x"  # in the BMP: one each
    assert sanitize_key("/src/app🚀") == "-src-app-"  # memoryd's own file names: unchanged
    projects = isolated_env.config_dir / "projects"

    fresh = (tmp_path / "app🚀").resolve()
    fresh.mkdir()
    ctx = await daemon.call("get_context", cwd=str(fresh))
    assert ctx["memory_dir"] == str(
        projects / f"{sanitize_key(tmp_path.resolve())}-app--" / "memory"
    )

    # Memories written under the earlier name stay in use while the new name has no memory/
    # folder, even when Claude Code has made its folder there for transcripts.
    older = (tmp_path / "old🚀").resolve()
    older.mkdir()
    earlier = projects / sanitize_key(older) / "memory"
    earlier.mkdir(parents=True)
    (earlier / "user_role.md").write_text(
        "---\nname: role\ndescription: the user's role\ntype: user\n---\nA data scientist.\n"
    )
    (projects / project_key(older)).mkdir()
    (projects / project_key(older) / "s1.jsonl").write_text("{}\n")
    ctx = await daemon.call("get_context", cwd=str(older))
    assert ctx["memory_dir"] == str(earlier)
    listed = await daemon.call("memory.list", cwd=str(older))
    assert [m["name"] for m in listed["memories"]] == ["role"]

    # Once the new name has its memory/ folder, that one is used.
    both = (tmp_path / "both🚀").resolve()
    both.mkdir()
    (projects / sanitize_key(both) / "memory").mkdir(parents=True)
    (projects / project_key(both) / "memory").mkdir(parents=True)
    ctx = await daemon.call("get_context", cwd=str(both))
    assert ctx["memory_dir"] == str(projects / project_key(both) / "memory")


def test_a_remote_changed_within_one_clock_tick_is_seen(tmp_path: Path) -> None:
    # A file system with a coarse clock (1-2 s), or a clock set back: the new .git/config
    # has the mtime the old one had. The cache compared mtimes only and kept the old remote.
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    git("remote", "add", "origin", "git@github.com:acme/widgets.git", cwd=repo)
    touched = (repo / ".git", repo / ".git" / "config")  # git renames config.lock into place
    projects = Projects()
    assert projects.resolve(repo).facts.repo_slug == "acme/widgets"
    before = [path.stat() for path in touched]
    git("remote", "set-url", "origin", "git@github.com:acme/gadgets.git", cwd=repo)
    for path, info in zip(touched, before, strict=True):
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert projects.resolve(repo).facts.repo_slug == "acme/gadgets"


def test_an_edit_to_a_config_file_that_git_config_includes_is_seen(tmp_path: Path) -> None:
    # The cache stamped .git/config but not what it includes: the remote kept in an included
    # file was the old one until the entry fell out of the cache.
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    with (repo / ".git" / "config").open("a") as config:
        config.write("[include]\n\tpath = ../remote.cfg\n")
    remote = repo / "remote.cfg"
    remote.write_text('[remote "origin"]\n\turl = https://github.com/acme/one.git\n')
    projects = Projects()
    assert projects.resolve(repo).facts.repo_slug == "acme/one"
    remote.write_text('[remote "origin"]\n\turl = https://github.com/acme/two.git\n')
    assert projects.resolve(repo).facts.repo_slug == "acme/two"
