"""`status.problems`: what is wrong with the setup, each with what mends it.

Found by a bug hunt: a team URL without a token, or `MEMORYD_TEAM_URL=notaurl`, showed `team
sync: on` (the folder `suppressed: no_oauth`/`bad_url`, a code word); a user settings file of
broken JSON, and lines of the service's env file that set nothing, were in no reply of
`status` at all.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from memoryd.core.diagnose import env_file_problems
from memoryd.core.model_config import ModelConfig
from memoryd.core.team_config import TeamConfig
from tests.conftest import DaemonHandle, IsolatedEnv, daemon_config, start_daemon, stop_daemon
from tests.fakes.full_disk import SmallDisks


@pytest.mark.parametrize(
    ("url", "token", "start"),
    [
        ("http://127.0.0.1:8787", None, "MEMORYD_TEAM_URL is set but MEMORYD_TEAM_TOKEN is not"),
        (None, "mdt_" + "x" * 20, "MEMORYD_TEAM_TOKEN is set but MEMORYD_TEAM_URL is not"),
        ("notaurl", "mdt_" + "x" * 20, "MEMORYD_TEAM_URL is not an http(s) URL with a host"),
        ("http://[::1", "mdt_" + "x" * 20, "MEMORYD_TEAM_URL is not an http(s) URL with a host"),
        ("http://h:8787", "mdt_x x", "MEMORYD_TEAM_TOKEN is not a usable token"),
        (None, None, None),
        ("https://team.example", "mdt_" + "x" * 20, None),
    ],
)
def test_a_team_configuration_that_cannot_sync_says_why(
    url: str | None, token: str | None, start: str | None
) -> None:
    problem = TeamConfig(url=url, token=token).problem
    if start is None:
        assert problem is None
    else:
        assert problem is not None
        assert problem.startswith(start)
        assert token is None or token not in problem


def test_env_file_lines_that_set_nothing_are_named_never_their_values(tmp_path: Path) -> None:
    env = tmp_path / "memoryd.env"
    env.write_text(
        "# credentials\n"
        "export ANTHROPIC_API_KEY=sk-secret-one\n"
        'MEMORYD_TEAM_TOKEN="mdt-secret-two\n'
        "MEMORYD_MODEL=claude-x\n"
        "MEMORYD_SMALL_MODEL='claude-y'\n"
        "OTHER=whatever\n"
        "\n"
    )
    problems = env_file_problems(env, {"MEMORYD_SMALL_MODEL": "claude-y"})
    assert problems == [
        f"{env} line 2 is not a NAME=value line, so it sets nothing: write it as NAME=value "
        "(no `export`, no space in the name)",
        f"{env} line 3: the value of MEMORYD_TEAM_TOKEN opens a quote it does not close on "
        "that line; close it, or drop the quotes",
        f"MEMORYD_MODEL (line 4) in {env} differs from the daemon's environment: it was "
        "started before the file was edited, or not by the service; restart it (`memctl "
        "restart`, or `systemctl --user restart memoryd.service`)",
    ]
    assert not any("secret" in p for p in problems)
    assert env_file_problems(tmp_path / "none", {}) == []


async def test_status_lists_each_problem_and_none_on_a_good_setup(
    short_tmp: Path, isolated_env: IsolatedEnv
) -> None:
    good = await start_daemon(daemon_config(short_tmp))
    try:
        assert (await good.call("status"))["problems"] == []
    finally:
        await stop_daemon(good)
    isolated_env.config_dir.mkdir(parents=True)
    settings = isolated_env.config_dir / "settings.json"
    settings.write_text('{"autoMemoryEnabled": tru')
    env = isolated_env.home / ".config" / "memoryd" / "env"
    env.parent.mkdir(parents=True)
    env.write_text("ANTHROPIC_API_KEY sk-pasted-without-equals\n")
    config = daemon_config(
        short_tmp,
        team=TeamConfig(url="notaurl", token="mdt_" + "x" * 20),
        model=ModelConfig(api_key="k" * 20, base_url="api.anthropic.com"),
    )
    handle = await start_daemon(config)
    try:
        problems = (await handle.call("status"))["problems"]
    finally:
        await stop_daemon(handle)
    assert [p.split(":")[0] for p in problems] == [
        "ANTHROPIC_BASE_URL is not an http(s) URL with a host",
        "MEMORYD_TEAM_URL is not an http(s) URL with a host",
        f"user settings file {settings}",
        f"{env} line 1 is not a NAME=value line, so it sets nothing",
    ]
    assert "invalid JSON" in problems[2]
    assert "sk-pasted" not in " ".join(problems)


async def test_a_memory_folder_that_cannot_be_written_is_a_problem(
    daemon: DaemonHandle,
    small_disks: SmallDisks,
    short_tmp: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Found by a bug hunt: a memory folder on a read-only mount showed auto memory `on` and
    # no warning; every write failed and extraction saved nothing.
    mount = small_disks.mount(short_tmp / "ro", kib=1024)
    (mount / "mem").mkdir()
    subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
    monkeypatch.setenv("MEMORYD_AUTO_MEMORY_DIR", str(mount / "mem" / "sub"))
    project = tmp_path / "proj"
    project.mkdir()
    await daemon.call("memory.list", cwd=str(project))
    assert (await daemon.call("status"))["problems"] == [
        f"memory folder {mount / 'mem' / 'sub'} cannot be written (its file system is "
        f"read-only on {mount / 'mem'}): memories are not saved there; remount it read-write, "
        "or point autoMemoryDirectory (user settings) or MEMORYD_AUTO_MEMORY_DIR at another "
        "folder"
    ]
    subprocess.run(["mount", "-o", "remount,rw", str(mount)], check=True)
    assert (await daemon.call("status"))["problems"] == []
    small_disks.fill(mount)
    (problem,) = (await daemon.call("status"))["problems"]
    assert problem.startswith(
        f"memory folder {mount / 'mem' / 'sub'} cannot be written (its file system is full: "
    )
    assert problem.endswith(
        "free some space, or point autoMemoryDirectory (user settings) "
        "or MEMORYD_AUTO_MEMORY_DIR at another folder"
    )
