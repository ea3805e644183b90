"""`@include`: resolution, depth, cycles, bad targets and the external-include gate."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from memoryd.rules.fsview import FsError
from memoryd.rules.loader import MAX_FILE_BYTES, load_context
from memoryd.rules.realfs import RealFS
from tests.conftest import IsolatedEnv
from tests.rules.conftest import Loader, Tree
from tests.rules.rules_helpers import loaded, request_in, skips


def test_include_forms_and_order(tree: Tree, load: Loader, isolated_env: IsolatedEnv) -> None:
    (isolated_env.home / "shared.md").write_text("home file")
    tree.write("CLAUDE.md", "@./a.md\n@b.md\n@docs/c.md")
    tree.write("a.md", "a then @docs/nested.md")
    tree.write("b.md", "b")
    tree.write("docs/c.md", "c @../b.md")
    tree.write("docs/nested.md", "nested")
    tree.write("user-facing.md", "x")
    result = load(tree.root)
    assert loaded(result, tree.root) == ["CLAUDE.md", "a.md", "docs/nested.md", "b.md", "docs/c.md"]
    parents = {str(f.path.relative_to(tree.root)): f.parent for f in result.files}
    assert parents["a.md"] == tree.root / "CLAUDE.md"
    assert parents["docs/nested.md"] == tree.root / "a.md"
    assert all(f.reason == "include" for f in result.files[1:])
    assert all(f.type == "Project" for f in result.files)
    # b.md came twice: once loaded, once a repeat.
    assert skips(result, tree.root) == {"b.md": "duplicate"}


def test_absolute_and_home_includes_from_user_file(
    tree: Tree, load: Loader, isolated_env: IsolatedEnv
) -> None:
    isolated_env.config_dir.mkdir(parents=True)
    (isolated_env.config_dir / "prefs").mkdir()
    (isolated_env.config_dir / "prefs" / "style.md").write_text("style")
    other = tree.write("elsewhere/abs.md", "absolute")
    (isolated_env.config_dir / "CLAUDE.md").write_text(f"@~/.claude/prefs/style.md\n@{other}\n")
    project = tree.mkdir("proj")
    result = load(project)
    user = [(f.path, f.type, f.reason) for f in result.files]
    assert user == [
        (isolated_env.config_dir / "CLAUDE.md", "User", "session_start"),
        (isolated_env.config_dir / "prefs" / "style.md", "User", "include"),
        (other, "User", "include"),
    ]


def test_missing_directory_binary_non_utf8(tree: Tree, load: Loader) -> None:
    tree.write("CLAUDE.md", "@missing.md @folder.md @blob.md @latin.md @image.png @noext")
    tree.mkdir("folder.md")
    tree.write_bytes("blob.md", b"text\x00\x01\x02binary")
    tree.write_bytes("latin.md", "caf\u00e9".encode("latin-1"))
    tree.write_bytes("image.png", b"\x89PNG\r\n")
    result = load(tree.root)
    assert loaded(result, tree.root) == ["CLAUDE.md"]
    assert skips(result, tree.root) == {
        "missing.md": "missing",
        "folder.md": "not_a_file",
        "blob.md": "binary",
        "latin.md": "not_utf8",
        "image.png": "not_text",
    }
    assert all(s.parent == tree.root / "CLAUDE.md" for s in result.skipped)


@pytest.mark.parametrize(
    ("encoding", "named"),
    [("utf-16", "UTF-16"), ("utf-16-be", "UTF-16"), ("utf-32", "UTF-32")],
)
def test_a_utf16_file_is_named_so_not_called_binary(
    tree: Tree, load: Loader, encoding: str, named: str
) -> None:
    # Found by a bug hunt (session 21): PowerShell 5's `>` writes UTF-16 with a byte order
    # mark, and such a CLAUDE.md (or include) was skipped as "binary: contains NUL bytes".
    text = "Use tabs.\n"
    data = text.encode(encoding) if encoding != "utf-16-be" else b"\xfe\xff" + text.encode(encoding)
    tree.write_bytes("CLAUDE.md", data)
    tree.write("CLAUDE.local.md", "@notes.md")
    tree.write_bytes("notes.md", data)
    result = load(tree.root)
    assert loaded(result, tree.root) == ["CLAUDE.local.md"]
    assert skips(result, tree.root) == {"CLAUDE.md": "not_utf8", "notes.md": "not_utf8"}
    for skipped in result.skipped:
        assert skipped.detail == f"{named} text (it opens with a byte order mark): save it as UTF-8"


def test_text_files_claude_code_includes_are_included(tree: Tree, load: Loader) -> None:
    # Found by a bug hunt: extensions of Claude Code's own text list (and Makefile, a file
    # Claude Code takes without an extension) were not_text, their includes never read.
    names = ["deploy.erb", "build.sbt", "web.config", "Cargo.lock", "Makefile", "solver.f90"]
    secrets = ["cluster/config", ".env", "git/credentials"]
    for name in names + secrets:
        tree.write(name, f"text of {name}")
    tree.write("CLAUDE.md", " ".join(f"@./{name}" for name in names + secrets))
    result = load(tree.root)
    assert loaded(result, tree.root) == ["CLAUDE.md", *names]
    # An extension is no name: `~/.kube/config` holds credentials, as `.env` files do.
    assert skips(result, tree.root) == dict.fromkeys(secrets, "not_text")


def test_cycle_a_b_a(tree: Tree, load: Loader) -> None:
    tree.write("CLAUDE.md", "@a.md")
    tree.write("a.md", "A @b.md")
    tree.write("b.md", "B @a.md")
    result = load(tree.root)
    assert loaded(result, tree.root) == ["CLAUDE.md", "a.md", "b.md"]
    cycle = [s for s in result.skipped if s.reason == "cycle"]
    assert [(s.path, s.parent) for s in cycle] == [(tree.root / "a.md", tree.root / "b.md")]


def test_self_include(tree: Tree, load: Loader) -> None:
    tree.write("CLAUDE.md", "me again: @CLAUDE.md")
    assert skips(load(tree.root), tree.root) == {"CLAUDE.md": "cycle"}


def test_depth_limit_default_and_setting(tree: Tree, load: Loader) -> None:
    tree.write("CLAUDE.md", "@d1.md")
    for level in range(1, 50):
        tree.write(f"d{level}.md", f"level {level} @d{level + 1}.md")
    tree.write("d50.md", "bottom")
    result = load(tree.root)
    # The seed: `depth >= MAX_INCLUDE_DEPTH` (5) is refused, the top file at depth 0.
    assert loaded(result, tree.root) == ["CLAUDE.md", "d1.md", "d2.md", "d3.md", "d4.md"]
    assert skips(result, tree.root) == {"d5.md": "depth"}
    deeper = load(tree.root, max_include_depth=8)
    assert loaded(deeper, tree.root)[-1] == "d7.md"
    for no_includes in (0, 1):
        assert loaded(load(tree.root, max_include_depth=no_includes), tree.root) == ["CLAUDE.md"]


def test_include_symlink_loop(tree: Tree, load: Loader) -> None:
    tree.write("CLAUDE.md", "@loop.md")
    tree.link("loop.md", "loop.md")
    assert skips(load(tree.root), tree.root) == {"loop.md": "symlink_loop"}


def test_external_include_refused_until_approved(
    tree: Tree, load: Loader, isolated_env: IsolatedEnv
) -> None:
    ssh = isolated_env.home / ".ssh"
    ssh.mkdir()
    (ssh / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (isolated_env.home / "notes.md").write_text("my notes")
    project = tree.git_repo("proj")
    (project / "CLAUDE.md").write_text("@~/.ssh/id_rsa\n@~/notes.md\n@../outside.md\n")
    tree.write("outside.md", "outside")
    refused = load(project)
    assert [f.path.name for f in refused.files] == ["CLAUDE.md"]
    reasons = {s.path: s.reason for s in refused.skipped}
    assert reasons == {
        ssh / "id_rsa": "external",
        isolated_env.home / "notes.md": "external",
        tree.root / "outside.md": "external",
    }
    assert "memctl includes approve" in refused.skipped[0].detail
    approved = load(project, external_approved=True)
    assert [f.path.name for f in approved.files] == ["CLAUDE.md", "notes.md", "outside.md"]
    # Approval opens the project's border, not the text-only rule: a key is never pasted.
    assert {s.path: s.reason for s in approved.skipped} == {ssh / "id_rsa": "not_text"}


def test_symlink_escaping_project_is_external(tree: Tree, load: Loader) -> None:
    tree.write("secret/creds.md", "creds")
    project = tree.git_repo("proj")
    (project / "CLAUDE.md").write_text("@docs/innocent.md")
    (project / "docs").mkdir()
    os.symlink(tree.root / "secret/creds.md", project / "docs/innocent.md")
    result = load(project)
    assert [(s.path.name, s.reason) for s in result.skipped] == [("innocent.md", "external")]


def test_local_and_rule_files_are_gated_too(tree: Tree, load: Loader) -> None:
    tree.write("outside.md", "o")
    project = tree.mkdir("proj")
    (project / "CLAUDE.local.md").write_text("@../outside.md")
    (project / ".claude" / "rules").mkdir(parents=True)
    (project / ".claude" / "rules" / "r.md").write_text("@../../../outside.md")
    result = load(project)
    assert [s.reason for s in result.skipped] == ["external", "external"]


def test_symlinked_instruction_files_pass_the_include_gates(
    tree: Tree, load: Loader, isolated_env: IsolatedEnv
) -> None:
    home = isolated_env.home
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text("SECRET-KEY\n")
    (home / "notes.md").write_text("SECRET-NOTES\n")
    (home / "shared-rules").mkdir()
    (home / "shared-rules" / "team.md").write_text("SECRET-TEAM\n")
    project = tree.git_repo("proj")
    (project / "CLAUDE.md").write_text("project\n")
    (project / "docs").mkdir()
    (project / "docs" / "AGENTS.md").write_text("linked inside\n")
    # A cloned repository's own files, linking out of it.
    os.symlink(home / ".ssh" / "id_rsa", project / "CLAUDE.local.md")
    (project / ".claude" / "rules").mkdir(parents=True)
    os.symlink(home / "notes.md", project / ".claude" / "rules" / "notes.md")
    os.symlink(home / "shared-rules", project / ".claude" / "rules" / "shared")
    os.symlink(project / "docs" / "AGENTS.md", project / ".claude" / "CLAUDE.md")
    # The user's own files may link anywhere (a dotfiles checkout).
    dotfiles = tree.write("dotfiles/claude.md", "user from dotfiles\n")
    isolated_env.config_dir.mkdir(parents=True)
    os.symlink(dotfiles, isolated_env.config_dir / "CLAUDE.md")

    result = load(project)
    text = "".join(f.content for f in result.files)
    assert "SECRET" not in text
    assert [f.path for f in result.files] == [
        isolated_env.config_dir / "CLAUDE.md",
        project / "CLAUDE.md",
        project / ".claude" / "CLAUDE.md",
    ]
    assert {s.path: s.reason for s in result.skipped} == {
        project / ".claude" / "rules" / "notes.md": "external",
        # A linked rule folder is refused as a whole, not walked (session 23).
        project / ".claude" / "rules" / "shared": "external",
        project / "CLAUDE.local.md": "external",
    }
    assert "memctl includes approve" in result.skipped[0].detail
    # Approval opens the border, never the text-only rule: the key stays out.
    approved = load(project, external_approved=True)
    assert "SECRET-KEY" not in "".join(f.content for f in approved.files)
    assert {s.path: s.reason for s in approved.skipped} == {project / "CLAUDE.local.md": "not_text"}
    assert {f.path.name for f in approved.files} >= {"notes.md", "team.md"}


def test_managed_includes_may_stay_in_managed_dir(
    tree: Tree, load: Loader, isolated_env: IsolatedEnv
) -> None:
    (isolated_env.managed_dir / "policy.md").write_text("policy detail")
    (isolated_env.managed_dir / "CLAUDE.md").write_text("@policy.md @../outside.md")
    (isolated_env.managed_dir.parent / "outside.md").write_text("x")
    result = load(tree.root)
    assert [f.path.name for f in result.files] == ["CLAUDE.md", "policy.md"]
    assert [s.reason for s in result.skipped] == ["external"]


def test_worktree_root_is_inside(tree: Tree, load: Loader) -> None:
    main = tree.mkdir("main")
    worktree = tree.mkdir("wt")
    (worktree / "CLAUDE.md").write_text("@docs/x.md")
    (worktree / "docs").mkdir()
    (worktree / "docs" / "x.md").write_text("x")
    result = load(worktree, project_root=main, worktree_root=worktree)
    assert [f.path.name for f in result.files] == ["CLAUDE.md", "x.md"]


def test_hundred_megabyte_file_not_read(tree: Tree, load: Loader) -> None:
    tree.write("CLAUDE.md", "@huge.md")
    with (tree.root / "huge.md").open("wb") as handle:
        handle.truncate(100 * 1024 * 1024)  # sparse: no disk used
    tree.write_bytes("big-rule.md", b"x" * (MAX_FILE_BYTES + 1))
    tree.mkdir(".claude/rules")
    os.replace(tree.root / "big-rule.md", tree.root / ".claude/rules/big-rule.md")
    result = load(tree.root)
    assert skips(result, tree.root) == {
        "huge.md": "too_large",
        ".claude/rules/big-rule.md": "too_large",
    }


def test_file_at_the_cap_is_read(tree: Tree, load: Loader) -> None:
    tree.write_bytes("CLAUDE.md", b"y" * MAX_FILE_BYTES)
    assert loaded(load(tree.root), tree.root) == ["CLAUDE.md"]


def test_comments_stripped_and_their_includes_ignored(tree: Tree, load: Loader) -> None:
    tree.write("CLAUDE.md", "Keep\n\n<!-- TODO: @hidden.md -->\n\nVisible\n")
    tree.write("hidden.md", "never")
    result = load(tree.root)
    assert loaded(result, tree.root) == ["CLAUDE.md"]
    assert "TODO" not in result.files[0].content
    assert "Visible" in result.files[0].content


def test_included_files_can_be_excluded(tree: Tree, load: Loader) -> None:
    tree.write("CLAUDE.md", "@vendor/x.md")
    tree.write("vendor/x.md", "x")
    result = load(tree.root, excludes=("**/vendor/**",))
    assert skips(result, tree.root) == {"vendor/x.md": "excluded"}


class _DenyReads(RealFS):
    """The real filesystem, except that reading one file fails as permission denied."""

    def __init__(self, denied: Path) -> None:
        super().__init__()
        self.denied = denied

    def read_bytes(self, path: Path, limit: int) -> bytes:
        if path == self.denied:
            raise FsError("unreadable", "permission denied")
        return super().read_bytes(path, limit)


def test_unreadable_include_reported(tree: Tree, isolated_env: IsolatedEnv) -> None:
    tree.write("CLAUDE.md", "@private.md")
    denied = tree.write("private.md", "p")
    result = load_context(request_in(isolated_env, tree.root), _DenyReads(denied))
    assert [(s.path, s.reason, s.detail) for s in result.skipped] == [
        (denied, "unreadable", "permission denied")
    ]


def test_realfs_maps_permission_error(tree: Tree) -> None:
    path = tree.write("x.md", "x")
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("running as root: file permissions do not bind")
        with pytest.raises(FsError) as caught:
            RealFS().read_bytes(path, 10)
        assert caught.value.reason == "unreadable"
    finally:
        path.chmod(0o644)


def test_a_linked_file_includes_relative_to_its_real_folder(
    tree: Tree, load: Loader, isolated_env: IsolatedEnv
) -> None:
    # The dotfiles setup: ~/.claude/CLAUDE.md links into a checkout that holds its includes.
    dotfiles = isolated_env.home / "dotfiles" / "claude"
    dotfiles.mkdir(parents=True)
    (dotfiles / "CLAUDE.md").write_text("global rules @prefs.md")
    (dotfiles / "prefs.md").write_text("British spelling")
    isolated_env.config_dir.mkdir(parents=True, exist_ok=True)
    (isolated_env.config_dir / "CLAUDE.md").symlink_to(dotfiles / "CLAUDE.md")
    # A rules folder linked to a shared one inside the project: its rule's include beside it.
    tree.write("shared/rules/style.md", "style @tabs.md")
    tree.write("shared/rules/tabs.md", "tabs, not spaces")
    tree.mkdir(".claude")
    tree.link(".claude/rules", tree.root / "shared/rules")
    result = load(tree.root)
    contents = [f.content for f in result.files]
    assert "British spelling" in contents
    assert "tabs, not spaces" in contents
    assert result.files[1].path == dotfiles / "prefs.md"
    assert result.files[1].parent == isolated_env.config_dir / "CLAUDE.md"  # as it was found
    assert [s for s in result.skipped if s.reason == "missing"] == []


def test_a_rule_folder_linking_out_is_not_walked(tree: Tree, isolated_env: IsolatedEnv) -> None:
    # Found by a bug hunt (session 23): `.claude/rules/root -> /` had its first 500 folders
    # listed and each file refused as external, on every call: the load depended on `/dev`,
    # whose terminals change all the time, so it was never cached (~0.3 s a call).
    outside = tree.root.parent / "elsewhere"
    for index in range(3):
        (outside / f"d{index}").mkdir(parents=True)
        (outside / f"d{index}" / "rule.md").write_text("outside\n")
    project = tree.git_repo("proj")
    (project / ".claude" / "rules").mkdir(parents=True)
    (project / ".claude" / "rules" / "own.md").write_text("own\n")
    os.symlink(outside, project / ".claude" / "rules" / "root")
    request = request_in(isolated_env, project)
    fs = RealFS()
    result = load_context(request, fs)
    assert loaded(result, project) == [".claude/rules/own.md"]
    assert skips(result, project) == {".claude/rules/root": "external"}
    assert not [path for path in fs.listed if path.is_relative_to(project / ".claude/rules/root")]
    # Approved, the folder is walked as before.
    approved = load_context(replace(request, external_approved=True), RealFS())
    assert len(loaded(approved, project)) == 4
