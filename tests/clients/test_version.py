"""The version names the commit of a git checkout (session 21: it was 0.1.0 always, so the
upgrade check of docs/operations.md, `memctl --version` against `status.version`, could not
tell two checkouts apart). Read from `.git` as files: no `git` process at start-up."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd_client import version
from tests.clients.conftest import REPO, memctl_env, run_memctl

SHA_A = "a" * 40
SHA_B = "b" * 40


def _git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    _git("init", "-q", "-b", "main", cwd=root)
    for n in (1, 2):
        (root / "f").write_text(str(n))
        _git("add", "f", cwd=root)
        _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", str(n), cwd=root)
    return root


def test_two_commits_have_two_versions(repo: Path) -> None:
    second = version.build_version(repo)
    assert second == f"{version.BASE}+g{_git('rev-parse', 'HEAD', cwd=repo)[:12]}"
    _git("checkout", "-q", "HEAD~1", cwd=repo)  # detached: HEAD holds the commit itself
    first = version.build_version(repo)
    assert first == f"{version.BASE}+g{_git('rev-parse', 'HEAD', cwd=repo)[:12]}"
    assert first != second


def test_packed_refs_and_linked_worktrees_are_read(repo: Path, tmp_path: Path) -> None:
    head = _git("rev-parse", "HEAD", cwd=repo)
    _git("pack-refs", "--all", cwd=repo)
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert version.checkout_commit(repo) == head
    linked = tmp_path / "linked"
    _git("worktree", "add", "-q", "-b", "other", str(linked), "HEAD~1", cwd=repo)
    assert (linked / ".git").is_file()
    assert version.checkout_commit(linked) == _git("rev-parse", "HEAD", cwd=linked)
    assert version.checkout_commit(linked) != head


def test_a_copy_without_git_is_the_base_version(tmp_path: Path) -> None:
    assert version.build_version(tmp_path) == version.BASE
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/gone\n")  # no such ref
    assert version.build_version(tmp_path) == version.BASE
    (tmp_path / ".git" / "HEAD").write_text("not a commit\n")
    assert version.build_version(tmp_path) == version.BASE


def test_the_build_reads_the_version_the_checkout_has() -> None:
    from setuptools.config.pyprojecttoml import read_configuration

    config = read_configuration(REPO / "pyproject.toml", expand=True, dist=None)
    assert config["project"]["version"] == version.build_version(REPO)


def test_memctl_and_the_daemon_say_the_checkouts_version() -> None:
    expected = version.build_version(REPO)
    if expected == version.BASE:
        pytest.skip("not run from a git checkout")
    assert run_memctl("--version").stdout.strip() == f"memctl {expected}"
    done = subprocess.run(
        [sys.executable, "-m", "memoryd", "--version"],
        capture_output=True,
        text=True,
        env=memctl_env(),
        check=False,
    )
    assert done.stdout.strip() == f"memoryd {expected}", done.stderr


def test_an_unpacked_sdist_keeps_the_version_it_was_made_with(tmp_path: Path) -> None:
    """`python -m build` (and `uv build`) make the sdist from the checkout, then the wheel from
    the unpacked sdist, which has no `.git`: the sdist said 0.1.0+g<commit>, the wheel 0.1.0.
    The sdist's PKG-INFO holds the version it was made with."""
    made_with = f"{version.BASE}+g{SHA_A[:12]}"
    (tmp_path / "PKG-INFO").write_text(
        f"Metadata-Version: 2.4\nName: memoryd\nVersion: {made_with}\nSummary: x\n"
    )
    assert version.build_version(tmp_path) == made_with
    # Only a version this rule makes: anything else there is no measure.
    (tmp_path / "PKG-INFO").write_text("Metadata-Version: 2.4\nName: memoryd\nVersion: 9 9\n")
    assert version.build_version(tmp_path) == version.BASE


def test_installed_beside_another_projects_checkout_it_is_not_that_ones(repo: Path) -> None:
    """Installed with `pip install --target <project>/vendor`, version.py's grandparent is
    that project's checkout: its pyproject.toml was taken for memoryd's, and the version
    named that project's commit."""
    (repo / "pyproject.toml").write_text('[project]\nname = "other"\n')
    vendored = repo / "vendor" / "memoryd_client" / "version.py"
    vendored.parent.mkdir(parents=True)
    shutil.copy2(version.__file__, vendored)
    spec = importlib.util.spec_from_file_location("vendored_version", vendored)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert _git("rev-parse", "HEAD", cwd=repo)[:12] not in module.installed_version()
