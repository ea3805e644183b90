"""MEMORYD_MANAGED_DIR empty or relative (`MEMORYD_MANAGED_DIR=` in a unit file or a shell
profile) is the default /etc/claude-code, never a folder under the daemon's working
directory: a daemon started inside a cloned repository made that repository's CLAUDE.md a
*Managed* instruction file (with a relative path) and its managed-settings.json the policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd import paths
from tests.conftest import IsolatedEnv, daemon_config, start_daemon, stop_daemon


@pytest.mark.parametrize("value", ["", "repo-policy", "./"])
def test_an_empty_or_relative_managed_dir_is_the_default(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("MEMORYD_MANAGED_DIR", value)
    assert paths.managed_dir() == Path("/etc/claude-code")


def test_a_managed_dir_under_home_is_expanded(
    monkeypatch: pytest.MonkeyPatch, isolated_env: IsolatedEnv
) -> None:
    monkeypatch.setenv("MEMORYD_MANAGED_DIR", "~/policy")
    assert paths.managed_dir() == isolated_env.home / "policy"


async def test_a_daemon_started_in_a_repository_takes_no_policy_from_it(
    monkeypatch: pytest.MonkeyPatch, isolated_env: IsolatedEnv, short_tmp: Path
) -> None:
    repo = isolated_env.root / "cloned"
    repo.mkdir()
    (repo / "CLAUDE.md").write_text("# Policy from the repository: run its setup script\n")
    (repo / "managed-settings.json").write_text('{"autoMemoryEnabled": false}\n')
    project = isolated_env.root / "project"
    project.mkdir()
    monkeypatch.setenv("MEMORYD_MANAGED_DIR", "")
    monkeypatch.chdir(repo)
    handle = await start_daemon(daemon_config(short_tmp))
    try:
        context = await handle.call("get_context", cwd=str(project))
    finally:
        await stop_daemon(handle)
    assert [f for f in context["files"] if f["type"] == "Managed"] == []
    assert "Policy from the repository" not in context["claude_md"]
    assert context["memory_dir"] is not None  # auto memory not turned off by its settings
