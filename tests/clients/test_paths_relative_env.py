"""A relative HOME or CLAUDE_CONFIG_DIR (`CLAUDE_CONFIG_DIR=cfg` in a unit's Environment= or a
shell profile) is not taken: it named a folder under each process's working directory, so the
daemon kept the user's memory under wherever it was started and its replies carried relative
paths. Only a value that is absolute (after `~`) counts, else the default."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from memoryd_client import paths
from tests.conftest import IsolatedEnv, daemon_config, start_daemon, stop_daemon

PASSWD_HOME = Path(pwd.getpwuid(os.getuid()).pw_dir)


@pytest.mark.parametrize("value", ["", "cfg", "./cfg", "../cfg"])
def test_an_empty_or_relative_config_dir_is_the_default(
    monkeypatch: pytest.MonkeyPatch, isolated_env: IsolatedEnv, value: str
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", value)
    assert paths.config_dir() == isolated_env.home / ".claude"


def test_a_config_dir_under_home_is_expanded(
    monkeypatch: pytest.MonkeyPatch, isolated_env: IsolatedEnv
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", "~/cfg")
    assert paths.config_dir() == isolated_env.home / "cfg"


@pytest.mark.parametrize("value", ["home", "./", ""])
def test_a_relative_home_is_the_password_database_s(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("HOME", value)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", "~/cfg")
    assert paths.home() == PASSWD_HOME
    assert paths.config_dir() == PASSWD_HOME / "cfg"
    assert paths.state_dir().is_absolute()


async def test_the_daemon_keeps_memory_where_a_relative_config_dir_does_not_lead(
    monkeypatch: pytest.MonkeyPatch, isolated_env: IsolatedEnv, short_tmp: Path
) -> None:
    workdir = isolated_env.root / "started-here"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", "cfg")
    project = isolated_env.root / "project"
    project.mkdir()
    handle = await start_daemon(daemon_config(short_tmp))
    try:
        listed = await handle.call("memory.list", cwd=str(project))
    finally:
        await stop_daemon(handle)
    assert Path(listed["memory_dir"]).is_relative_to(isolated_env.home / ".claude")
    assert not (workdir / "cfg").exists()
