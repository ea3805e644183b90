"""Layouts as they appear in public repositories, rebuilt by hand."""

from __future__ import annotations

from typing import Any

from tests.conftest import DaemonHandle, IsolatedEnv
from tests.rules.conftest import Loader, Tree
from tests.rules.rules_helpers import loaded, skips


def test_dot_claude_md_made_only_of_docs_imports(tree: Tree, load: Loader) -> None:
    repo = tree.git_repo("repo")
    tree.write(
        "repo/.claude/CLAUDE.md",
        "@./../docs/architecture.md\n@./../docs/testing.md\n@./../docs/conventions.md\n@./../README.md\n",
    )
    tree.write("repo/docs/architecture.md", "# Architecture\nHexagonal.")
    tree.write("repo/docs/testing.md", "# Testing\nRun `make test`.")
    tree.write("repo/docs/conventions.md", "# Conventions\nSee @./testing.md too.")
    tree.write("repo/README.md", "# Project")
    result = load(repo)
    assert loaded(result, repo) == [
        ".claude/CLAUDE.md",
        "docs/architecture.md",
        "docs/testing.md",
        "docs/conventions.md",
        "README.md",
    ]
    assert skips(result, repo) == {"docs/testing.md": "duplicate"}
    assert all(f.parent == repo / ".claude/CLAUDE.md" for f in result.files[1:])


def test_claude_md_symlinked_to_agents_md_in_a_monorepo(tree: Tree, load: Loader) -> None:
    repo = tree.git_repo("repo")
    tree.write("repo/AGENTS.md", "root agents")
    tree.link("repo/CLAUDE.md", "AGENTS.md")
    tree.write("repo/packages/web/AGENTS.md", "web agents")
    tree.link("repo/packages/web/CLAUDE.md", "AGENTS.md")
    tree.write("repo/packages/api/AGENTS.md", "api agents, no CLAUDE.md beside it")
    touched = (repo / "packages/web/src/App.tsx", repo / "packages/api/main.go")
    result = load(repo, touched=touched)
    assert loaded(result, repo) == [
        "CLAUDE.md",
        "packages/api/AGENTS.md",
        "packages/web/CLAUDE.md",
    ]
    assert [f.content for f in result.files] == [
        "root agents",
        "api agents, no CLAUDE.md beside it",
        "web agents",
    ]
    assert [f.reason for f in result.files] == ["session_start", "nested", "nested"]
    assert skips(result, repo) == {}


def test_user_file_imports_from_home(tree: Tree, load: Loader, isolated_env: IsolatedEnv) -> None:
    config = isolated_env.config_dir
    (config / "instructions").mkdir(parents=True)
    (config / "CLAUDE.md").write_text(
        "# Me\n@~/.claude/instructions/python.md\n@~/.claude/instructions/git.md\n"
        "@~/.claude/instructions/missing.md\n"
    )
    (config / "instructions" / "python.md").write_text("Use uv.")
    (config / "instructions" / "git.md").write_text("Conventional commits.")
    repo = tree.git_repo("repo")
    result = load(repo)
    assert [(f.type, f.path.name) for f in result.files] == [
        ("User", "CLAUDE.md"),
        ("User", "python.md"),
        ("User", "git.md"),
    ]
    assert [(s.path.name, s.reason) for s in result.skipped] == [("missing.md", "missing")]


def test_package_names_in_code_spans_are_not_imports(tree: Tree, load: Loader) -> None:
    repo = tree.git_repo("repo")
    tree.write(
        "repo/CLAUDE.md",
        "## Stack\n"
        "- Tests: `@playwright/test` and `@testing-library/react`\n"
        "- Types: `@types/node`\n"
        "- Install with `pnpm add -D @tanstack/react-query`\n\n"
        "```bash\nnpm i @vitejs/plugin-react\n```\n\n"
        "Contact maintainers@example.org. Style: @docs/style.md\n",
    )
    tree.write("repo/docs/style.md", "style")
    result = load(repo)
    assert loaded(result, repo) == ["CLAUDE.md", "docs/style.md"]
    assert result.skipped == ()


def test_rules_with_paths_lists(tree: Tree, load: Loader) -> None:
    repo = tree.git_repo("repo")
    tree.write("repo/.claude/rules/general.md", "# General\nBe brief.")
    tree.write(
        "repo/.claude/rules/frontend/react.md",
        '---\ndescription: React rules\npaths:\n  - "apps/web/**/*.tsx"\n  - "packages/ui/**/*.{ts,tsx}"\n---\nUse hooks.',
    )
    tree.write(
        "repo/.claude/rules/backend/api.md",
        "---\npaths:\n  - services/**/handlers/*.go\n---\nReturn errors, do not panic.",
    )
    tree.write(
        "repo/.claude/rules/testing.md",
        "---\npaths: '**/*_test.go **/*.test.ts'\n---\nTable tests.",
    )
    result = load(repo, touched=(repo / "packages/ui/src/Button.ts", repo / "x/y_test.go"))
    assert loaded(result, repo) == [
        ".claude/rules/frontend/react.md",
        ".claude/rules/general.md",
        ".claude/rules/testing.md",
    ]
    assert skips(result, repo) == {".claude/rules/backend/api.md": "paths_not_matched"}


def test_committed_claude_local_md(tree: Tree, load: Loader) -> None:
    repo = tree.git_repo("repo")
    tree.write("repo/CLAUDE.md", "shared")
    tree.write("repo/CLAUDE.local.md", "committed by mistake, still the Local layer")
    result = load(repo)
    assert [(f.type, f.path.name) for f in result.files] == [
        ("Project", "CLAUDE.md"),
        ("Local", "CLAUDE.local.md"),
    ]


async def test_monorepo_service_with_its_own_rules(
    daemon: DaemonHandle, tree: Tree, monkeypatch: Any
) -> None:
    daemon.daemon.services.index_providers.clear()  # only the instruction files here
    repo = tree.git_repo("repo")
    tree.write("repo/CLAUDE.md", "# Monorepo\nUse the Makefile. @docs/onboarding.md")
    tree.write("repo/docs/onboarding.md", "Onboarding.")
    tree.write("repo/.claude/rules/commits.md", "Conventional commits.")
    tree.write("repo/services/billing/CLAUDE.md", "# Billing\nMoney is integer cents.")
    tree.write(
        "repo/services/billing/.claude/rules/migrations.md",
        "---\npaths: migrations/**\n---\nNever edit old migrations.",
    )
    tree.write("repo/services/billing/.claude/rules/style.md", "Billing style.")
    tree.write("repo/services/search/CLAUDE.md", "# Search")

    from_root = await daemon.call("get_context", cwd=str(repo))
    assert [f["path"] for f in from_root["files"]] == [
        str(repo / "CLAUDE.md"),
        str(repo / "docs/onboarding.md"),
        str(repo / ".claude/rules/commits.md"),
    ]
    working = await daemon.call(
        "get_context",
        cwd=str(repo),
        touched_paths=["services/billing/migrations/0007_add_tax.sql"],
    )
    assert [(f["path"], f["reason"]) for f in working["files"]][3:] == [
        (str(repo / "services/billing/CLAUDE.md"), "nested"),
        (str(repo / "services/billing/.claude/rules/migrations.md"), "path_glob"),
        (str(repo / "services/billing/.claude/rules/style.md"), "nested"),
    ]
    # Started inside the service: the repository's files come first, the service's after.
    inside = await daemon.call("get_context", cwd=str(repo / "services/billing"))
    paths = [f["path"] for f in inside["files"]]
    assert paths == [
        str(repo / "CLAUDE.md"),
        str(repo / "docs/onboarding.md"),
        str(repo / ".claude/rules/commits.md"),
        str(repo / "services/billing/CLAUDE.md"),
        str(repo / "services/billing/.claude/rules/style.md"),
    ]
    assert [s["reason"] for s in inside["skipped"]] == ["paths_not_matched"]


def test_a_listed_glob_with_a_space_matches_that_folder(tree: Tree, load: Loader) -> None:
    repo = tree.git_repo("repo")
    tree.write("repo/.claude/rules/docs.md", '---\npaths:\n  - "my docs/**"\n---\nWrite plainly.')
    assert loaded(load(repo, touched=(repo / "my docs/guide.md",)), repo) == [
        ".claude/rules/docs.md"
    ]
    result = load(repo, touched=(repo / "docs/guide.md",))
    assert skips(result, repo) == {".claude/rules/docs.md": "paths_not_matched"}
