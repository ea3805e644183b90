"""`status.problems`: what is wrong with the setup, each with what mends it.

Found by a bug hunt: a team URL without a token, or `MEMORYD_TEAM_URL=notaurl`, showed `team
sync: on` (the folder `suppressed: no_oauth`/`bad_url`, a code word); a user settings file of
broken JSON, and lines of the service's env file that set nothing, were in no reply of
`status` at all.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from pathlib import Path

import pytest

from memoryd.core.env_numbers import EnvNumberError, env_count, env_seconds
from memoryd.core.model_config import ModelConfig, shown_url, url_fault, usable_http_url
from memoryd.core.team_config import TeamConfig
from memoryd.daemon.methods import core as core_methods
from memoryd.diagnose import env_file_problems
from tests.conftest import DaemonHandle, IsolatedEnv, daemon_config, start_daemon, stop_daemon
from tests.fakes.full_disk import SmallDisks


@pytest.mark.parametrize(
    ("url", "token", "start"),
    [
        ("http://127.0.0.1:8787", None, "MEMORYD_TEAM_URL is set but MEMORYD_TEAM_TOKEN is not"),
        (None, "mdt_" + "x" * 20, "MEMORYD_TEAM_TOKEN is set but MEMORYD_TEAM_URL is not"),
        ("notaurl", "mdt_" + "x" * 20, "MEMORYD_TEAM_URL does not start with http:// or https://"),
        ("http://[::1", "mdt_" + "x" * 20, "MEMORYD_TEAM_URL is not a URL that parses"),
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


@pytest.mark.parametrize(
    ("url", "fault"),
    [
        ("notaurl", "does not start with http:// or https:// (7 characters)"),
        ("http:host", "does not start with http:// or https:// (9 characters)"),
        ("api.example.com", "does not start with http:// or https:// (15 characters)"),
        ("https://", "has no host"),
        ("http://h:0", "its port is not a number from 1 to 65535"),
        ("http://h:99999", "its port is not a number from 1 to 65535"),
        ("http://h:x", "its port is not a number from 1 to 65535"),
        ("http://[::1", "is not a URL that parses (11 characters; an IPv6 host's [ not closed?)"),
        ("https://team.example:8787/x", None),
        ("HTTP://[::1]:80", None),
    ],
)
def test_a_url_fault_says_what_is_wrong(url: str, fault: str | None) -> None:
    assert url_fault(url) == fault
    assert usable_http_url(url) is (fault is None)


_TOKEN = "mdt_s3cr3tT0kenValue0123456789abcdef"
_KEY = "sk-ant-api03-SECRETkeyVALUE0123456789abcdefgh"


def test_a_secret_in_a_url_variable_is_never_quoted() -> None:
    # Found by a review: `… is not an http(s) URL with a host: '<value>'` quoted the value,
    # so MEMORYD_TEAM_URL and MEMORYD_TEAM_TOKEN swapped, or a key pasted into
    # ANTHROPIC_BASE_URL, put the secret in status, `memctl status` and the editors.
    team = TeamConfig(url=_TOKEN, token="http://127.0.0.1:8787").problem
    model = ModelConfig(api_key="k" * 20, base_url=_KEY).problem
    assert team is not None
    assert model is not None
    assert team.startswith("MEMORYD_TEAM_URL does not start with http:// or https:// (36 ")
    assert model.startswith("ANTHROPIC_BASE_URL does not start with http:// or https:// (45 ")
    for secret in (_TOKEN[4:12], _KEY[13:21]):  # not even a piece of it
        assert secret not in team + model
    assert shown_url(_TOKEN) == "[redacted]"
    assert shown_url("https://ada:pw@proxy.example/v1") == "https://ada:[redacted]@proxy.example/v1"
    assert shown_url("http://127.0.0.1:8787") == "http://127.0.0.1:8787"
    assert shown_url(None) is None
    # Found by a bug hunt: a token in the query, or as the user name alone, was shown whole.
    assert shown_url("http://proxy.local:8080/v1?token=q0123456789&x") == (
        "http://proxy.local:8080/v1?token=[redacted]&x"
    )
    assert shown_url("https://sk-gateway-0123456789@proxy.local/") == (
        "https://[redacted]@proxy.local/"
    )


async def test_status_and_team_status_never_show_a_swapped_token(
    short_tmp: Path, tmp_path: Path
) -> None:
    config = daemon_config(
        short_tmp,
        team=TeamConfig(url=_TOKEN, token="http://127.0.0.1:8787"),
        model=ModelConfig(api_key="k" * 20, base_url=_KEY),
    )
    project = tmp_path / "proj"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    remote = ["git", "-C", str(project), "remote", "add", "origin", "https://github.com/o/r"]
    subprocess.run(remote, check=True)
    handle = await start_daemon(config)
    try:
        status = json.dumps(await handle.call("status"))
        team = await handle.call("team.status", cwd=str(project))
    finally:
        await stop_daemon(handle)
    assert team["suppressed"] == "bad_url"
    assert team["server"] == "[redacted]"
    assert _TOKEN not in status
    assert _KEY not in status


def test_a_long_value_of_a_number_variable_is_not_quoted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORYD_MODEL_RETRIES", _KEY)
    with pytest.raises(EnvNumberError) as raised:
        env_count("MEMORYD_MODEL_RETRIES", 4, most=100)
    assert str(raised.value) == (
        "MEMORYD_MODEL_RETRIES (a value of 45 characters, not shown) is not a whole number"
    )
    monkeypatch.setenv("MEMORYD_MODEL_TIMEOUT", " 2s ")
    with pytest.raises(EnvNumberError, match=r"^MEMORYD_MODEL_TIMEOUT='2s' is not a number"):
        env_seconds("MEMORYD_MODEL_TIMEOUT", 60.0, most=3600.0)


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


def test_many_bad_env_lines_are_one_problem_of_each_kind(tmp_path: Path) -> None:
    # One problem a line: a file of 30,000 junk lines made a 4.7 MB status, sent on every
    # editor's poll; each client printed 30,000 lines.
    env = tmp_path / "service.env"
    env.write_text(
        "x\n" * 30_000 + "A='open\n" * 3 + "".join(f"MEMORYD_X{n}=1\n" for n in range(50))
    )
    problems = env_file_problems(env, {})
    assert len(problems) == 3
    assert problems[0].startswith(
        f"{env} lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 … (30,000 in all) are not NAME=value lines"
    )
    assert problems[1].startswith(f"{env} lines 30001, 30002, 30003: each value opens a quote")
    assert "… (50 in all) in" in problems[2]
    assert sum(map(len, problems)) < 2_000


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
    assert [p.split(";")[0].split(": ")[0] for p in problems] == [
        "ANTHROPIC_BASE_URL does not start with http:// or https:// (17 characters)",
        "MEMORYD_TEAM_URL does not start with http:// or https:// (7 characters)",
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
    monkeypatch.setattr(core_methods, "FILE_CHECKS_TTL_S", 0.0)  # each status checks again
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


async def test_status_checks_the_files_once_for_many_calls_and_again_after_settings_set(
    daemon: DaemonHandle, isolated_env: IsolatedEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by a review: each status (editors poll it every few seconds) read the settings
    # and env files and statvfs'ed every loaded memory folder: 0.6 ms became 5-11 ms.
    checks: list[int] = []
    check = core_methods._file_problems

    def counted(flag_settings: Path | None, folders: tuple[Path, ...]) -> list[str]:
        checks.append(1)
        return check(flag_settings, folders)

    monkeypatch.setattr(core_methods, "_file_problems", counted)
    isolated_env.config_dir.mkdir(parents=True, exist_ok=True)
    settings = isolated_env.config_dir / "settings.json"
    settings.write_text('{"autoMemoryEnabled": "no"}')
    for _ in range(20):
        (problem,) = (await daemon.call("status"))["problems"]
    assert problem.startswith(f"user settings file {settings}: ignored: autoMemoryEnabled")
    assert len(checks) == 1
    # A settings file written through the daemon is checked again at the next status.
    await daemon.call("settings.set", key="autoMemoryEnabled", value=True)
    assert (await daemon.call("status"))["problems"] == []
    assert len(checks) == 2


async def test_a_hung_check_holds_one_thread_and_status_answers_without_it(
    daemon: DaemonHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by a review: a memory folder on a hung mount held one executor thread per status
    # call (the editors poll it), each call waiting for ever, until the default pool was full.
    release = threading.Event()
    entered: list[int] = []

    def hung(_folders: object) -> list[str]:
        entered.append(1)
        release.wait(60)
        return ["memory folder /hung cannot be written"]

    monkeypatch.setattr(core_methods, "FILE_CHECKS_WAIT_S", 0.2)
    monkeypatch.setattr(core_methods.diagnose, "unwritable_folders", hung)
    try:
        calls = [daemon.call("status") for _ in range(6)]
        replies = await asyncio.wait_for(asyncio.gather(*calls), 30)
        later = await asyncio.wait_for(daemon.call("status"), 30)
        for reply in [*replies, later]:
            (slow,) = reply["problems"]
            assert slow.startswith(
                "the check of the settings files and memory folders has not finished after "
            )
        assert len(entered) == 1
    finally:
        release.set()
    for _ in range(100):  # the check ends once released; its result is the next answer
        problems = (await daemon.call("status"))["problems"]
        if problems == ["memory folder /hung cannot be written"]:
            break
        await asyncio.sleep(0.05)
    assert problems == ["memory folder /hung cannot be written"]
    assert len(entered) == 1
