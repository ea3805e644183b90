"""-32003 "auto memory is off" says how to turn it on (PROTOCOL.md, Errors): it names what
turned it off, and following it turns it on. It said "set autoMemoryEnabled to true in user
settings and unset CLAUDE_CODE_DISABLE_AUTO_MEMORY" whatever the cause: with the project's
`.claude/settings.json` saying false, doing both left auto memory off."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.automem import location
from memoryd.settings import Source, merge, read_settings_file
from memoryd_client import RpcError
from tests.conftest import DaemonHandle, IsolatedEnv


async def test_off_in_project_settings_is_said_so_and_the_user_setting_is_not_asked_for(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    project = tmp_path / "proj"
    (project / ".claude").mkdir(parents=True)
    settings_file = project / ".claude" / "settings.json"
    settings_file.write_text(json.dumps({"autoMemoryEnabled": False}))
    params = {"cwd": str(project), "type": "user", "name": "n", "description": "d", "body": "b"}
    with pytest.raises(RpcError) as refused:
        await daemon.call("memory.write", **params)
    assert refused.value.code == -32003
    message = refused.value.message
    assert f"autoMemoryEnabled is false in project settings ({settings_file})" in message
    assert location.ENV_DISABLE not in message
    assert "settings.set" not in message
    # What it says turns it on.
    settings_file.write_text(json.dumps({"autoMemoryEnabled": True}))
    written = await daemon.call("memory.write", **params)
    assert written["created"] is True


async def test_off_in_user_settings_names_the_call_that_turns_it_on(
    daemon: DaemonHandle, isolated_env: IsolatedEnv, tmp_path: Path
) -> None:
    isolated_env.config_dir.mkdir(parents=True, exist_ok=True)
    user_file = isolated_env.config_dir / "settings.json"
    user_file.write_text(json.dumps({"autoMemoryEnabled": False}))
    project = tmp_path / "proj"
    project.mkdir()
    with pytest.raises(RpcError) as refused:
        await daemon.call("recall", cwd=str(project), query="deploys")
    message = refused.value.message
    assert f"autoMemoryEnabled is false in user settings ({user_file})" in message
    assert location.ENV_DISABLE not in message
    call = json.loads(message.split("settings.set '", 1)[1].split("'", 1)[0])
    await daemon.call("settings.set", **call)
    assert (await daemon.call("recall", cwd=str(project), query="deploys"))["memories"] == []


def test_each_cause_is_said_with_its_own_remedy(tmp_path: Path) -> None:
    def off_in(source: Source) -> str:
        path = tmp_path / f"{source.value}.json"
        path.write_text(json.dumps({"autoMemoryEnabled": False}))
        effective = merge([read_settings_file(source, path)])
        assert not location.enabled({}, effective)
        return location.why_off({}, effective)

    assert "only an administrator" in off_in(Source.POLICY)
    assert "memoryd --settings" in off_in(Source.FLAG)
    assert "local settings" in off_in(Source.LOCAL)
    on = merge([])
    env = {location.ENV_DISABLE: "1"}
    said = location.why_off(env, on)
    assert said == (
        "auto memory is off: the daemon's environment sets CLAUDE_CODE_DISABLE_AUTO_MEMORY=1: "
        "unset it, then restart memoryd (`memctl restart`)"
    )
    assert "settings.set" in off_in(Source.USER)
    both = location.why_off(env, merge([read_settings_file(Source.USER, tmp_path / "user.json")]))
    assert both.startswith(said + "; and autoMemoryEnabled is false in user settings")
