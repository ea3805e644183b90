"""Discovery order, rule folders, AGENTS.md, excludes, nested and conditional files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memoryd.rules.loader import load_context, nested_dirs
from memoryd.rules.model import ContextRequest
from memoryd.rules.realfs import RealFS
from tests.conftest import IsolatedEnv
from tests.rules.conftest import Loader, Tree
from tests.rules.rules_helpers import loaded, skips


def test_order_managed_user_project_local(
    tree: Tree, load: Loader, isolated_env: IsolatedEnv
) -> None:
    (isolated_env.managed_dir / ".claude" / "rules").mkdir(parents=True)
    (isolated_env.managed_dir / "CLAUDE.md").write_text("policy")
    (isolated_env.managed_dir / ".claude" / "rules" / "sec.md").write_text("policy rule")
    isolated_env.config_dir.mkdir(parents=True)
    (isolated_env.config_dir / "rules").mkdir()
    (isolated_env.config_dir / "CLAUDE.md").write_text("user")
    (isolated_env.config_dir / "rules" / "style.md").write_text("user rule")
    tree.write("CLAUDE.md", "outer")
    tree.write("CLAUDE.local.md", "outer local")
    tree.write("app/CLAUDE.md", "app")
    tree.write("app/.claude/CLAUDE.md", "app dot")
    tree.write("app/.claude/rules/a.md", "rule a")
    tree.write("app/CLAUDE.local.md", "app local")
    result = load(tree.root / "app", project_root=tree.root / "app")
    kinds = [(f.type, f.path.name) for f in result.files]
    assert kinds == [
        ("Managed", "CLAUDE.md"),
        ("Managed", "sec.md"),
        ("User", "CLAUDE.md"),
        ("User", "style.md"),
        ("Project", "CLAUDE.md"),
        ("Local", "CLAUDE.local.md"),
        ("Project", "CLAUDE.md"),
        ("Project", "CLAUDE.md"),
        ("Project", "a.md"),
        ("Local", "CLAUDE.local.md"),
    ]
    assert loaded(result, tree.root) == [
        "CLAUDE.md",
        "CLAUDE.local.md",
        "app/CLAUDE.md",
        "app/.claude/CLAUDE.md",
        "app/.claude/rules/a.md",
        "app/CLAUDE.local.md",
    ]
    assert all(f.reason == "session_start" for f in result.files)


def test_user_source_can_be_disabled(tree: Tree, load: Loader, isolated_env: IsolatedEnv) -> None:
    isolated_env.config_dir.mkdir(parents=True)
    (isolated_env.config_dir / "CLAUDE.md").write_text("user")
    result = load(tree.root, sources=frozenset({"project", "local"}))
    assert [f for f in result.files if f.type == "User"] == []


def test_rules_recursive_sorted_and_symlinks_followed(tree: Tree, load: Loader) -> None:
    tree.write("shared/rules/linked.md", "linked file")
    tree.write("shared/pack/one.md", "pack one")
    tree.write(".claude/rules/b.md", "b")
    tree.write(".claude/rules/a/deep/x.md", "x")
    tree.write(".claude/rules/notes.txt", "not a rule")
    tree.link(".claude/rules/c.md", tree.root / "shared/rules/linked.md")
    tree.link(".claude/rules/pack", tree.root / "shared/pack")
    result = load(tree.root)
    assert loaded(result, tree.root) == [
        ".claude/rules/a/deep/x.md",
        ".claude/rules/b.md",
        ".claude/rules/c.md",
        ".claude/rules/pack/one.md",
    ]


def test_rule_folder_symlink_cycle(tree: Tree, load: Loader) -> None:
    tree.write(".claude/rules/r.md", "r")
    tree.link(".claude/rules/loop", "..")  # points back at .claude, which holds rules/
    tree.link(".claude/rules/self", ".")
    result = load(tree.root)
    assert loaded(result, tree.root).count(".claude/rules/r.md") == 1
    reasons = skips(result, tree.root)
    assert reasons[".claude/rules/self"] == "symlink_loop"
    # `loop` walks into .claude once; its rules/ is the folder we are in: a loop again.
    assert reasons[".claude/rules/loop/rules"] == "symlink_loop"


def test_symlink_loop_file(tree: Tree, load: Loader) -> None:
    tree.link(".claude/rules/a.md", "b.md")
    tree.link(".claude/rules/b.md", "a.md")
    tree.link("CLAUDE.md", "CLAUDE.md")
    result = load(tree.root)
    reasons = skips(result, tree.root)
    assert reasons[".claude/rules/a.md"] == "symlink_loop"
    assert reasons[".claude/rules/b.md"] == "symlink_loop"
    assert reasons["CLAUDE.md"] == "symlink_loop"


def test_dangling_rule_symlink(tree: Tree, load: Loader) -> None:
    tree.link(".claude/rules/gone.md", "nowhere.md")
    assert skips(load(tree.root), tree.root) == {".claude/rules/gone.md": "missing"}


def test_agents_md_read_where_no_claude_md(tree: Tree, load: Loader) -> None:
    tree.write("AGENTS.md", "agents root")
    tree.write("pkg/CLAUDE.md", "claude pkg")
    tree.write("pkg/AGENTS.md", "agents pkg, not read")
    result = load(tree.root / "pkg", project_root=tree.root)
    assert loaded(result, tree.root) == ["AGENTS.md", "pkg/CLAUDE.md"]


def test_agents_md_fallback_off(tree: Tree, load: Loader) -> None:
    tree.write("AGENTS.md", "agents")
    result = load(tree.root, agents_md_fallback=False)
    assert loaded(result, tree.root) == []
    assert skips(result, tree.root) == {"AGENTS.md": "agents_md_disabled"}


def test_claude_md_symlink_to_agents_md_read_once(tree: Tree, load: Loader) -> None:
    tree.write("AGENTS.md", "shared instructions @AGENTS.md")
    tree.link("CLAUDE.md", "AGENTS.md")
    result = load(tree.root)
    assert loaded(result, tree.root) == ["CLAUDE.md"]
    assert result.files[0].content.startswith("shared instructions")
    assert skips(result, tree.root) == {"AGENTS.md": "cycle"}


def test_excludes_apply_but_not_to_managed(
    tree: Tree, load: Loader, isolated_env: IsolatedEnv
) -> None:
    (isolated_env.managed_dir / "CLAUDE.md").write_text("policy")
    tree.write("CLAUDE.md", "root")
    tree.write("legacy/CLAUDE.md", "old")
    tree.write("legacy/CLAUDE.local.md", "old local")
    result = load(
        tree.root / "legacy",
        project_root=tree.root,
        excludes=("**/legacy/**", "**/CLAUDE.md"),
    )
    assert loaded(result, tree.root) == []
    assert [f.type for f in result.files] == ["Managed"]
    reasons = skips(result, tree.root)
    assert reasons == {
        "CLAUDE.md": "excluded",
        "legacy/CLAUDE.md": "excluded",
        "legacy/CLAUDE.local.md": "excluded",
    }


def test_invalid_exclude_is_a_warning(tree: Tree, load: Loader) -> None:
    tree.write("CLAUDE.md", "root")
    result = load(tree.root, excludes=("{a,b}" * 40,))
    assert loaded(result, tree.root) == ["CLAUDE.md"]
    assert any("claudeMdExcludes" in w for w in result.warnings)


def test_conditional_rules(tree: Tree, load: Loader) -> None:
    tree.write(".claude/rules/always.md", "always")
    tree.write(".claude/rules/ts.md", "---\npaths:\n  - 'src/**/*.{ts,tsx}'\n---\nts only")
    tree.write(".claude/rules/py.md", "---\nglobs: '*.py'\n---\npy only")
    untouched = load(tree.root)
    assert loaded(untouched, tree.root) == [".claude/rules/always.md"]
    assert skips(untouched, tree.root) == {
        ".claude/rules/ts.md": "paths_not_matched",
        ".claude/rules/py.md": "paths_not_matched",
    }
    touched = load(tree.root, touched=(tree.root / "src/ui/button.tsx",))
    assert loaded(touched, tree.root) == [".claude/rules/always.md", ".claude/rules/ts.md"]
    ts_rule = touched.files[-1]
    assert ts_rule.reason == "path_glob"
    assert ts_rule.globs == ("src/**/*.{ts,tsx}",)
    assert ts_rule.content == "ts only"


def test_conditional_rule_globs_relative_to_folder_holding_claude(tree: Tree, load: Loader) -> None:
    tree.write("svc/.claude/rules/api.md", "---\npaths: api/**\n---\napi rule")
    project = tree.root
    outside = load(tree.root / "svc", project_root=project, touched=(tree.root / "api/x.py",))
    assert "svc/.claude/rules/api.md" not in loaded(outside, tree.root)
    inside = load(tree.root / "svc", project_root=project, touched=(tree.root / "svc/api/x.py",))
    assert "svc/.claude/rules/api.md" in loaded(inside, tree.root)


def test_broken_frontmatter_rule_is_skipped(tree: Tree, load: Loader) -> None:
    # Broken for Claude Code too (its retry quotes `key: value` lines only), and aliases that
    # no retry makes text (in a nested flow list: `- [*a, *a]` is quoted, text).
    tree.write(".claude/rules/bad.md", "---\npaths:\n  - [oops\n---\nbody")
    tree.write(".claude/rules/bomb.md", "---\na:\n  - &a [1]\nb:\n  - [[*a, *a]]\n---\nbody")
    tree.write(".claude/rules/good.md", "fine")
    result = load(tree.root)
    assert loaded(result, tree.root) == [".claude/rules/good.md"]
    assert skips(result, tree.root) == {
        ".claude/rules/bad.md": "bad_frontmatter",
        ".claude/rules/bomb.md": "bad_frontmatter",
    }


def test_nested_files_below_cwd(tree: Tree, load: Loader) -> None:
    tree.write("CLAUDE.md", "root")
    tree.write("services/pay/CLAUDE.md", "pay")
    tree.write("services/pay/.claude/rules/money.md", "money")
    tree.write("services/pay/.claude/rules/sql.md", "---\npaths: '**/*.sql'\n---\nsql")
    tree.write("services/pay/CLAUDE.local.md", "pay local")
    tree.write("services/auth/CLAUDE.md", "auth, untouched")
    before = load(tree.root)
    assert loaded(before, tree.root) == ["CLAUDE.md"]
    after = load(tree.root, touched=(tree.root / "services/pay/src/ledger.py",))
    assert loaded(after, tree.root) == [
        "CLAUDE.md",
        "services/pay/CLAUDE.md",
        "services/pay/.claude/rules/money.md",
        "services/pay/CLAUDE.local.md",
    ]
    assert [f.reason for f in after.files[1:]] == ["nested", "nested", "nested"]
    with_sql = load(tree.root, touched=(tree.root / "services/pay/db/schema.sql",))
    sql_rule = [f for f in with_sql.files if f.path.name == "sql.md"]
    assert [f.reason for f in sql_rule] == ["path_glob"]


def test_touched_directory_counts_as_folder(tree: Tree, load: Loader) -> None:
    tree.write("pkg/CLAUDE.md", "pkg")
    result = load(tree.root, touched=(tree.root / "pkg",))
    assert loaded(result, tree.root) == ["pkg/CLAUDE.md"]


def test_nested_folders_are_strictly_below_cwd_also_from_the_root(tree: Tree) -> None:
    # ac25fde walked touched paths as strings: `//x/f.py` (normpath keeps two leading slashes)
    # split under cwd `/` as `/` itself, then `//x`: cwd given again as a nested folder.
    tree.write("pkg/CLAUDE.md", "pkg")
    below = [*reversed(tree.root.parents[:-1]), tree.root, tree.root / "pkg"]
    assert nested_dirs(Path("/"), [tree.root / "pkg/f.py"], RealFS()) == below
    assert nested_dirs(Path("/"), [Path(f"/{tree.root}/pkg/f.py"), Path("/")], RealFS()) == []
    assert nested_dirs(tree.root, [tree.root, tree.root / "pkg"], RealFS()) == [tree.root / "pkg"]


def test_deep_touched_path_of_nothing_probes_one_missing_folder(
    tree: Tree, isolated_env: IsolatedEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree.write("CLAUDE.md", "root")
    tree.write("real/CLAUDE.md", "real")
    deep = tree.root / "real" / Path(*["a"] * 1000) / "f.py"
    calls = 0
    isdir = os.path.isdir

    def counting_isdir(path: str | os.PathLike[str]) -> bool:
        nonlocal calls
        calls += 1
        return isdir(path)

    monkeypatch.setattr(os.path, "isdir", counting_isdir)
    fs = RealFS()
    request = ContextRequest(
        cwd=tree.root,
        project_root=tree.root,
        config_dir=isolated_env.config_dir,
        managed_dir=isolated_env.managed_dir,
        home=isolated_env.home,
        touched=frozenset({deep}),
    )
    result = load_context(request, fs)
    assert loaded(result, tree.root) == ["CLAUDE.md", "real/CLAUDE.md"]
    # `real/a` is probed (creating it is seen), nothing below it: not 1,000 nested projects.
    assert not any(p.is_relative_to(tree.root / "real/a/a") for p in fs.stamps if p != deep)
    assert tree.root / "real/a/CLAUDE.md" in fs.stamps
    involvement = fs.involvement()
    assert tree.root / "real/a" in involvement.involved
    assert tree.root / "real" in involvement.watch_dirs
    assert calls < 2 * 1000 + 100  # linear in the path's depth, not one walk per probe


def test_involvement_walks_a_missing_path_once(tree: Tree, monkeypatch: pytest.MonkeyPatch) -> None:
    deep = tree.root / Path(*["a"] * 500)
    fs = RealFS()
    for n in range(200):
        fs.note(deep / f"{n}.md")
    calls = 0
    isdir = os.path.isdir

    def counting_isdir(path: str | os.PathLike[str]) -> bool:
        nonlocal calls
        calls += 1
        return isdir(path)

    monkeypatch.setattr(os.path, "isdir", counting_isdir)
    involvement = fs.involvement()
    assert involvement.watch_dirs == {tree.root}
    assert len(involvement.involved) == 200 + 500
    assert calls < 1000  # 100,000 before: every probe walked all 500 missing folders


def test_nested_ignores_claude_and_git_folders(tree: Tree, load: Loader) -> None:
    tree.write(".claude/CLAUDE.md", "dot")
    result = load(tree.root, touched=(tree.root / ".claude/rules/x.md", tree.root / ".git/HEAD"))
    assert loaded(result, tree.root) == [".claude/CLAUDE.md"]
    assert skips(result, tree.root) == {}


def test_every_ancestor_walked(tree: Tree, load: Loader) -> None:
    deep = tree.mkdir("a/b/c/d")
    tree.write("CLAUDE.md", "0")
    tree.write("a/b/CLAUDE.md", "2")
    tree.write("a/b/c/d/CLAUDE.local.md", "4")
    result = load(deep, project_root=tree.root)
    assert loaded(result, tree.root) == ["CLAUDE.md", "a/b/CLAUDE.md", "a/b/c/d/CLAUDE.local.md"]


def test_unreadable_instruction_file(tree: Tree, load: Loader) -> None:
    path = tree.write("CLAUDE.md", "secret")
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("running as root: file permissions do not bind")
        assert skips(load(tree.root), tree.root) == {"CLAUDE.md": "unreadable"}
    finally:
        path.chmod(0o644)


def test_fifo_is_not_read(tree: Tree, load: Loader) -> None:
    os.mkfifo(tree.root / "CLAUDE.md")
    assert skips(load(tree.root), tree.root) == {"CLAUDE.md": "not_a_file"}


def test_user_claude_dir_under_home_loaded_once(isolated_env: IsolatedEnv, load: Loader) -> None:
    isolated_env.config_dir.mkdir(parents=True)
    (isolated_env.config_dir / "CLAUDE.md").write_text("user")
    project = isolated_env.home / "code"
    project.mkdir()
    result = load(project)
    home_files = [f for f in result.files if f.path.is_relative_to(isolated_env.home)]
    assert [(f.type, f.path) for f in home_files] == [
        ("User", isolated_env.config_dir / "CLAUDE.md")
    ]
    assert [s.reason for s in result.skipped] == ["duplicate"]


def test_user_conditional_rule_is_judged_once_when_cwd_is_under_home(
    isolated_env: IsolatedEnv, load: Loader
) -> None:
    home = isolated_env.home
    rule = isolated_env.config_dir / "rules" / "notes.md"
    rule.parent.mkdir(parents=True)
    rule.write_text("---\npaths: notes/**\n---\nuser rule for notes\n")
    bad = isolated_env.config_dir / "rules" / "bad.md"
    bad.write_text("---\npaths:\n  - [unclosed\n---\nbad\n")
    project = home / "proj"
    project.mkdir()
    # Relative to the project (User rules) no match; relative to HOME (its Project rules) one.
    result = load(project, touched=(home / "notes" / "todo.md",))
    assert [f for f in result.files if f.path in (rule, bad)] == []
    assert [(s.path, s.reason) for s in result.skipped] == [
        (bad, "bad_frontmatter"),
        (rule, "paths_not_matched"),
    ]
    assert str(project) in result.skipped[1].detail


def test_paths_are_absolute(tree: Tree, load: Loader) -> None:
    tree.write("CLAUDE.md", "x")
    assert all(Path(f.path).is_absolute() for f in load(tree.root).files)
