"""gitfacts: a FIFO among the git files never blocks discovery, and a `.git` another user owns is
not trusted (git's safe.directory rule, CVE-2022-24765)."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import pytest

from memoryd import gitfacts

OTHER_UID = 65534  # nobody
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def _repo(root: Path, remote: str = "https://github.com/acme/widgets.git") -> Path:
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {remote}\n')
    return root


def _discover_bounded(cwd: Path, fifo: Path) -> gitfacts.GitFacts | None:
    """discover(cwd) in a thread; if it is still running after a few seconds (blocked opening
    the FIFO), a writer is opened on the FIFO to release it, and None is returned: a
    regression fails the test instead of hanging it."""
    result: list[gitfacts.GitFacts] = []
    worker = threading.Thread(target=lambda: result.append(gitfacts.discover(cwd)), daemon=True)
    worker.start()
    worker.join(3.0)
    if not worker.is_alive():
        return result[0]
    while worker.is_alive():
        with contextlib.suppress(OSError):  # ENXIO until the reader has opened it
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(0.1)
    return None


def test_a_fifo_as_git_config_does_not_block_discovery(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    os.mkfifo(repo / ".git" / "config")
    facts = _discover_bounded(repo, repo / ".git" / "config")
    assert facts is not None, "discover blocked opening the FIFO .git/config"
    assert facts.project_root == repo.resolve()
    assert facts.remote_url is None


def test_a_fifo_as_a_worktrees_commondir_does_not_block_discovery(tmp_path: Path) -> None:
    main = _repo(tmp_path / "main")
    own = main / ".git" / "worktrees" / "feature"
    own.mkdir(parents=True)
    os.mkfifo(own / "commondir")
    linked = tmp_path / "feature"
    linked.mkdir()
    (linked / ".git").write_text(f"gitdir: {own}\n")
    facts = _discover_bounded(linked, own / "commondir")
    assert facts is not None, "discover blocked opening the FIFO commondir"
    assert facts.worktree_root == linked.resolve()


def test_a_linked_worktree_still_maps_to_its_main_repository(tmp_path: Path) -> None:
    main = _repo(tmp_path / "main")
    own = main / ".git" / "worktrees" / "feature"
    own.mkdir(parents=True)
    (own / "commondir").write_text("../..\n")
    linked = tmp_path / "feature"
    (linked / "src").mkdir(parents=True)
    (linked / ".git").write_text("gitdir: ../main/.git/worktrees/feature\n")
    facts = gitfacts.discover(linked / "src")
    assert facts.project_root == main.resolve()
    assert facts.worktree_root == linked.resolve()
    assert facts.repo_slug == "acme/widgets"


def test_a_config_over_the_cap_gives_no_remote(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    with (repo / ".git" / "config").open("a") as handle:
        handle.write("# filler\n" * 200_000)  # 1.8 MB
    facts = gitfacts.discover(repo)
    assert facts.project_root == repo.resolve()
    assert facts.remote_url is None


def test_a_git_that_is_not_the_users_own_ends_the_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Runs as any user: every file here is ours, so another effective uid makes them foreign.
    repo = _repo(tmp_path / "repo")
    (repo / "sub").mkdir()
    other = os.geteuid() + 1
    monkeypatch.setattr(gitfacts.os, "geteuid", lambda: other)
    facts = gitfacts.discover(repo / "sub")
    assert facts == gitfacts.GitFacts((repo / "sub").resolve(), None, None, None, None)


@needs_root
def test_another_users_git_in_a_parent_folder_is_not_trusted(tmp_path: Path) -> None:
    # The other user's /tmp/.git (a sticky, world-writable folder) with a FIFO as its config:
    # the victim's scratch folder under it is outside git, and nothing is opened there.
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    (shared / ".git").mkdir()
    os.mkfifo(shared / ".git" / "config")
    for path in (shared / ".git", shared / ".git" / "config"):
        os.chown(path, OTHER_UID, OTHER_UID)
    scratch = shared / "my-scratch"
    scratch.mkdir()
    facts = _discover_bounded(scratch, shared / ".git" / "config")
    assert facts is not None, "discover opened another user's .git/config"
    assert facts == gitfacts.GitFacts(scratch.resolve(), None, None, None, None)


@needs_root
def test_the_walk_stops_at_another_users_git_and_never_reaches_the_users_own(
    tmp_path: Path,
) -> None:
    outer = _repo(tmp_path / "outer")
    inner = outer / "vendor" / "theirs"
    _repo(inner, "https://github.com/mallory/trap.git")
    os.chown(inner / ".git", OTHER_UID, OTHER_UID)
    (inner / "deep").mkdir()
    facts = gitfacts.discover(inner / "deep")
    assert facts.worktree_root is None
    assert facts.project_root == (inner / "deep").resolve()
    # A `.git` file owned by another user, or naming another user's git dir, is refused too.
    (inner / ".git").rename(tmp_path / "their-gitdir")
    (inner / ".git").write_text(f"gitdir: {tmp_path / 'their-gitdir'}\n")
    assert gitfacts.discover(inner / "deep").worktree_root is None
    os.chown(inner / ".git", OTHER_UID, OTHER_UID)
    assert gitfacts.discover(inner / "deep").worktree_root is None
    # Once it is the user's own, it is the repository again.
    for path in (inner / ".git", tmp_path / "their-gitdir"):
        os.chown(path, os.geteuid(), os.getegid())
    assert gitfacts.discover(inner / "deep").repo_slug == "mallory/trap"
