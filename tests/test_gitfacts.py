"""gitfacts: a FIFO among the git files never blocks discovery, and a `.git` another user owns is
not trusted (git's safe.directory rule, CVE-2022-24765)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from pathlib import Path

import pytest

from memoryd import gitfacts, gitsafe
from tests.conftest import IsolatedEnv

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


def test_the_worktrees_of_a_bare_repository_share_its_root(tmp_path: Path) -> None:
    # Found by a bug hunt: `git clone --bare x proj.git` and worktrees added from it each
    # were a project of their own (one memory folder each); SPEC has every worktree of one
    # repository share one, and Claude Code keys them by the bare repository's folder.
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    ident = ["-c", "user.name=a", "-c", "user.email=a@b"]
    seed, bare = tmp_path / "seed", tmp_path / "proj.git"
    subprocess.run(["git", "init", "-q", "-b", "main", str(seed)], check=True, env=env)
    subprocess.run(
        ["git", *ident, "-C", str(seed), "commit", "-q", "--allow-empty", "-m", "i"],
        check=True,
        env=env,
    )
    subprocess.run(["git", "clone", "-q", "--bare", str(seed), str(bare)], check=True, env=env)
    for name, branch in (("wt-main", []), ("wt-feat", ["-b", "feat"])):
        subprocess.run(
            [
                "git",
                "-C",
                str(bare),
                "worktree",
                "add",
                "-q",
                *branch,
                str(tmp_path / name),
                "main",
            ],
            check=True,
            env=env,
        )
    facts = [gitfacts.discover(tmp_path / name) for name in ("wt-main", "wt-feat")]
    assert [f.project_root for f in facts] == [bare.resolve(), bare.resolve()]
    assert [f.worktree_root for f in facts] == [
        (tmp_path / "wt-main").resolve(),
        (tmp_path / "wt-feat").resolve(),
    ]
    # A repository whose git dir is set apart (`--separate-git-dir`) is still its own root.
    apart = tmp_path / "apart"
    subprocess.run(
        ["git", "init", "-q", "--separate-git-dir", str(tmp_path / "apart.git"), str(apart)],
        check=True,
        env=env,
    )
    assert gitfacts.discover(apart).project_root == apart.resolve()


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


def _real_repo(root: Path) -> Path:
    """A repository git itself recognises, with an origin remote; its real path."""
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".git" / "config").write_text(
        "[core]\n\trepositoryformatversion = 0\n"
        '[remote "origin"]\n\turl = https://github.com/acme/widgets.git\n'
    )
    return root.resolve()


def _chown_tree(root: Path) -> None:
    for folder, dirs, files in os.walk(root):
        os.chown(folder, OTHER_UID, OTHER_UID)
        for name in [*dirs, *files]:
            os.chown(os.path.join(folder, name), OTHER_UID, OTHER_UID)


def _git_accepts(cwd: Path) -> bool:
    """What git itself says of the repository above cwd, for this user and environment."""
    result = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], cwd=cwd, capture_output=True, check=False
    )
    refused = (b"dubious ownership", b"bad config line")  # a broken config: git runs nowhere
    assert result.returncode == 0 or any(r in result.stderr for r in refused), result.stderr
    return result.returncode == 0


# (the user's ~/.gitconfig, whether every git since 2.36 trusts the repository); {repo} is its
# real path. Found by a bug hunt: memoryd read no safe.directory at all, so a repository git
# worked in was no project (memory under cwd, no remote, no team).
SAFE_DIRECTORY_CASES = [
    ("", False),
    ("[safe]\n\tdirectory = {repo}\n", True),
    ("[safe]\n\tdirectory = *\n", True),
    ('[SAFE]\n\tDirectory = "*"  # every repository\n', True),
    ("[safe]\n\tdirectory = /elsewhere\n\tdirectory = {repo}\n", True),
    ("[safe]\n\tdirectory = *\n\tdirectory =\n", False),  # an empty value empties the list
    ("[safe]\n\tdirectory = *\n\tdirectory\n", False),
    ("[safe]\n\tdirectory = {repo}/sub\n", False),  # the repository, not a folder in it
    ("[foo]\n\tbar = {repo}\n", False),
    ('[safe "x"]\n\tdirectory = *\n', False),
    ("[include]\n\tpath = more.inc\n", True),  # more.inc (below) says *
    ("[safe]\n\tdirectory = *\n[include]\n\tpath = reset.inc\n", False),
    ("[safe]\n\tdirectory = *\n[broken\n", False),  # git refuses to run at all
]


@needs_root
@pytest.mark.parametrize(("config", "trusted"), SAFE_DIRECTORY_CASES)
def test_safe_directory_trusts_what_git_trusts(
    tmp_path: Path, isolated_env: IsolatedEnv, config: str, trusted: bool
) -> None:
    repo = _real_repo(tmp_path / "shared" / "repo")
    (repo / "sub").mkdir()
    _chown_tree(repo)
    (isolated_env.home / "more.inc").write_text("[safe]\n\tdirectory = *\n")
    (isolated_env.home / "reset.inc").write_text("[safe]\n\tdirectory =\n")
    (isolated_env.home / ".gitconfig").write_text(config.format(repo=repo))
    assert _git_accepts(repo / "sub") is trusted
    facts = gitfacts.discover(repo / "sub")
    assert (facts.worktree_root == repo) is trusted
    assert (facts.repo_slug == "acme/widgets") is trusted


@needs_root
@pytest.mark.parametrize(
    "config",
    [
        "[safe]\n\tdirectory = {repo}/\n",
        "[safe]\n\tdirectory = {parent}/*\n",
        "[safe]\n\tdirectory = {link}\n",
        "[safe]\n\tdirectory = .\n",
    ],
)
def test_safe_directory_forms_only_newer_git_takes_are_refused(
    tmp_path: Path, isolated_env: IsolatedEnv, config: str
) -> None:
    # git 2.46 normalises the value and takes `/*` and `.`; git 2.39 compares the text. A
    # repository some git refuses is not trusted.
    repo = _repo(tmp_path / "shared" / "repo").resolve()
    os.chown(repo, OTHER_UID, OTHER_UID)
    (tmp_path / "link").symlink_to(repo)
    text = config.format(repo=repo, parent=repo.parent, link=tmp_path / "link")
    (isolated_env.home / ".gitconfig").write_text(text)
    assert gitfacts.discover(repo).worktree_root is None


@needs_root
def test_safe_directory_files_git_reads(
    tmp_path: Path, isolated_env: IsolatedEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _real_repo(tmp_path / "repo")
    _chown_tree(repo / ".git")
    star = "[safe]\n\tdirectory = *\n"
    monkeypatch.delenv("GIT_CONFIG_GLOBAL")
    xdg = tmp_path / "xdg"
    (xdg / "git").mkdir(parents=True)
    (xdg / "git" / "config").write_text(f"[safe]\n\tdirectory = ~/../../../{repo.name}\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    # ~ is expanded, the rest is compared as written: git refuses, and so does memoryd.
    assert not _git_accepts(repo)
    assert gitfacts.discover(repo).worktree_root is None
    (xdg / "git" / "config").write_text(star)
    assert _git_accepts(repo)
    assert gitfacts.discover(repo).worktree_root == repo
    # ~/.gitconfig is read after the XDG file: its empty value resets the list.
    (isolated_env.home / ".gitconfig").write_text("[safe]\n\tdirectory =\n")
    assert not _git_accepts(repo)
    assert gitfacts.discover(repo).worktree_root is None
    # The system file, unless GIT_CONFIG_NOSYSTEM; GIT_CONFIG_GLOBAL replaces both global files.
    system = tmp_path / "system.gitconfig"
    system.write_text(star)
    monkeypatch.setenv("GIT_CONFIG_SYSTEM", str(system))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "none"))
    assert not _git_accepts(repo)  # GIT_CONFIG_NOSYSTEM=1 (tests/conftest.py)
    assert gitfacts.discover(repo).worktree_root is None
    monkeypatch.delenv("GIT_CONFIG_NOSYSTEM")
    assert _git_accepts(repo)
    assert gitfacts.discover(repo).worktree_root == repo


@needs_root
def test_a_linked_worktree_another_user_owns_is_trusted_by_its_own_path(tmp_path: Path) -> None:
    main = _repo(tmp_path / "main")
    own = main / ".git" / "worktrees" / "feature"
    own.mkdir(parents=True)
    (own / "commondir").write_text("../..\n")
    linked = (tmp_path / "feature").resolve()
    linked.mkdir()
    (linked / ".git").write_text(f"gitdir: {own}\n")
    for path in (linked, linked / ".git", own):
        os.chown(path, OTHER_UID, OTHER_UID)
    assert gitfacts.discover(linked).worktree_root is None
    gitconfig = Path(os.environ["GIT_CONFIG_GLOBAL"])
    gitconfig.write_text(f"[safe]\n\tdirectory = {main.resolve()}\n")
    assert gitfacts.discover(linked).worktree_root is None  # the main checkout's is no use
    gitconfig.write_text(f"[safe]\n\tdirectory = {linked}\n")
    facts = gitfacts.discover(linked)
    assert (facts.worktree_root, facts.project_root) == (linked, main.resolve())


@needs_root
def test_a_cached_project_follows_safe_directory_edits(tmp_path: Path) -> None:
    from memoryd.daemon.projects import Projects

    repo = _real_repo(tmp_path / "repo")
    _chown_tree(repo)
    projects = Projects()
    assert projects.resolve(repo).facts.worktree_root is None
    gitconfig = Path(os.environ["GIT_CONFIG_GLOBAL"])
    gitconfig.write_text(f"[safe]\n\tdirectory = {repo}\n")
    assert projects.resolve(repo).facts.repo_slug == "acme/widgets"
    gitconfig.write_text("[safe]\n\tdirectory = /elsewhere/entirely\n")
    assert projects.resolve(repo).facts.worktree_root is None


@pytest.mark.parametrize(
    "url",
    [
        "file:///srv/git/widgets.git",  # read as scp-like `file:` + path: slug "git/widgets"
        "FILE://host/srv/git/widgets.git",
        "https://github.com/acme/../widgets",  # slug "../widgets"
        "https://github.com/./..",
        "git@github.com:acme/..",
    ],
)
def test_a_remote_that_names_no_owner_and_repo_has_no_slug(url: str) -> None:
    # Found by a bug hunt: these gave slugs, which the team server refuses (`.`, `..`) or
    # which two unrelated local repositories share (`file:///a/git/widgets`, `/b/git/…`).
    assert gitfacts.parse_repo_slug(url) is None


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/acme/widgets.GIT",
        "ssh://git@github.com/acme/widgets.Git",
        "git@github.com:acme/widgets.GIT",  # scp-like: kept `.GIT`, another repo than the rest
    ],
)
def test_a_git_suffix_in_any_case_is_dropped_in_every_form(url: str) -> None:
    assert gitfacts.parse_repo_slug(url) == "acme/widgets"


def _git_url(repo: Path) -> str:
    result = subprocess.run(
        ["git", "ls-remote", "--get-url", "origin"], cwd=repo, capture_output=True, check=True
    )
    return result.stdout.decode().strip()


# (the repository's config, ~/.gitconfig, the URL git fetches origin from); `{home}` and
# `{work}` (the folder the repository is in) are filled in.
REMOTE_CASES = [
    ('[Remote "origin"]\n\turl = https://h/acme/a\n', "", "https://h/acme/a"),
    ("[remote.origin]\n\turl = https://h/acme/b\n", "", "https://h/acme/b"),
    (
        '[remote "origin"]\n\turl = https://h/acme/c\n\turl = https://h/acme/d\n',
        "",
        "https://h/acme/c",
    ),
    ('[core]\n\tbare\n[remote "origin"]\n\turl = https://h/acme/f\n', "", "https://h/acme/f"),
    ('[remote "origin"]\n\turl = "https://h/acme/g" ; mine\n', "", "https://h/acme/g"),
    ("[include]\n\tpath = more.cfg\n", "", "https://h/acme/included"),
    (
        '[remote "origin"]\n\turl = gh:h\n',
        '[url "git@github.com:acme/"]\n\tinsteadOf = gh:\n',
        "git@github.com:acme/h",
    ),
    (
        '[url "https://a/"]\n\tinsteadOf = w:\n[remote "origin"]\n\turl = w:sub/i\n',
        '[url "https://b/acme/"]\n\tinsteadOf = w:sub/\n',
        "https://b/acme/i",
    ),
    (
        '[remote "origin"]\n\turl = w:j\n',
        '[includeIf "gitdir:{work}/"]\n\tpath = {home}/work.cfg\n',
        "git@github.com:acme/j",
    ),
    (
        '[remote "origin"]\n\turl = w:k\n',
        '[includeIf "gitdir:/elsewhere/"]\n\tpath = ~/work.cfg\n',
        "w:k",
    ),
    (
        '[remote "origin"]\n\turl = w:l\n',
        '[includeIf "onbranch:ma*"]\n\tpath = ~/work.cfg\n',
        "git@github.com:acme/l",
    ),
]


@pytest.mark.parametrize(("local", "user", "expected"), REMOTE_CASES)
def test_the_remote_url_is_the_one_git_fetches_from(
    tmp_path: Path, isolated_env: IsolatedEnv, local: str, user: str, expected: str
) -> None:
    work = tmp_path / "work"
    repo = work / "repo"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / ".git" / "config").write_text(local)
    (repo / ".git" / "more.cfg").write_text('[remote "origin"]\n\turl = https://h/acme/included\n')
    home = isolated_env.home
    (home / "work.cfg").write_text('[url "git@github.com:acme/"]\n\tinsteadOf = w:\n')
    (home / ".gitconfig").write_text(user.format(home=home, work=work.resolve()))
    assert _git_url(repo) == expected
    assert gitfacts.discover(repo).remote_url == expected


def test_an_include_cycle_or_a_broken_user_config_leaves_the_repositorys_remote(
    tmp_path: Path, isolated_env: IsolatedEnv
) -> None:
    repo = _repo(tmp_path / "repo")
    (isolated_env.home / ".gitconfig").write_text("[include]\n\tpath = ~/.gitconfig\n")
    assert gitfacts.discover(repo).repo_slug == "acme/widgets"
    (isolated_env.home / ".gitconfig").write_text("[url\n")
    assert gitfacts.discover(repo).repo_slug == "acme/widgets"


def test_the_files_a_remote_was_read_from_are_named(
    tmp_path: Path, isolated_env: IsolatedEnv
) -> None:
    repo = _repo(tmp_path / "repo")
    (repo / ".git" / "config").write_text("[include]\n\tpath = ../remote.cfg\n")
    assert gitfacts.discover(repo).remote_url is None
    assert gitfacts.discover(repo).included == (repo / ".git" / ".." / "remote.cfg",)
    (repo / "remote.cfg").write_text('[remote "origin"]\n\turl = https://h/acme/m\n')
    assert gitfacts.discover(repo).repo_slug == "acme/m"


def test_includes_that_fan_out_or_repeat_a_big_file_are_read_a_bounded_number_of_times(
    tmp_path: Path,
) -> None:
    # A downloaded folder's .git/config is read on the daemon's loop: 200 `path` lines in each
    # of 4 levels were 200**4 reads (discovery never returned); here 20 in 3 levels, 8,421.
    for level in range(3):
        (tmp_path / f"l{level}").write_text("[include]\n" + f"\tpath = l{level + 1}\n" * 20)
    (tmp_path / "l3").write_text("[core]\n\tx = 1\n")
    read: list[Path] = []
    with pytest.raises(gitsafe.BadConfig):
        gitsafe.read_config(tmp_path / "l0", read=read)
    assert len(read) <= 64
    # A file just under the cap that includes itself was read (and parsed) ten times.
    big = tmp_path / "big"
    big.write_text("[include]\n\tpath = big\n[core]\n" + "\tx = 1\n" * 100_000)
    read = []
    with pytest.raises(gitsafe.BadConfig):
        gitsafe.read_config(big, read=read)
    assert len(read) <= 3


@pytest.mark.parametrize("inside", ["dotfiles/work", "work"])
def test_a_relative_includeif_of_a_linked_user_config_is_judged_from_its_real_folder(
    isolated_env: IsolatedEnv, inside: str
) -> None:
    # ~/.gitconfig a link into a dotfiles folder (stow, yadm): git reads `gitdir:./work/` from
    # the folder of the file's real path, memoryd read it from ~ and took the other remote.
    home = isolated_env.home
    (home / "dotfiles").mkdir()
    (home / "w.cfg").write_text('[url "https://h/acme/"]\n\tinsteadOf = w:\n')
    (home / "dotfiles" / "gitconfig").write_text(
        f'[includeIf "gitdir:./work/"]\n\tpath = {home}/w.cfg\n'
    )
    (home / ".gitconfig").symlink_to(home / "dotfiles" / "gitconfig")
    repo = home / inside / "repo"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", "w:x"], check=True)
    assert gitfacts.discover(repo).remote_url == _git_url(repo)


@pytest.mark.parametrize(
    "core",
    [
        "[Core]\n\tbare = true\n",  # section names are case-insensitive
        "[core]\n\tbare\n",  # a key alone is true
        '[core]\n\tbare = "yes"\n',  # quoted
        "[core]\n\tbare = 1k\n",  # a number, with git's unit
        "[core]\n\tbare = 010\n",  # octal, as C's strtoimax reads it (Python's int refused it)
        "[core]\n\tbare = 0x10\n",
        "[core] bare = on ; a comment\n",
    ],
)
def test_a_bare_repository_is_known_however_git_lets_its_config_say_so(
    tmp_path: Path, core: str
) -> None:
    # Found by a bug hunt: core.bare was read with configparser, which knows no git spelling
    # but `[core]` and `key = value`: a downloaded `.git` file naming such a bare repository
    # still lent this folder its remote (and team).
    bare = tmp_path / "secret.git"
    bare.mkdir()
    (bare / "HEAD").write_text("ref: refs/heads/main\n")
    (bare / "config").write_text(f'{core}[remote "origin"]\n\turl = https://h/acme/secret\n')
    said = subprocess.run(
        ["git", "config", "--file", str(bare / "config"), "--bool", "core.bare"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert said.stdout.strip() == "true"  # git's own reading
    download = tmp_path / "download"
    download.mkdir()
    (download / ".git").write_text("gitdir: ../secret.git\n")
    facts = gitfacts.discover(download)
    assert (facts.project_root, facts.remote_url) == (download, None)


def test_a_quoted_core_worktree_names_the_submodule_it_is(tmp_path: Path) -> None:
    # configparser kept the quotes: a submodule whose core.worktree git wrote quoted (a path
    # with a `;` or `#` in it) was taken for a stranger's git dir and lost its remote.
    modules = tmp_path / "super" / ".git" / "modules" / "my lib"
    modules.mkdir(parents=True)
    (modules / "HEAD").write_text("ref: refs/heads/main\n")
    (modules / "config").write_text(
        '[core]\n\tworktree = "../../../my lib"\n'
        '[remote "origin"]\n\turl = https://github.com/acme/lib.git\n'
    )
    lib = tmp_path / "super" / "my lib"
    lib.mkdir()
    (lib / ".git").write_text("gitdir: ../.git/modules/my lib\n")
    assert gitfacts.discover(lib).repo_slug == "acme/lib"
