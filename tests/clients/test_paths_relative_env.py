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


@pytest.mark.parametrize("value", ["home", "./"])
def test_a_managed_dir_under_home_takes_the_same_home(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    # `~` was expanded with os.path.expanduser, which took the relative HOME: `~/policy` became
    # `home/policy`, relative, and the policy folder silently /etc/claude-code.
    from memoryd import paths as daemon_paths

    monkeypatch.setenv("HOME", value)
    monkeypatch.setenv("MEMORYD_MANAGED_DIR", "~/policy")
    assert daemon_paths.managed_dir() == PASSWD_HOME / "policy"


async def test_a_relative_config_dir_is_in_status_problems(
    monkeypatch: pytest.MonkeyPatch, isolated_env: IsolatedEnv, short_tmp: Path
) -> None:
    # Passed over in silence (c21989e): the user's settings and memory were read from
    # ~/.claude, and nothing said why the folder named was not.
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", "cfg")
    handle = await start_daemon(daemon_config(short_tmp))
    try:
        problems = (await handle.call("status"))["problems"]
    finally:
        await stop_daemon(handle)
    said = [p for p in problems if p.startswith("CLAUDE_CONFIG_DIR='cfg' is not an absolute")]
    assert len(said) == 1, problems
    assert f"read from {isolated_env.home / '.claude'}; set it to an absolute path" in said[0]


def test_what_a_relative_home_or_config_dir_says(
    monkeypatch: pytest.MonkeyPatch, isolated_env: IsolatedEnv
) -> None:
    from memoryd.diagnose import config_home_problems

    absolute = {"HOME": str(isolated_env.home), "CLAUDE_CONFIG_DIR": "~/cfg"}
    assert config_home_problems(absolute) == []
    assert config_home_problems({"HOME": str(isolated_env.home), "CLAUDE_CONFIG_DIR": ""}) == []
    monkeypatch.setenv("HOME", "rel-home")  # read only: nothing is written there
    (home_said,) = config_home_problems({"HOME": "rel-home"})
    assert home_said.startswith("HOME='rel-home' is not an absolute path")
    assert f"the password database, {PASSWD_HOME};" in home_said
    (cut,) = config_home_problems({"CLAUDE_CONFIG_DIR": "k" * 5000})  # a key pasted there
    assert "k" * 200 + "…'" in cut
    assert "k" * 201 not in cut
