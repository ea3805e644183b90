"""`get_context {setting_sources}`: the User instruction files load only when the user source is
on (SPEC.md, Layer 1), as Claude Code's `--setting-sources` gates them; Project and Local the
same way. Without the parameter, every source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memoryd_client import RpcError
from tests.conftest import DaemonHandle, IsolatedEnv


def _tree(env: IsolatedEnv, root: Path) -> Path:
    repo = root / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "CLAUDE.md").write_text("User rule: answer in French. @prefs.md @gone.md\n")
    (env.config_dir / "prefs.md").write_text("User preference: short answers.\n")
    (env.config_dir / "rules").mkdir(exist_ok=True)
    (env.config_dir / "rules" / "tone.md").write_text("User rule file: be kind.\n")
    (repo / "CLAUDE.md").write_text("Project rule: use tabs. @docs/missing.md\n")
    (repo / "CLAUDE.local.md").write_text("Local rule: my sandbox URL.\n")
    return repo


def _types(result: dict[str, Any]) -> list[str]:
    return [f["type"] for f in result["files"]]


async def test_the_user_source_off_leaves_out_the_user_files_and_their_includes(
    daemon: DaemonHandle, isolated_env: IsolatedEnv, tmp_path: Path
) -> None:
    repo = _tree(isolated_env, tmp_path)
    every = await daemon.call("get_context", cwd=str(repo))
    assert _types(every) == ["User", "User", "User", "Project", "Local"]
    assert "answer in French" in every["claude_md"]
    assert {s["path"] for s in every["skipped"]} == {
        str(isolated_env.config_dir / "gone.md"),
        str(repo / "docs" / "missing.md"),
    }
    project = await daemon.call("get_context", cwd=str(repo), setting_sources=["project", "local"])
    assert _types(project) == ["Project", "Local"]
    text = project["claude_md"]
    assert "use tabs" in text
    assert "sandbox URL" in text
    assert "French" not in text
    assert "short answers" not in text
    assert "be kind" not in text
    assert [s["path"] for s in project["skipped"]] == [str(repo / "docs" / "missing.md")]
    # The cached load is the whole one: asking for all again gives the user files back.
    assert (await daemon.call("get_context", cwd=str(repo)))["claude_md"] == every["claude_md"]


async def test_each_source_gates_its_own_files(
    daemon: DaemonHandle, isolated_env: IsolatedEnv, tmp_path: Path
) -> None:
    repo = _tree(isolated_env, tmp_path)
    user_only = await daemon.call("get_context", cwd=str(repo), setting_sources=["user"])
    assert _types(user_only) == ["User", "User", "User"]
    none = await daemon.call("get_context", cwd=str(repo), setting_sources=[])
    assert none["files"] == []
    assert none["claude_md"] == ""
    client = await daemon.client()  # the library passes it as given
    try:
        local = await client.get_context(str(repo), setting_sources=("local",))
    finally:
        await client.close()
    assert _types(dict(local)) == ["Local"]


@pytest.mark.parametrize("sources", [["policy"], "user", ["user", 3], ["user"] * 4])
async def test_an_unknown_source_is_invalid_params(
    daemon: DaemonHandle, tmp_path: Path, sources: Any
) -> None:
    with pytest.raises(RpcError) as caught:
        await daemon.call("get_context", cwd=str(tmp_path), setting_sources=sources)
    assert caught.value.code == -32602


async def test_a_file_both_a_user_and_a_project_file_include_stays_with_the_project(
    daemon: DaemonHandle, isolated_env: IsolatedEnv, tmp_path: Path
) -> None:
    # Found by a review: the sources were cut from the cached whole load, where the shared
    # file had been loaded (once) as the User file's include, so it went with it.
    repo = _tree(isolated_env, tmp_path)
    shared = tmp_path / "shared-style.md"
    shared.write_text("Never use tabs.\n")
    (isolated_env.config_dir / "CLAUDE.md").write_text(f"User rule. @{shared}\n")
    (repo / "CLAUDE.md").write_text(f"Project rule. @{shared}\n")
    await daemon.call("includes.approve", cwd=str(repo))
    project = await daemon.call("get_context", cwd=str(repo), setting_sources=["project"])
    assert "Never use tabs." in project["claude_md"]
    assert "User rule" not in project["claude_md"]
