"""A downloaded folder's `.git` (a file, or a link) naming another of the user's repositories
does not make that repository this folder's project: not its root, memory folder or team."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from memoryd import gitfacts
from tests.conftest import DaemonHandle

VICTIM_REMOTE = "git@github.com:acme/private.git"


def _victim(root: Path) -> Path:
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {VICTIM_REMOTE}\n')
    return root.resolve()


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _assert_own_project(facts: gitfacts.GitFacts, folder: Path) -> None:
    assert facts.project_root == folder.resolve()
    assert facts.remote_url is None
    assert facts.repo_slug is None


def test_a_git_file_naming_another_repositorys_git_dir_is_not_that_repository(
    tmp_path: Path,
) -> None:
    _victim(tmp_path / "victim")
    hostile = tmp_path / "download"
    (hostile / "src").mkdir(parents=True)
    (hostile / ".git").write_text("gitdir: ../victim/.git\n")
    _assert_own_project(gitfacts.discover(hostile / "src"), hostile)


def test_a_git_link_to_another_repositorys_git_dir_is_not_that_repository(
    tmp_path: Path,
) -> None:
    _victim(tmp_path / "victim")
    hostile = tmp_path / "download"
    hostile.mkdir()
    (hostile / ".git").symlink_to("../victim/.git")
    _assert_own_project(gitfacts.discover(hostile), hostile)


def test_a_git_file_naming_another_worktrees_git_dir_is_not_that_repository(
    tmp_path: Path,
) -> None:
    victim = _victim(tmp_path / "victim")
    _git("init", "-q", "-b", "main", cwd=victim)
    _git(
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "x",
        cwd=victim,
    )
    _git("worktree", "add", "-q", str(tmp_path / "feature"), "-b", "feature", cwd=victim)
    own = victim / ".git" / "worktrees" / "feature"
    assert (own / "gitdir").is_file()
    hostile = tmp_path / "download"
    hostile.mkdir()
    (hostile / ".git").write_text(f"gitdir: {own}\n")
    _assert_own_project(gitfacts.discover(hostile), hostile)
    # The real worktree still maps to its main checkout, with its remote.
    facts = gitfacts.discover(tmp_path / "feature")
    assert (facts.project_root, facts.repo_slug) == (victim, "acme/private")


def test_a_submodules_git_file_is_still_its_own_repository(tmp_path: Path) -> None:
    outer = _victim(tmp_path / "outer")
    modules = outer / ".git" / "modules" / "lib"
    modules.mkdir(parents=True)
    (modules / "HEAD").write_text("ref: refs/heads/main\n")
    (modules / "config").write_text(
        "[core]\n\tworktree = ../../../lib\n"
        '[remote "origin"]\n\turl = https://github.com/acme/lib.git\n'
    )
    (outer / "lib").mkdir()
    (outer / "lib" / ".git").write_text("gitdir: ../.git/modules/lib\n")
    facts = gitfacts.discover(outer / "lib")
    assert (facts.project_root, facts.repo_slug) == (outer / "lib", "acme/lib")


def test_a_git_file_naming_another_submodules_git_dir_or_a_bare_repository_is_not_it(
    tmp_path: Path,
) -> None:
    # Found by a review: only git dirs named `.git` were checked, so `gitdir:
    # ../victim/.git/modules/lib` (another repository's submodule) or `gitdir: ../secret.git`
    # (a bare repository) still lent this folder that repository's remote and team.
    victim = _victim(tmp_path / "victim")
    modules = victim / ".git" / "modules" / "lib"
    modules.mkdir(parents=True)
    (modules / "HEAD").write_text("ref: refs/heads/main\n")
    (modules / "config").write_text(
        "[core]\n\tworktree = ../../../lib\n"
        '[remote "origin"]\n\turl = https://github.com/acme/secret-lib.git\n'
    )
    bare = tmp_path / "secret.git"
    bare.mkdir()
    (bare / "HEAD").write_text("ref: refs/heads/main\n")
    (bare / "config").write_text(
        '[core]\n\tbare = true\n[remote "origin"]\n\turl = https://github.com/acme/secret.git\n'
    )
    for name, target in (("a1", "../victim/.git/modules/lib"), ("a2", "../secret.git")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / ".git").write_text(f"gitdir: {target}\n")
        _assert_own_project(gitfacts.discover(folder), folder)
    # A git dir made for this folder alone (`git init --separate-git-dir`) still counts.
    own = tmp_path / "own"
    own.mkdir()
    _git("init", "-q", "--separate-git-dir", str(tmp_path / "own-git"), str(own), cwd=tmp_path)
    _git("remote", "add", "origin", "https://github.com/acme/own.git", cwd=own)
    assert gitfacts.discover(own).repo_slug == "acme/own"


async def test_a_downloaded_git_file_gets_its_own_memory_folder(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    victim = _victim(tmp_path / "victim")
    await daemon.call(
        "memory.write",
        cwd=str(victim),
        file="plan.md",
        name="plan",
        description="the plan",
        body="VICTIM CONFIDENTIAL",
        type="project",
    )
    hostile = tmp_path / "download"
    hostile.mkdir()
    (hostile / ".git").write_text("gitdir: ../victim/.git\n")
    got = await daemon.call("get_context", cwd=str(hostile))
    assert "victim" not in got["memory_dir"]
    assert "plan" not in got["claude_md"]
    listed = await daemon.call("memory.list", cwd=str(hostile))
    assert listed["memories"] == []


@pytest.mark.parametrize("version", ["2", "3", "4"])
@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_is_tracked_reads_every_index_version(
    tmp_path: Path, version: str, object_format: str
) -> None:
    repo = tmp_path / "repo"
    _git("init", "-q", f"--object-format={object_format}", str(repo), cwd=tmp_path)
    _git("config", "index.version", version, cwd=repo)
    (repo / ".claude").mkdir()
    for name in ("settings.json", "settings.local.json"):
        (repo / ".claude" / name).write_text("{}")
    for i in range(40):  # v4 keeps only what differs from the previous path
        (repo / f"file-{i:02}.txt").write_text("x")
    _git("add", "-f", ".", cwd=repo)
    assert gitfacts.is_tracked(repo, ".claude/settings.local.json")
    assert gitfacts.is_tracked(repo, "file-39.txt")
    assert not gitfacts.is_tracked(repo, ".claude/settings.other.json")
    _git("rm", "-q", "--cached", ".claude/settings.local.json", cwd=repo)
    assert not gitfacts.is_tracked(repo, ".claude/settings.local.json")
    assert gitfacts.is_tracked(repo, ".claude/settings.json")
    assert not gitfacts.is_tracked(tmp_path, "repo/file-00.txt")  # no repository there


@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_is_tracked_reads_a_split_index_and_its_shared_index(
    tmp_path: Path, object_format: str
) -> None:
    # Found by a review: with core.splitIndex the tracked entries live in the shared index the
    # split one links to; read alone, a committed settings.local.json was not seen.
    repo = tmp_path / "repo"
    _git("init", "-q", f"--object-format={object_format}", str(repo), cwd=tmp_path)
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.local.json").write_text("{}")
    _git("add", "-f", ".", cwd=repo)
    _git("update-index", "--split-index", cwd=repo)
    (repo / "other.txt").write_text("x")
    _git("add", "other.txt", cwd=repo)
    assert list((repo / ".git").glob("sharedindex.*"))
    assert gitfacts.is_tracked(repo, ".claude/settings.local.json")
    assert gitfacts.is_tracked(repo, "other.txt")
    assert not gitfacts.is_tracked(repo, ".claude/settings.json")


@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_is_tracked_reads_a_split_index_that_holds_no_entry_of_its_own(
    tmp_path: Path, object_format: str
) -> None:
    # Found by a CI run: a split index whose entries are all in its shared index (no file was
    # racily clean when it was written) has none to tell SHA-1 sizes from SHA-256 ones, and a
    # SHA-256 one read as SHA-1 named a shared index that is not there: a committed
    # settings.local.json was not seen. The files' times are set well before the index's so
    # that git copies none of them into the split index.
    repo = tmp_path / "repo"
    _git("init", "-q", f"--object-format={object_format}", str(repo), cwd=tmp_path)
    (repo / ".claude").mkdir()
    local = repo / ".claude" / "settings.local.json"
    local.write_text("{}")
    os.utime(local, (1_000_000_000, 1_000_000_000))
    _git("add", "-f", ".", cwd=repo)
    _git("update-index", "--split-index", cwd=repo)
    index = (repo / ".git" / "index").read_bytes()
    assert int.from_bytes(index[8:12], "big") == 0  # the case: no entry of its own
    assert gitfacts.is_tracked(repo, ".claude/settings.local.json")
    assert not gitfacts.is_tracked(repo, ".claude/settings.json")
