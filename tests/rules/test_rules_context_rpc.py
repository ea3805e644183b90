"""`get_context` through a real daemon: shape, errors, caching, watching, sessions, hooks."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import subprocess
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.core.project import Project
from memoryd.daemon.methods import context as context_methods
from memoryd.daemon.methods.context import GetContextResult
from memoryd.daemon.wiring import Services, rpc_methods
from memoryd.rules import realfs
from memoryd.rules import service as service_mod
from memoryd.rules import sessions as sessions_mod
from memoryd.rules.loader import load_context
from memoryd.rules.model import ContextContribution, ContextRequest, IndexEntry
from memoryd.rules.realfs import RealFS
from memoryd_client import RpcError
from tests.conftest import DaemonHandle, IsolatedEnv, daemon_config, start_daemon, stop_daemon
from tests.rules.conftest import Tree

# Generous: these waits end as soon as the change is seen; the bound only stops a hang.
EVENTUALLY_S = 10.0


@pytest.fixture(autouse=True)
def only_test_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Providers the wiring adds (auto memory, team) are not part of these tests."""
    init = Services.__init__

    def without_providers(self: Services, host: Any) -> None:
        init(self, host)
        self.index_providers.clear()

    monkeypatch.setattr(Services, "__init__", without_providers)


@pytest.fixture
async def unwatched(short_tmp: Path) -> AsyncIterator[DaemonHandle]:
    """A daemon started with --no-watch: every call re-validates by stat."""
    handle = await start_daemon(daemon_config(short_tmp, watch_files=False))
    try:
        yield handle
    finally:
        await stop_daemon(handle)


def _names(result: dict[str, Any], root: Path) -> list[str]:
    return [
        str(Path(f["path"]).relative_to(root))
        for f in result["files"]
        if Path(f["path"]).is_relative_to(root)
    ]


def _status(handle: DaemonHandle) -> dict[str, Any]:
    status: dict[str, Any] = handle.daemon.services.instructions.feature_status()
    return status["instruction_files"]


async def _until(predicate: Any, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + EVENTUALLY_S
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def _trusted_call(handle: DaemonHandle, cwd: Path, **params: Any) -> dict[str, Any]:
    """Call until the entry is covered by the live watcher (then only events drop it)."""
    await handle.call("get_context", cwd=str(cwd), **params)

    async def trusted() -> bool:
        await handle.call("get_context", cwd=str(cwd), **params)
        return bool(_status(handle)["trusted"])

    deadline = asyncio.get_running_loop().time() + EVENTUALLY_S
    while not await trusted():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("the watcher never covered the entry")
        await asyncio.sleep(0.02)
    result: dict[str, Any] = await handle.call("get_context", cwd=str(cwd), **params)
    return result


async def test_result_shape(daemon: DaemonHandle, tree: Tree) -> None:
    repo = tree.git_repo("repo")
    tree.write("repo/CLAUDE.md", "# Rules\nUse tabs. @docs/style.md @docs/gone.md")
    tree.write("repo/docs/style.md", "Style guide")
    result = await daemon.call("get_context", cwd=str(repo))
    assert set(result) >= {
        "claude_md",
        "current_date",
        "files",
        "skipped",
        "memory_dir",
        "index_truncated",
        "memory_instructions",
    }
    assert result["files"] == [
        {
            "path": str(repo / "CLAUDE.md"),
            "type": "Project",
            "parent": None,
            "reason": "session_start",
            "globs": None,
        },
        {
            "path": str(repo / "docs/style.md"),
            "type": "Project",
            "parent": str(repo / "CLAUDE.md"),
            "reason": "include",
            "globs": None,
        },
    ]
    assert result["skipped"] == [
        {
            "path": str(repo / "docs/gone.md"),
            "reason": "missing",
            "detail": "no such file",
            "parent": str(repo / "CLAUDE.md"),
        }
    ]
    text = result["claude_md"]
    assert text.startswith("The instructions below")
    assert f"## {repo / 'CLAUDE.md'} (project instructions" in text
    assert text.index("Use tabs.") < text.index("Style guide")
    assert result["current_date"].startswith("Today's date is ")
    assert len(result["current_date"]) == len("Today's date is 2025-01-01.")
    assert result["memory_dir"] is None
    assert result["memory_instructions"] == ""
    assert result["index_truncated"] is False
    assert result["cached"] is False
    GetContextResult.model_validate(result)  # the documented result model, field for field
    again = await daemon.call("get_context", cwd=str(repo))
    assert again["cached"] is True
    assert again["claude_md"] == text


async def test_empty_project(daemon: DaemonHandle, tree: Tree) -> None:
    result = await daemon.call("get_context", cwd=str(tree.root))
    assert _names(result, tree.root) == []
    assert result["claude_md"] == ""


@pytest.mark.parametrize(
    "params",
    [
        {"cwd": "/definitely/not/here"},
        {"cwd": "relative/dir"},
        {"cwd": "."},
        {"cwd": "/tmp\x00x"},
        {"cwd": "/", "touched_paths": ["ok", "bad\x00path"]},
        {"cwd": "/", "touched_paths": "not-a-list"},
        {"cwd": "/", "session_id": "../escape"},
        {"cwd": "/", "unexpected": 1},
        {},
    ],
)
async def test_bad_params_are_invalid_params(daemon: DaemonHandle, params: dict[str, Any]) -> None:
    with pytest.raises(RpcError) as caught:
        await daemon.call("get_context", **params)
    assert caught.value.code == -32602


async def test_cwd_that_is_a_file(daemon: DaemonHandle, tree: Tree) -> None:
    file = tree.write("f.txt", "x")
    with pytest.raises(RpcError) as caught:
        await daemon.call("get_context", cwd=str(file))
    assert caught.value.code == -32602


async def test_edit_seen_by_the_watcher(daemon: DaemonHandle, tree: Tree) -> None:
    repo = tree.git_repo("repo")
    claude_md = tree.write("repo/CLAUDE.md", "version one")
    first = await _trusted_call(daemon, repo)
    assert "version one" in first["claude_md"]
    assert first["cached"] is True
    claude_md.write_text("version two, longer")
    # No call in between: only the watcher can drop the trusted entry.
    await _until(lambda: _status(daemon)["cached"] == 0, "the watcher to drop the entry")
    second = await daemon.call("get_context", cwd=str(repo))
    assert "version two, longer" in second["claude_md"]
    assert second["cached"] is False


async def test_new_ancestor_and_rule_files_are_picked_up(daemon: DaemonHandle, tree: Tree) -> None:
    repo = tree.git_repo("repo")
    sub = tree.mkdir("repo/pkg/sub")
    tree.write("repo/.claude/rules/one.md", "rule one")
    first = await _trusted_call(daemon, sub)
    assert _names(first, tree.root) == ["repo/.claude/rules/one.md"]
    tree.write("repo/CLAUDE.md", "new root file")
    await _until(lambda: _status(daemon)["cached"] == 0, "CLAUDE.md creation to drop the entry")
    await _trusted_call(daemon, sub)
    tree.write("repo/.claude/rules/two.md", "rule two")
    await _until(lambda: _status(daemon)["cached"] == 0, "a new rule file to drop the entry")
    await _trusted_call(daemon, sub)
    tree.write("repo/pkg/.claude/rules/deep.md", "in a folder that did not exist")
    await _until(lambda: _status(daemon)["cached"] == 0, "a new .claude folder to drop the entry")
    result = await daemon.call("get_context", cwd=str(sub))
    assert _names(result, tree.root) == [
        "repo/CLAUDE.md",
        "repo/.claude/rules/one.md",
        "repo/.claude/rules/two.md",
        "repo/pkg/.claude/rules/deep.md",
    ]
    assert repo.is_dir()


async def test_edit_of_an_include_is_seen(daemon: DaemonHandle, tree: Tree) -> None:
    repo = tree.git_repo("repo")
    tree.write("repo/CLAUDE.md", "@docs/part.md")
    part = tree.write("repo/docs/part.md", "part v1")
    await _trusted_call(daemon, repo)
    part.write_text("part v2 edited")
    await _until(lambda: _status(daemon)["cached"] == 0, "the include edit to drop the entry")
    result = await daemon.call("get_context", cwd=str(repo))
    assert "part v2 edited" in result["claude_md"]


async def test_without_watcher_every_call_validates(unwatched: DaemonHandle, tree: Tree) -> None:
    repo = tree.git_repo("repo")
    claude_md = tree.write("repo/CLAUDE.md", "one")
    assert "one" in (await unwatched.call("get_context", cwd=str(repo)))["claude_md"]
    assert (await unwatched.call("get_context", cwd=str(repo)))["cached"] is True
    claude_md.write_text("two, edited")
    result = await unwatched.call("get_context", cwd=str(repo))
    assert result["cached"] is False
    assert "two, edited" in result["claude_md"]
    tree.write("repo/.claude/rules/new.md", "brand new rule")
    assert "brand new rule" in (await unwatched.call("get_context", cwd=str(repo)))["claude_md"]
    (repo / ".claude/rules/new.md").unlink()
    assert "brand new rule" not in (await unwatched.call("get_context", cwd=str(repo)))["claude_md"]
    assert _status(unwatched)["watching"] is False


async def test_settings_change_is_seen(unwatched: DaemonHandle, tree: Tree) -> None:
    repo = tree.git_repo("repo")
    tree.write("repo/CLAUDE.md", "root")
    tree.write("repo/legacy/CLAUDE.md", "legacy")
    cwd = repo / "legacy"
    assert _names(await unwatched.call("get_context", cwd=str(cwd)), repo) == [
        "CLAUDE.md",
        "legacy/CLAUDE.md",
    ]
    tree.write("repo/.claude/settings.json", json.dumps({"claudeMdExcludes": ["**/legacy/**"]}))
    result = await unwatched.call("get_context", cwd=str(cwd))
    assert _names(result, repo) == ["CLAUDE.md"]
    assert [(s["reason"]) for s in result["skipped"]] == ["excluded"]


async def test_settings_layers_merge_excludes_and_depth(
    unwatched: DaemonHandle, tree: Tree, isolated_env: IsolatedEnv
) -> None:
    repo = tree.git_repo("repo")
    tree.write("repo/CLAUDE.md", "@a.md")
    tree.write("repo/a.md", "@b.md")
    tree.write("repo/b.md", "b")
    tree.write("repo/x/CLAUDE.md", "x")
    tree.write("repo/y/CLAUDE.local.md", "y")
    isolated_env.config_dir.mkdir(parents=True)
    (isolated_env.config_dir / "settings.json").write_text(
        json.dumps({"claudeMdExcludes": ["**/x/**"], "maxIncludeDepth": 2})
    )
    tree.write("repo/.claude/settings.local.json", json.dumps({"claudeMdExcludes": ["**/y/**"]}))
    touched = [str(repo / "x/f.py"), str(repo / "y/f.py")]
    result = await unwatched.call("get_context", cwd=str(repo), touched_paths=touched)
    assert _names(result, repo) == ["CLAUDE.md", "a.md"]
    reasons = {str(Path(s["path"]).relative_to(repo)): s["reason"] for s in result["skipped"]}
    assert reasons == {"b.md": "depth", "x/CLAUDE.md": "excluded", "y/CLAUDE.local.md": "excluded"}


async def test_linked_worktree_reads_its_own_project_settings(
    unwatched: DaemonHandle, tree: Tree
) -> None:
    main = tree.mkdir("main")

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.email=a@b", "-c", "user.name=a", *args],
            cwd=main,
            check=True,
            capture_output=True,
        )

    git("init", "-q", "-b", "main")
    git("commit", "-q", "--allow-empty", "-m", "x")
    worktree = tree.root / "wt"
    git("worktree", "add", "-q", str(worktree), "-b", "feature")
    # The feature branch excludes legacy instructions; the main checkout does not.
    tree.write("wt/.claude/settings.json", json.dumps({"claudeMdExcludes": ["**/legacy/**"]}))
    tree.write("wt/legacy/CLAUDE.md", "LEGACY RULES")
    tree.write("main/.claude/settings.json", json.dumps({"agentsMdFallback": False}))
    tree.write("wt/AGENTS.md", "agents of the worktree")
    result = await unwatched.call("get_context", cwd=str(worktree / "legacy"))
    assert "LEGACY RULES" not in result["claude_md"]
    assert _names(result, worktree) == ["AGENTS.md"]
    assert {s["reason"] for s in result["skipped"]} == {"excluded"}


async def test_worktree_inside_its_main_checkout_loads_its_own_files_once(
    unwatched: DaemonHandle, tree: Tree
) -> None:
    main = tree.mkdir("main")

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.email=a@b", "-c", "user.name=a", *args],
            cwd=main,
            check=True,
            capture_output=True,
        )

    tree.write("main/CLAUDE.md", "committed rules")
    tree.write("main/.claude/CLAUDE.md", "committed dot-claude rules")
    tree.write("main/.claude/rules/style.md", "style rule")
    tree.write("main/CLAUDE.local.md", "my private notes")
    git("init", "-q", "-b", "main")
    git("add", "CLAUDE.md", ".claude")
    git("commit", "-q", "-m", "x")
    # Where `claude -w feat` puts it: a folder of the main checkout.
    git("worktree", "add", "-q", ".claude/worktrees/feat", "-b", "feat")
    worktree = main / ".claude/worktrees/feat"
    # Each checkout has moved on: the main branch's copies differ from the feature branch's.
    tree.write("main/CLAUDE.md", "MAIN BRANCH RULES")
    tree.write("main/.claude/CLAUDE.md", "MAIN DOT-CLAUDE RULES")
    tree.write("main/.claude/worktrees/feat/CLAUDE.md", "FEATURE BRANCH RULES")
    result = await unwatched.call("get_context", cwd=str(worktree))
    text = result["claude_md"]
    assert "MAIN BRANCH RULES" not in text
    assert "MAIN DOT-CLAUDE RULES" not in text
    assert text.count("style rule") == 1
    assert _names(result, main) == [
        "CLAUDE.local.md",  # gitignored: the worktree has none of its own
        ".claude/worktrees/feat/CLAUDE.md",
        ".claude/worktrees/feat/.claude/CLAUDE.md",
        ".claude/worktrees/feat/.claude/rules/style.md",
    ]
    skipped = {str(Path(s["path"]).relative_to(main)): s["reason"] for s in result["skipped"]}
    assert skipped == {
        "CLAUDE.md": "duplicate",
        ".claude/CLAUDE.md": "duplicate",
        ".claude/rules": "duplicate",
    }
    # From the main checkout itself nothing changes.
    from_main = await unwatched.call("get_context", cwd=str(main))
    assert _names(from_main, main) == [
        "CLAUDE.md",
        ".claude/CLAUDE.md",
        ".claude/rules/style.md",
        "CLAUDE.local.md",
    ]


async def test_bad_settings_file_is_a_warning(unwatched: DaemonHandle, tree: Tree) -> None:
    repo = tree.git_repo("repo")
    tree.write("repo/CLAUDE.md", "ok")
    tree.write("repo/.claude/settings.json", "{not json")
    result = await unwatched.call("get_context", cwd=str(repo))
    assert _names(result, repo) == ["CLAUDE.md"]
    assert any("invalid JSON" in w for w in result["warnings"])


async def test_touched_paths_relative_and_session_union(daemon: DaemonHandle, tree: Tree) -> None:
    repo = tree.git_repo("repo")
    tree.write("repo/services/pay/CLAUDE.md", "pay service")
    tree.write("repo/.claude/rules/sql.md", "---\npaths: '**/*.sql'\n---\nsql rule")
    first = await daemon.call(
        "get_context",
        cwd=str(repo),
        session_id="s-1",
        touched_paths=["services/pay/main.py"],
    )
    assert _names(first, repo) == ["services/pay/CLAUDE.md"]
    # After compaction the client reports nothing new: the session still has its paths.
    later = await daemon.call("get_context", cwd=str(repo), session_id="s-1")
    assert _names(later, repo) == ["services/pay/CLAUDE.md"]
    assert daemon.daemon.services.session_paths.get(repo, "s-1") == {
        str(repo / "services/pay/main.py")
    }
    await daemon.daemon.services.session_paths.add_touched(repo, "s-1", ["db/schema.sql"], cwd=repo)
    await daemon.daemon.services.session_paths.add_touched(
        repo, "s-1", ["relative-without-cwd.sql"]
    )
    after_turn = await daemon.call("get_context", cwd=str(repo), session_id="s-1")
    assert _names(after_turn, repo) == [".claude/rules/sql.md", "services/pay/CLAUDE.md"]
    other = await daemon.call("get_context", cwd=str(repo), session_id="s-2")
    assert _names(other, repo) == []


async def test_two_projects_sessions_of_one_id_keep_their_own_touched_paths(
    daemon: DaemonHandle, tree: Tree
) -> None:
    # Found by a bug hunt: touched paths were kept by session id alone, so project A's
    # session "s1" and project B's "s1" shared one list, and the paths one touched activated
    # the other's `paths:` rules (here a repository cloned inside another).
    outer = tree.git_repo("outer")
    inner = tree.git_repo("outer/vendor/lib")
    tree.write("outer/.claude/rules/vendor.md", "---\npaths: vendor/**\n---\nouter vendor")
    tree.write("outer/vendor/lib/.claude/rules/src.md", "---\npaths: src/**\n---\ninner src")
    await daemon.call("after_tool", cwd=str(inner), session_id="s1", touched_paths=["src/a.py"])
    touched = await daemon.call("get_context", cwd=str(inner), session_id="s1")
    assert _names(touched, inner) == [".claude/rules/src.md"]
    assert _names(await daemon.call("get_context", cwd=str(outer), session_id="s1"), outer) == []
    await daemon.call(
        "get_context", cwd=str(outer), session_id="s2", touched_paths=["vendor/lib/src/b.py"]
    )
    assert _names(await daemon.call("get_context", cwd=str(inner), session_id="s2"), inner) == []
    assert daemon.daemon.services.session_paths.get(outer, "s1") == frozenset()
    assert daemon.daemon.services.session_paths.get(inner, "s1") == {str(inner / "src/a.py")}


async def test_symlinked_cwd_matches_touched_paths(daemon: DaemonHandle, tree: Tree) -> None:
    repo = tree.git_repo("repo")
    tree.write("repo/pkg/CLAUDE.md", "pkg")
    alias = tree.link("alias", repo)
    result = await daemon.call(
        "get_context", cwd=str(alias), touched_paths=[str(alias / "pkg/x.py")]
    )
    assert _names(result, repo) == ["pkg/CLAUDE.md"]


async def test_touched_path_spelled_through_a_link_activates_files(
    daemon: DaemonHandle, tree: Tree
) -> None:
    repo = tree.git_repo("real/repo")
    tree.write("real/repo/CLAUDE.md", "root")
    tree.write("real/repo/svc/CLAUDE.md", "svc")
    tree.write("real/repo/.claude/rules/api.md", "---\npaths: svc/**\n---\napi")
    link = tree.link("link", tree.root / "real") / "repo"
    expected = ["CLAUDE.md", ".claude/rules/api.md", "svc/CLAUDE.md"]
    for cwd, touched in ((repo, link), (link, repo), (link, link)):
        result = await daemon.call(
            "get_context", cwd=str(cwd), touched_paths=[str(touched / "svc/x.py")]
        )
        assert _names(result, repo) == expected, (cwd, touched)
    # Through a session: reported with the link's spelling, asked for with the real cwd.
    await daemon.daemon.services.session_paths.add_touched(repo, "s-1", [str(link / "svc/y.py")])
    result = await daemon.call("get_context", cwd=str(repo), session_id="s-1")
    assert _names(result, repo) == expected


async def test_editing_a_touched_source_file_keeps_the_cache(
    unwatched: DaemonHandle, tree: Tree
) -> None:
    repo = tree.git_repo("repo")
    tree.write("repo/CLAUDE.md", "root")
    tree.write("repo/src/a.py", "x = 1\n")
    tree.mkdir("repo/pkg")
    touched = ["src/a.py", "pkg"]
    call = {"cwd": str(repo), "touched_paths": touched}
    await unwatched.call("get_context", **call)
    assert (await unwatched.call("get_context", **call))["cached"] is True
    tree.write("repo/src/a.py", "x = 2  # the agent edits the file it touched\n")
    assert (await unwatched.call("get_context", **call))["cached"] is True
    # Whether a touched path is a folder still counts: `pkg` is one no more.
    (repo / "pkg").rmdir()
    assert (await unwatched.call("get_context", **call))["cached"] is False


@pytest.mark.parametrize("touched", ["svc", "lib/svc"])
async def test_a_touched_file_replaced_by_a_folder_is_seen(
    daemon: DaemonHandle, tree: Tree, touched: str
) -> None:
    # Found by a bug hunt: a touched file is no dependency, so once the watcher was trusted
    # the entry kept the load that took it for a file, and the folder's CLAUDE.md and rules
    # never came in (until the touched set changed to one that was not a superset).
    repo = tree.git_repo("repo")
    tree.write("repo/CLAUDE.md", "root")
    tree.write(f"repo/{touched}", "a file for now")
    call = {"touched_paths": [touched]}
    first = await _trusted_call(daemon, repo, **call)
    assert _names(first, repo) == ["CLAUDE.md"]
    (repo / touched).unlink()
    tree.write(f"repo/{touched}/CLAUDE.md", "rules of the folder")
    tree.write(f"repo/{touched}/.claude/rules/r.md", "its rule")
    await _until(lambda: _status(daemon)["cached"] == 0, "the replacement to drop the entry")
    result = await daemon.call("get_context", cwd=str(repo), **call)
    assert _names(result, repo) == [
        "CLAUDE.md",
        f"{touched}/CLAUDE.md",
        f"{touched}/.claude/rules/r.md",
    ]
    # And back to a file: the folder was a dependency already.
    await _trusted_call(daemon, repo, **call)
    shutil.rmtree(repo / touched)
    tree.write(f"repo/{touched}", "a file again")
    await _until(lambda: _status(daemon)["cached"] == 0, "the file to drop the entry")
    result = await daemon.call("get_context", cwd=str(repo), **call)
    assert _names(result, repo) == ["CLAUDE.md"]


def test_a_touched_file_is_no_dependency_of_the_load(tree: Tree, isolated_env: IsolatedEnv) -> None:
    tree.write("CLAUDE.md", "root")
    source = tree.write("deep/down/a.py", "x = 1")
    fs = RealFS()
    request = ContextRequest(
        cwd=tree.root,
        project_root=tree.root,
        config_dir=isolated_env.config_dir,
        managed_dir=isolated_env.managed_dir,
        home=isolated_env.home,
        touched=frozenset({source, tree.root / "deep"}),
    )
    load_context(request, fs)
    involvement = fs.involvement()
    assert source not in involvement.involved
    assert tree.root / "deep" in involvement.involved  # a touched folder: its removal counts
    source.write_text("x = 2, longer")
    assert realfs.unchanged(involvement.stamps)
    source.unlink()
    source.mkdir()  # a folder now: nested files may start at it
    assert not realfs.unchanged(involvement.stamps)


def test_a_touched_instruction_file_is_still_a_dependency(
    tree: Tree, isolated_env: IsolatedEnv
) -> None:
    nested = tree.write("svc/CLAUDE.md", "svc")
    fs = RealFS()
    request = ContextRequest(
        cwd=tree.root,
        project_root=tree.root,
        config_dir=isolated_env.config_dir,
        managed_dir=isolated_env.managed_dir,
        home=isolated_env.home,
        touched=frozenset({nested}),  # the agent opened the nested CLAUDE.md itself
    )
    assert [f.path for f in load_context(request, fs).files] == [nested]
    involvement = fs.involvement()
    assert nested in involvement.involved
    nested.write_text("svc, edited")
    assert not realfs.unchanged(involvement.stamps)


def _unwatched_repo(
    tree: Tree, monkeypatch: pytest.MonkeyPatch, folders: int
) -> tuple[Path, list[str]]:
    """A repository and a file touched in each of `folders` folders: more than an entry may
    have watched (50 here), so its entry is checked by stat."""
    monkeypatch.setattr(service_mod, "MAX_WATCHED_PER_ENTRY", 50)
    repo = tree.git_repo("repo")
    tree.write("repo/CLAUDE.md", "root")
    touched = [f"src/m{i}/x.py" for i in range(folders)]
    for path in touched:
        tree.write(f"repo/{path}", "")
    return repo, touched


async def test_touched_files_in_many_folders_take_no_watch_each(
    daemon: DaemonHandle, tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, touched = _unwatched_repo(tree, monkeypatch, 80)
    await daemon.call("get_context", cwd=str(repo))
    await _until(lambda: _status(daemon)["watched_dirs"] > 0, "the first watch")
    plain = _status(daemon)["watched_dirs"]
    call = {"cwd": str(repo), "touched_paths": touched}
    await daemon.call("get_context", **call)
    await asyncio.sleep(0.3)
    assert _status(daemon)["watched_dirs"] == plain  # 80 folders: checked by stat instead
    assert (await daemon.call("get_context", **call))["cached"] is True
    tree.write("repo/src/m7/CLAUDE.md", "nested m7")
    assert "nested m7" in (await daemon.call("get_context", **call))["claude_md"]


async def test_an_unwatched_entry_is_rechecked_off_the_event_loop(
    daemon: DaemonHandle, tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by a bug hunt: an entry over MAX_WATCHED_PER_ENTRY folders is re-stat'ed on every
    # call, and that ran on the event loop: a session that touched files in 3,000 folders
    # (~30,000 recorded paths) held every other client ~0.15 s per `get_context`.
    repo, touched = _unwatched_repo(tree, monkeypatch, 300)
    call = {"cwd": str(repo), "touched_paths": touched}
    await daemon.call("get_context", **call)
    entries = daemon.daemon.services.instructions._entries.values()
    assert max(len(e.involvement.stamps) for e in entries) > service_mod.INLINE_STAMPS
    checked_on: list[int] = []
    unchanged = realfs.unchanged

    def recording(stamps: dict[Path, realfs.Stamp]) -> bool:
        checked_on.append(threading.get_ident())
        return unchanged(stamps)

    monkeypatch.setattr(realfs, "unchanged", recording)
    assert (await daemon.call("get_context", **call))["cached"] is True
    assert checked_on
    assert threading.get_ident() not in checked_on  # not on the event loop's thread
    tree.write("repo/src/m7/CLAUDE.md", "nested m7")
    assert "nested m7" in (await daemon.call("get_context", **call))["claude_md"]


def _record_calls(
    monkeypatch: pytest.MonkeyPatch, module: Any, *names: str, sized: int = 0
) -> dict[str, list[tuple[int, int]]]:
    """Each call of `module`'s functions `names`: (its thread, the size of argument `sized`)."""
    calls: dict[str, list[tuple[int, int]]] = {name: [] for name in names}

    def recording(real: Any, made: list[tuple[int, int]]) -> Any:
        def call(*args: Any) -> Any:
            made.append((threading.get_ident(), len(args[sized])))
            return real(*args)

        return call

    for name, made in calls.items():
        monkeypatch.setattr(module, name, recording(getattr(module, name), made))
    return calls


async def test_a_sessions_many_touched_paths_are_read_off_the_event_loop(
    daemon: DaemonHandle, tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by a bug hunt: each get_context of a session made Paths of its whole union of
    # touched paths on the event loop; at 50,000 that held every other client ~0.5 s a call.
    repo = tree.git_repo("repo")
    made = _record_calls(monkeypatch, context_methods, "_touched")
    made |= _record_calls(monkeypatch, sessions_mod, "normalize_all")
    many = [f"src/f{i}.py" for i in range(sessions_mod.INLINE_TOUCHED * 2)]
    call = {"cwd": str(repo), "session_id": "s1"}
    loop = threading.get_ident()
    await daemon.call("get_context", touched_paths=many[:10], **call)
    # A few: on the loop, no thread's cost.
    assert made == {"_touched": [(loop, 10)], "normalize_all": [(loop, 10)]}
    await daemon.call("get_context", touched_paths=many, **call)
    (thread, size), *_ = made["_touched"][1:]
    assert (size, made["normalize_all"][1][1]) == (len(many) - 10, len(many))
    assert loop not in (thread, made["normalize_all"][1][0])


@pytest.mark.parametrize("method", ["after_tool", "after_turn"])
async def test_many_paths_a_tool_read_are_normalized_off_the_event_loop(
    daemon: DaemonHandle, tree: Tree, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    # Found by a bug hunt: after_tool's (and after_turn's) paths were normalized on the event
    # loop; 100,000 of them held every other client ~0.15 s.
    repo = tree.git_repo("repo")
    made = _record_calls(monkeypatch, sessions_mod, "normalize_all")
    many = [f"src/f{i}.py" for i in range(sessions_mod.INLINE_TOUCHED + 1)]
    extra = {"messages": [{"role": "user", "content": "hi"}]} if method == "after_turn" else {}
    await daemon.call(method, cwd=str(repo), session_id="s1", read_paths=many, **extra)
    assert [size for _, size in made["normalize_all"]] == [len(many)]
    assert made["normalize_all"][0][0] != threading.get_ident()
    assert len(daemon.daemon.services.session_paths.get(repo, "s1")) == len(many)


def test_a_path_is_normalized_as_normpath_does() -> None:
    # The way around `normpath` for paths it leaves alone, checked on every path of up to 7
    # characters of `/`, `.` and `a`.
    for size in range(1, 8):
        for chars in itertools.product("/.a", repeat=size):
            raw = "".join(chars)
            expected = os.path.normpath(os.path.join("/cwd", raw))
            assert sessions_mod.normalize(raw, Path("/cwd")) == expected, raw


async def test_a_sessions_touched_paths_are_made_into_paths_once(
    daemon: DaemonHandle, tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by a bug hunt: every get_context of a session made Paths of its whole union again
    # (and resolved those outside the project again): at 50,000 the thread doing it held the
    # GIL ~0.3 s a call, and other clients' polls waited up to ~250 ms meanwhile.
    repo = tree.git_repo("repo")
    tree.write("repo/CLAUDE.md", "root")
    made = _record_calls(monkeypatch, context_methods, "_touched")
    nested = _record_calls(monkeypatch, service_mod, "_nested", sized=1)
    many = [f"src/f{i}.py" for i in range(sessions_mod.INLINE_TOUCHED * 2)]
    call = {"cwd": str(repo), "session_id": "s1"}
    await daemon.call("get_context", touched_paths=many, **call)
    made["_touched"].clear()
    nested["_nested"].clear()
    for _ in range(3):  # the session's union again (and again the paths it holds already)
        assert (await daemon.call("get_context", touched_paths=many[:5], **call))["cached"]
    # Another client's call in between: the session's set is not judged again after it.
    await daemon.call("get_context", cwd=str(repo), touched_paths=["other.py"])
    assert (await daemon.call("get_context", **call))["cached"]
    # Only the other client's one path was made and judged (its load a miss: judged twice).
    assert made["_touched"] == [(threading.get_ident(), 1)]
    assert {size for _, size in nested["_nested"]} == {1}
    made["_touched"].clear()
    nested["_nested"].clear()
    # A burst of new paths: only they are made and judged.
    burst = [f"lib/b{i}.py" for i in range(3)]
    assert "root" in (await daemon.call("get_context", touched_paths=burst, **call))["claude_md"]
    assert [size for _, size in made["_touched"]] == [3]
    assert [size for _, size in nested["_nested"]] == [3]
    union = daemon.daemon.services.session_paths.view(repo, "s1", None)
    assert len(union.new) == len(many) + len(burst)


async def _a_sessions_load_gone_stale(unwatched: DaemonHandle, tree: Tree) -> Path:
    """A session touched repo/a/sub, then a/sub was made a folder with a CLAUDE.md: the
    session's cached load (nested folders {a}) no longer holds, unseen until re-stat'ed."""
    repo = tree.git_repo("repo")
    tree.mkdir("repo/a")
    tree.mkdir("repo/c")
    await unwatched.call("get_context", cwd=str(repo), session_id="s1", touched_paths=["a/sub"])
    tree.write("repo/a/sub/CLAUDE.md", "sub rules")
    return repo


async def test_a_grown_sessions_load_is_not_stored_under_its_stale_nested_folders(
    unwatched: DaemonHandle, tree: Tree
) -> None:
    # Found by a review: the load made for a session's grown set was stored under the nested
    # folders of its earlier set plus those of its new paths, without a/sub made a folder
    # since; a client that touched only a/x.py (folders {a}) was then given a/sub's CLAUDE.md.
    repo = await _a_sessions_load_gone_stale(unwatched, tree)
    call = {"cwd": str(repo), "session_id": "s1"}
    grown = await unwatched.call("get_context", touched_paths=["b.py"], **call)
    assert "sub rules" in grown["claude_md"]
    other = await unwatched.call("get_context", cwd=str(repo), touched_paths=["a/x.py"])
    assert "sub rules" not in other["claude_md"]


async def test_a_grown_session_is_not_given_another_load_by_its_stale_nested_folders(
    unwatched: DaemonHandle, tree: Tree
) -> None:
    # Found by a review: a session's set grown by a path in another folder was keyed by the
    # nested folders of its earlier set plus c; a client's load of exactly {a, c} was valid,
    # and the session got it, without the CLAUDE.md of a/sub, a folder it had touched.
    repo = await _a_sessions_load_gone_stale(unwatched, tree)
    other = await unwatched.call("get_context", cwd=str(repo), touched_paths=["a/x", "c/y"])
    assert "sub rules" not in other["claude_md"]
    call = {"cwd": str(repo), "session_id": "s1"}
    grown = await unwatched.call("get_context", touched_paths=["c/z.py"], **call)
    assert "sub rules" in grown["claude_md"]


async def test_a_sessions_set_is_judged_again_by_rules_edited_since(
    daemon: DaemonHandle, tree: Tree
) -> None:
    # Found by a review: a session's unchanged set was known by identity and given the key
    # its `paths:` flags made when judged; once a rule was edited (its load dropped) and a
    # client's load was stored under that same key, the session was served that load, without
    # the rule now matching its a/x.py.
    repo = tree.git_repo("repo")
    tree.write("repo/CLAUDE.md", "root")
    tree.mkdir("repo/a")
    rule = tree.write("repo/.claude/rules/r.md", '---\npaths:\n  - "**/*.ts"\n---\nthe rule')
    session = {"cwd": str(repo), "session_id": "s1"}
    await _trusted_call(daemon, repo, session_id="s1", touched_paths=["a/x.py"])
    rule.write_text('---\npaths:\n  - "**/*.py"\n---\nthe rule')
    await _until(lambda: _status(daemon)["cached"] == 0, "the rule's edit to drop the load")
    other = await daemon.call("get_context", cwd=str(repo), touched_paths=["a/y.ts"])
    assert "the rule" not in other["claude_md"]
    assert "the rule" in (await daemon.call("get_context", **session))["claude_md"]


async def test_evicted_entries_release_their_watches(
    daemon: DaemonHandle, tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service_mod, "MAX_ENTRIES", 2)
    big = tree.git_repo("big")
    touched = [f"src/m{i}/x.py" for i in range(150)]
    for path in touched:
        tree.write(f"big/{path}", "")
    await daemon.call("get_context", cwd=str(big), touched_paths=touched)
    await _until(lambda: _status(daemon)["watched_dirs"] > 150, "the touched folders watched")
    for index in range(3):  # push the big entry out
        await daemon.call("get_context", cwd=str(tree.git_repo(f"small{index}")))
    await _until(lambda: _status(daemon)["watched_dirs"] < 100, "the watches released")


async def test_the_watched_folders_of_all_loads_are_bounded(
    daemon: DaemonHandle, tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by a bug hunt: each load's folders were capped, not all of them: 256 sessions of
    # 500 folders held 128,000 inotify watches (twice that while the watcher restarted), and
    # past the user's budget the watcher failed as a whole. Past the cap the oldest loads'
    # folders are let go of, and those loads, still cached, are checked by stat again.
    monkeypatch.setattr(service_mod, "MAX_WATCHED_TOTAL", 40)
    service = daemon.daemon.services.instructions
    first = tree.git_repo("p0")
    tree.write("p0/CLAUDE.md", "p0 v1")
    for _ in range(200):  # until the watcher covers it (a hit trusts it then)
        await daemon.call("get_context", cwd=str(first))
        if _status(daemon)["trusted"]:
            break
        await asyncio.sleep(0.02)
    assert _status(daemon)["trusted"] == 1
    for index in range(1, 8):
        repo = tree.git_repo(f"p{index}")
        touched = [f"m{i}/x.py" for i in range(8)]
        for path in touched:
            tree.write(f"p{index}/{path}", "")
        await daemon.call("get_context", cwd=str(repo), touched_paths=touched)
    assert service._watcher is not None
    assert service._watcher.wanted <= 40
    await _until(lambda: _status(daemon)["watched_dirs"] <= 40, "the oldest folders let go of")
    tree.write("p0/CLAUDE.md", "p0 v2")
    assert "p0 v2" in (await daemon.call("get_context", cwd=str(first)))["claude_md"]


async def test_cache_is_keyed_by_what_touched_paths_activate(
    unwatched: DaemonHandle, tree: Tree
) -> None:
    repo = tree.git_repo("repo")
    tree.write("repo/CLAUDE.md", "root")
    tree.write("repo/.claude/rules/sql.md", "---\npaths: '**/*.sql'\n---\nsql rule")
    tree.write("repo/svc/CLAUDE.md", "svc rules")
    tree.mkdir("repo/src")
    first = await unwatched.call(
        "get_context",
        cwd=str(repo),
        session_id="s",
        touched_paths=[f"src/f{i}.py" for i in range(300)],
    )
    assert _names(first, repo) == ["CLAUDE.md"]
    # One more path per call that activates nothing: the same load, from the cache.
    for index in range(5):
        again = await unwatched.call(
            "get_context", cwd=str(repo), session_id="s", touched_paths=[f"src/new{index}.py"]
        )
        assert again["cached"] is True
        assert again["claude_md"] == first["claude_md"]
    other = await unwatched.call("get_context", cwd=str(repo), touched_paths=["src/other.py"])
    assert other["cached"] is True  # another set, the same activations
    status = _status(unwatched)
    assert (status["misses"], status["cached"]) == (1, 1)
    # A path that matches a rule, or opens a nested folder, is another load ...
    sql = await unwatched.call(
        "get_context", cwd=str(repo), session_id="s", touched_paths=["db/a.sql"]
    )
    assert (sql["cached"], _names(sql, repo)) == (False, ["CLAUDE.md", ".claude/rules/sql.md"])
    more_sql = await unwatched.call(
        "get_context", cwd=str(repo), session_id="s", touched_paths=["db/b.sql"]
    )
    assert more_sql["cached"] is True
    nested = await unwatched.call(
        "get_context", cwd=str(repo), session_id="s", touched_paths=["svc/x.py"]
    )
    assert nested["cached"] is False
    assert _names(nested, repo) == ["CLAUDE.md", ".claude/rules/sql.md", "svc/CLAUDE.md"]
    # ... and a rule edited to match what was touched is seen.
    tree.write("repo/.claude/rules/py.md", "---\npaths: 'src/**'\n---\npy rule")
    fresh = await unwatched.call("get_context", cwd=str(repo), touched_paths=["src/other.py"])
    assert _names(fresh, repo) == ["CLAUDE.md", ".claude/rules/py.md"]


async def test_drop_instruction_cache(daemon: DaemonHandle, tree: Tree) -> None:
    repo = tree.git_repo("repo")
    tree.write("repo/CLAUDE.md", "x")
    await daemon.call("get_context", cwd=str(repo))
    assert (await daemon.call("get_context", cwd=str(repo)))["cached"] is True
    assert daemon.daemon.services.instructions.drop(tree.root / "elsewhere") == 0
    assert daemon.daemon.services.instructions.drop(repo) == 1
    assert (await daemon.call("get_context", cwd=str(repo)))["cached"] is False
    assert daemon.daemon.services.instructions.drop() == 1


async def test_concurrent_calls_load_once(daemon: DaemonHandle, tree: Tree) -> None:
    repo = tree.git_repo("repo")
    for index in range(30):
        tree.write(f"repo/.claude/rules/r{index}.md", f"rule {index}")
    results = await asyncio.gather(*(daemon.call("get_context", cwd=str(repo)) for _ in range(10)))
    assert len({r["claude_md"] for r in results}) == 1
    assert _status(daemon)["misses"] == 1


async def test_index_provider_hook(daemon: DaemonHandle, tree: Tree) -> None:
    repo = tree.git_repo("repo")
    tree.write("repo/CLAUDE.md", "project rules")
    memdir = tree.mkdir("memdir")
    seen: list[Project] = []

    async def provider(project: Project) -> ContextContribution:
        seen.append(project)
        return ContextContribution(
            entries=[
                IndexEntry(memdir / "MEMORY.md", "AutoMem", "- [Tabs](tabs.md) — use tabs", True),
                IndexEntry(memdir / "team/MEMORY.md", "TeamMem", "- [CI](ci.md) — CI notes"),
            ],
            memory_dir=str(memdir),
            memory_instructions="How to use memory.",
            index_truncated=True,
        )

    daemon.daemon.services.index_providers.append(provider)
    result = await daemon.call("get_context", cwd=str(repo))
    assert seen[0].root == repo
    assert [(f["type"], f["reason"]) for f in result["files"]] == [
        ("Project", "session_start"),
        ("AutoMem", "session_start"),
        ("TeamMem", "session_start"),
    ]
    text = result["claude_md"]
    assert text.index("project rules") < text.index("use tabs") < text.index("CI notes")
    assert "auto memory index" in text
    assert result["memory_dir"] == str(memdir)
    assert result["memory_instructions"] == "How to use memory."
    assert result["index_truncated"] is True


async def test_failing_provider_costs_nothing_else(daemon: DaemonHandle, tree: Tree) -> None:
    repo = tree.git_repo("repo")
    tree.write("repo/CLAUDE.md", "still here")

    async def broken(_project: Project) -> ContextContribution:
        raise RuntimeError("index exploded")

    daemon.daemon.services.index_providers.append(broken)
    result = await daemon.call("get_context", cwd=str(repo))
    assert "still here" in result["claude_md"]
    assert [s["reason"] for s in result["skipped"]] == ["provider_error"]
    assert "index exploded" in result["skipped"][0]["detail"]
    assert daemon.daemon.worker_errors["index-provider"] == 1


async def test_includes_approve_revoke_list(
    daemon: DaemonHandle, tree: Tree, isolated_env: IsolatedEnv
) -> None:
    repo = tree.git_repo("repo")
    tree.write("shared/guide.md", "shared guide")
    tree.write("repo/CLAUDE.md", "@../shared/guide.md")
    refused = await daemon.call("get_context", cwd=str(repo))
    assert [s["reason"] for s in refused["skipped"]] == ["external"]
    listing = await daemon.call("includes.list", cwd=str(repo))
    assert listing["approved"] is False
    assert [e["path"] for e in listing["external"]] == [str(tree.root / "shared/guide.md")]

    approved = await daemon.call("includes.approve", cwd=str(repo / ".git" / ".."))
    assert approved["project_root"] == str(repo)
    store = isolated_env.state_dir / "include-approvals.json"
    assert approved["file"] == str(store)
    assert os.stat(store).st_mode & 0o777 == 0o600
    assert str(repo) in json.loads(store.read_text())["projects"]
    assert not list(repo.rglob("*approv*"))  # nothing written into the repository
    loaded = await daemon.call("get_context", cwd=str(repo))
    assert "shared guide" in loaded["claude_md"]
    everything = await daemon.call("includes.list")
    assert [a["project_root"] for a in everything["approvals"]] == [str(repo)]

    revoked = await daemon.call("includes.revoke", cwd=str(repo))
    assert revoked["removed"] is True
    again = await daemon.call("get_context", cwd=str(repo))
    assert [s["reason"] for s in again["skipped"]] == ["external"]
    assert (await daemon.call("includes.revoke", cwd=str(repo)))["removed"] is False


async def test_corrupt_approvals_file_fails_closed(
    daemon: DaemonHandle, tree: Tree, isolated_env: IsolatedEnv
) -> None:
    repo = tree.git_repo("repo")
    tree.write("outside.md", "o")
    tree.write("repo/CLAUDE.md", "@../outside.md")
    isolated_env.state_dir.mkdir(parents=True, exist_ok=True)  # the daemon keeps its lock there
    (isolated_env.state_dir / "include-approvals.json").write_text("{broken")
    result = await daemon.call("get_context", cwd=str(repo))
    assert [s["reason"] for s in result["skipped"]] == ["external"]
    with pytest.raises(RpcError) as caught:
        await daemon.call("includes.approve", cwd=str(repo))
    assert caught.value.code == -32602
    assert "not valid JSON" in caught.value.message


async def test_status_reports_instruction_files(daemon: DaemonHandle, tree: Tree) -> None:
    await daemon.call("get_context", cwd=str(tree.root))
    status = await daemon.call("status")
    assert status["features"]["instruction_files"]["enabled"] is True
    assert {"get_context", "includes.approve", "includes.revoke", "includes.list"} <= set(
        rpc_methods()
    )


async def test_recreated_rule_folder_is_watched_again(daemon: DaemonHandle, tree: Tree) -> None:
    repo = tree.git_repo("repo")
    tree.write("repo/.claude/rules/a.md", "rule a")
    await _trusted_call(daemon, repo)
    shutil.rmtree(repo / ".claude" / "rules")
    await _until(lambda: _status(daemon)["cached"] == 0, "the folder removal to drop the entry")
    tree.write("repo/.claude/rules/b.md", "rule b")
    # The old watch died with the old folder: the entry is trusted only once a new one is live.
    await _trusted_call(daemon, repo)
    tree.write("repo/.claude/rules/c.md", "rule c")
    await _until(lambda: _status(daemon)["cached"] == 0, "a file in the recreated folder")
    result = await daemon.call("get_context", cwd=str(repo))
    assert _names(result, repo) == [".claude/rules/b.md", ".claude/rules/c.md"]


@pytest.mark.parametrize("move", ["rename the include's folder", "turn .claude off", "relink"])
async def test_a_folder_moved_away_drops_the_entry(
    daemon: DaemonHandle, tree: Tree, move: str
) -> None:
    # Found by a bug hunt: the parent's watch reports the folder, not a file the load read,
    # so a trusted entry kept serving files that were gone.
    repo = tree.git_repo("repo")
    tree.write("repo/.claude/CLAUDE.md", "dot-claude instructions")
    tree.write("repo/.claude/rules/r.md", "a rule")
    tree.write("repo/docs/x.md", "old docs")
    tree.write("repo/A/y.md", "from A")
    tree.write("repo/B/y.md", "from B")
    tree.link("repo/shared", "A")
    tree.write("repo/CLAUDE.md", "@docs/x.md\n@shared/y.md\n")
    await _trusted_call(daemon, repo)
    if move == "rename the include's folder":
        (repo / "docs").rename(repo / "docs.old")
        gone = "old docs"
    elif move == "turn .claude off":
        (repo / ".claude").rename(repo / ".claude.off")
        gone = "a rule"
    else:
        (repo / "shared").unlink()
        (repo / "shared").symlink_to("B")
        gone = "from A"
    await _until(lambda: _status(daemon)["cached"] == 0, f"{move} to drop the entry")
    result = await daemon.call("get_context", cwd=str(repo))
    assert gone not in result["claude_md"]


async def test_a_full_cache_of_valid_entries_evicts_its_oldest(
    unwatched: DaemonHandle, tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cache and its list of loads share one bound (`_store`): every cached key is a loaded
    # one, so the cache stays within it and loses its least recently used entry.
    monkeypatch.setattr(service_mod, "MAX_ENTRIES", 2)
    repos = [tree.git_repo(f"p{index}") for index in range(3)]
    for repo in repos:
        assert (await unwatched.call("get_context", cwd=str(repo)))["cached"] is False
    assert _status(unwatched)["cached"] == 2
    assert (await unwatched.call("get_context", cwd=str(repos[2])))["cached"] is True
    assert (await unwatched.call("get_context", cwd=str(repos[1])))["cached"] is True
    assert (await unwatched.call("get_context", cwd=str(repos[0])))["cached"] is False
    # p2, now the least recently used, made room for p0.
    assert (await unwatched.call("get_context", cwd=str(repos[1])))["cached"] is True
    assert (await unwatched.call("get_context", cwd=str(repos[2])))["cached"] is False
    assert _status(unwatched)["cached"] == 2


async def test_unwatched_a_touched_paths_folder_made_later_opens_its_claude_md(
    unwatched: DaemonHandle, tree: Tree
) -> None:
    # Found by a review: a touched a/sub/x.py with no a/ stopped the nested walk at a/, and
    # nothing recorded that a/ was missing; once a/sub/CLAUDE.md was written the same call
    # was answered from the cache without it, for as long as the daemon ran.
    repo = tree.git_repo("repo")
    call = {"cwd": str(repo), "touched_paths": ["a/sub/x.py"]}
    first = await unwatched.call("get_context", **call)
    assert "sub rules" not in first["claude_md"]
    tree.write("repo/a/sub/CLAUDE.md", "sub rules")
    again = await unwatched.call("get_context", **call)
    assert "sub rules" in again["claude_md"]
