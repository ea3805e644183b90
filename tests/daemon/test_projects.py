"""Projects: cwd → canonical root, cached, re-validated, bounded."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from memoryd.core.project import project_key, project_keys, sanitize_key
from memoryd.daemon import projects as projects_mod
from memoryd.daemon.projects import Projects
from memoryd_client import RpcError
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


# Claude Code's sanitizePath for these paths, computed by Bun 1.4.5 (the CLI: Bun.hash) and
# Node (its SDK: djb2): over 200 characters, the cut name, `-` and the hash in base 36.
_CLAUDE_CODE_NAMES = {
    "/home/ana/src/" + "deep/" * 40 + "app": ("31yhb8lde6vev", "rcf4je"),
    "/Users/jos\u00e9/" + "Projekte/" * 25 + "app\U0001f680": ("313lqfkii5fsi", "r60lvr"),
    "/srv/" + "a" * 196: ("3oby0trszfr53", "c8xgnb"),
}


def test_a_long_project_folder_is_named_as_claude_code_cuts_it() -> None:
    # Found by a bug hunt: a key over 200 characters was used whole (or, over 255 bytes,
    # refused), where Claude Code cuts it and adds a hash: its memories were never seen.
    for root, hashes in _CLAUDE_CODE_NAMES.items():
        cut = project_key(root)[:200]
        assert cut == "".join(c if c.isascii() and c.isalnum() else "-" for c in root)[:200]
        assert project_keys(root) == tuple(f"{cut}-{h}" for h in hashes)
    assert project_keys("/srv/" + "a" * 195) == ("-srv-" + "a" * 195,)  # 200: not cut


def _claude_code_memory(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "user_role.md").write_text(
        "---\nname: role\ndescription: the user's role\ntype: user\n---\n\nA data scientist.\n"
    )
    (folder / "MEMORY.md").write_text("- [role](user_role.md) — the user's role\n")


async def test_a_long_projects_memories_are_claude_codes(
    daemon: DaemonHandle, isolated_env: IsolatedEnv, tmp_path: Path
) -> None:
    projects = isolated_env.config_dir / "projects"

    def long_root(name: str, depth: int) -> Path:
        root = (tmp_path / name / ("p" * depth) / ("q" * 100)).resolve()
        root.mkdir(parents=True)
        return root

    # The CLI's folder (Bun.hash), for a key of 201-255 characters and one over 255 bytes.
    for name, depth in (("cli", 60), ("cli-longer", 200)):
        root = long_root(name, depth)
        _claude_code_memory(projects / project_keys(root)[0] / "memory")
        listed = await daemon.call("memory.list", cwd=str(root))
        assert listed["memory_dir"] == str(projects / project_keys(root)[0] / "memory")
        assert [m["name"] for m in listed["memories"]] == ["role"]

    # The SDK's (djb2), and a folder of another hash, as Claude Code's findProjectDir finds it.
    sdk, other = long_root("sdk", 60), long_root("other", 60)
    _claude_code_memory(projects / project_keys(sdk)[1] / "memory")
    _claude_code_memory(projects / f"{project_key(other)[:200]}-zz9" / "memory")
    for root, folder in ((sdk, project_keys(sdk)[1]), (other, f"{project_key(other)[:200]}-zz9")):
        listed = await daemon.call("memory.list", cwd=str(root))
        assert listed["memory_dir"] == str(projects / folder / "memory")

    # Memories memoryd kept under the whole name stay in use; a new project gets the CLI's.
    kept, new = long_root("kept", 60), long_root("new", 60)
    assert 200 < len(sanitize_key(kept)) <= 255
    _claude_code_memory(projects / sanitize_key(kept) / "memory")
    listed = await daemon.call("memory.list", cwd=str(kept))
    assert listed["memory_dir"] == str(projects / sanitize_key(kept) / "memory")
    await daemon.call(
        "memory.write", cwd=str(new), type="user", name="role", description="d", body="b"
    )
    assert (projects / project_keys(new)[0] / "memory" / "MEMORY.md").is_file()


async def test_a_decomposed_project_name_is_keyed_in_nfc_as_claude_code_keys_it(
    daemon: DaemonHandle, isolated_env: IsolatedEnv, tmp_path: Path
) -> None:
    # Found by a bug hunt: Claude Code keys a project by realpath(cwd).normalize('NFC'); a
    # folder named `jose\u0301` on disk (macOS tools, rsync from a Mac) was keyed as it is
    # on disk, `jose-` where Claude Code's folder is `jos-`: its memories were never seen.
    projects = isolated_env.config_dir / "projects"
    assert project_key("/home/jose\u0301/app") == project_key("/home/jos\u00e9/app")
    assert project_key("/home/jose\u0301/app") == "-home-jos--app"
    root = (tmp_path / "jose\u0301" / "app").resolve()
    root.mkdir(parents=True)
    _claude_code_memory(projects / project_key(root) / "memory")
    listed = await daemon.call("memory.list", cwd=str(root))
    assert listed["memory_dir"] == str(projects / project_key(root) / "memory")
    assert [m["name"] for m in listed["memories"]] == ["role"]

    # Memories memoryd kept under the name as on disk stay in use.
    kept = (tmp_path / "rene\u0301" / "app").resolve()
    kept.mkdir(parents=True)
    _claude_code_memory(projects / sanitize_key(kept) / "memory")
    listed = await daemon.call("memory.list", cwd=str(kept))
    assert listed["memory_dir"] == str(projects / sanitize_key(kept) / "memory")


def _bare_repository(tmp_path: Path) -> tuple[Path, Path]:
    """A repository of one commit (`seed`) and its bare clone (`proj.git`)."""
    seed, bare = tmp_path / "seed", tmp_path / "proj.git"
    git("init", "-q", "-b", "main", str(seed), cwd=tmp_path)
    ident = ("-c", "user.name=a", "-c", "user.email=a@b")
    git(*ident, "commit", "-q", "--allow-empty", "-m", "i", cwd=seed)
    git("clone", "-q", "--bare", str(seed), str(bare), cwd=tmp_path)
    return seed, bare


def _worktrees(bare: Path, main: Path, feature: Path) -> None:
    git("worktree", "add", "-q", str(main), "main", cwd=bare)
    git("worktree", "add", "-q", "-b", "feat", str(feature), "main", cwd=bare)


async def test_a_bare_repositorys_worktrees_keep_the_memories_each_had(
    daemon: DaemonHandle, isolated_env: IsolatedEnv, tmp_path: Path
) -> None:
    # Found by a review: since 591382f a bare repository's worktrees share its folder as
    # root (Claude Code's key); before, each worktree was a root of its own, and the
    # memories memoryd wrote under a worktree's name were no longer seen.
    projects = isolated_env.config_dir / "projects"
    seed, bare = _bare_repository(tmp_path)
    old, new = (tmp_path / "wt-old").resolve(), (tmp_path / "wt-new").resolve()
    _worktrees(bare, old, new)
    kept = projects / project_key(old) / "memory"
    _claude_code_memory(kept)
    # Every worktree gets that folder (chosen from the repository's worktrees, not the cwd).
    for worktree in (new, old):
        listed = await daemon.call("memory.list", cwd=str(worktree))
        assert listed["memory_dir"] == str(kept)
        assert [m["name"] for m in listed["memories"]] == ["role"]

    # A bare repository with no such folder gets Claude Code's, the bare folder's name.
    other = tmp_path / "other.git"
    git("clone", "-q", "--bare", str(seed), str(other), cwd=tmp_path)
    git("worktree", "add", "-q", str(tmp_path / "wt-other"), "main", cwd=other)
    ctx = await daemon.call("get_context", cwd=str(tmp_path / "wt-other"))
    assert ctx["memory_dir"] == str(projects / project_key(other.resolve()) / "memory")


async def test_a_worktrees_own_local_settings_rule_its_auto_memory(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    # Found by a review: auto memory read settings at the project root, which for a bare
    # repository's worktree is now the bare folder, so the worktree's settings.local.json
    # (autoMemoryEnabled, memorydRefuseSecrets) went unread; rules and settings.get read
    # the worktree's, as Claude Code does.
    _, bare = _bare_repository(tmp_path)
    off, on = tmp_path / "wt-off", tmp_path / "wt-on"
    _worktrees(bare, off, on)
    (off / ".claude").mkdir()
    (off / ".claude" / "settings.local.json").write_text('{"autoMemoryEnabled": false}')
    with pytest.raises(RpcError) as refused:
        await daemon.call("memory.list", cwd=str(off))
    assert refused.value.code == -32003
    assert (await daemon.call("memory.list", cwd=str(on)))["memories"] == []


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


def test_a_git_init_above_the_cwd_is_seen(tmp_path: Path) -> None:
    # Found by a bug hunt: the cache stat'ed cwd/.git and the found repository's files only,
    # so a `git init` in a folder above a cwd outside git, or a nested repository made
    # between the cwd and its root, left the old root (and memory dir) for the daemon's run.
    base = tmp_path.resolve()
    cwd = base / "newproj" / "src"
    cwd.mkdir(parents=True)
    projects = Projects()
    assert projects.resolve(cwd).root == cwd
    git("init", "-q", cwd=base / "newproj")
    assert projects.resolve(cwd).root == base / "newproj"

    deep = base / "outer" / "sub" / "deep"
    deep.mkdir(parents=True)
    git("init", "-q", cwd=base / "outer")
    assert projects.resolve(deep).root == base / "outer"
    git("init", "-q", cwd=base / "outer" / "sub")
    assert projects.resolve(deep).root == base / "outer" / "sub"


def test_a_cwd_link_pointed_elsewhere_is_resolved_again(tmp_path: Path) -> None:
    # Found by a bug hunt: outside git the root is the real cwd; with `current -> v1`
    # relinked to v2 the cache kept v1 as the root.
    base = tmp_path.resolve()
    (base / "v1").mkdir()
    (base / "v2").mkdir()
    link = base / "current"
    link.symlink_to(base / "v1")
    projects = Projects()
    assert projects.resolve(link).root == base / "v1"
    link.unlink()
    link.symlink_to(base / "v2")
    assert projects.resolve(link).root == base / "v2"
