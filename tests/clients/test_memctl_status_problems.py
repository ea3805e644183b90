"""`memctl status` shows what the daemon says is wrong: `model.problem` on the model line and
one `problem:` line per `status.problems` entry.

Found by a bug hunt: the daemon named a refused model key, a team URL without a token and a
user settings file of broken JSON in `status`, and `memctl status` printed `model: configured`
and `team sync: on` and nothing else.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from memctl.commands.daemon import status_lines
from memoryd.core.team_config import TeamConfig
from tests.clients.conftest import run_memctl, run_memctl_async
from tests.clients.fake_daemon import FakeDaemon
from tests.conftest import (
    IsolatedEnv,
    daemon_config,
    fake_model_config,
    start_daemon,
    stop_daemon,
)
from tests.fakes.messages_api import FakeMessagesAPI, error_reply


async def test_status_names_a_refused_key_and_each_setup_problem(
    short_tmp: Path, isolated_env: IsolatedEnv, fake_model: FakeMessagesAPI, tmp_path: Path
) -> None:
    isolated_env.config_dir.mkdir(parents=True)
    settings = isolated_env.config_dir / "settings.json"
    settings.write_text('{"autoMemoryEnabled": tru')
    fake_model.handler = lambda _request: error_reply(
        401, "authentication_error", "invalid x-api-key"
    )
    config = daemon_config(
        short_tmp,
        model=replace(fake_model_config(fake_model), max_retries=0),
        team=TeamConfig(url="http://127.0.0.1:9", token=None),
    )
    handle = await start_daemon(config)
    project = tmp_path / "proj"
    project.mkdir()
    try:
        await handle.call(
            "memory.write", cwd=str(project), type="user", name="tabs", description="t", body="t"
        )
        # A selector call that outlives recall's deadline (a loaded machine) notes nothing.
        for _ in range(5):
            await handle.call("recall", cwd=str(project), query="tabs or spaces")
            if (await handle.call("status"))["model"]["problem"]:
                break
        code, out, err = await run_memctl_async("--socket", str(handle.socket_path), "status")
        json_code, json_out, _ = await run_memctl_async(
            "--socket", str(handle.socket_path), "status", "--json"
        )
    finally:
        await stop_daemon(handle)
    # A daemon that answers is exit 0, problems or not (docs/clients.md).
    assert code == 0, err
    lines = out.splitlines()
    (model,) = [line for line in lines if line.startswith("model:")]
    assert model.startswith(
        f"model: configured — but the model key was refused: {fake_model.base_url} answered "
        "HTTP 401 authentication_error invalid x-api-key; check ANTHROPIC_API_KEY"
    )
    problems = [line for line in lines if line.startswith("problem: ")]
    assert problems[-1].startswith(f"problem: user settings file {settings}: invalid JSON")
    assert lines[-len(problems) :] == problems  # after the features, as a list to work through
    # Each said once: on the model line, the team sync line (off, with this reason), or a
    # `problem:` line; what a line above says in full is not repeated.
    assert out.count("the model key was refused") == 1
    assert out.count("MEMORYD_TEAM_URL is set but MEMORYD_TEAM_TOKEN is not") == 1
    # --json is the daemon's reply, the model's problem among `problems` as the daemon sends it.
    assert json_code == 0
    reply = json.loads(json_out)
    assert reply["model"]["problem"] in reply["problems"]
    assert len(reply["problems"]) == 3


def test_problems_are_one_line_each_and_the_models_is_said_once(
    fake_daemon: FakeDaemon,
) -> None:
    reason = "ANTHROPIC_BASE_URL is not an http(s) URL with a host: 'x'; set it"
    fake_daemon.on(
        "status",
        {
            "version": "9",
            "pid": 1,
            "socket": "/s",
            "model": {"configured": False, "reason": reason, "problem": None},
            "features": {"model": {"enabled": False, "reason": reason, "problem": None}},
            "problems": [
                reason,
                "memory folder /m\n  problem: forged\x1b[2J cannot be written",
                42,
                "",
            ],
        },
    )
    done = run_memctl("--socket", str(fake_daemon.socket_path), "status")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"model: off — {reason}" in lines
    assert [line for line in lines if "problem" in line] == [
        "problem: memory folder /m\\n  problem: forged\\x1b[2J cannot be written"
    ]


def test_a_problem_a_feature_line_says_in_full_is_not_repeated(fake_daemon: FakeDaemon) -> None:
    why = "MEMORYD_TEAM_URL is set but MEMORYD_TEAM_TOKEN is not: create one"
    fake_daemon.on(
        "status",
        {
            "version": "9",
            "pid": 1,
            "socket": "/s",
            "model": {"configured": True, "reason": None, "problem": None},
            "features": {"team_sync": {"enabled": False, "reason": why}, "odd": {"reason": ["x"]}},
            "problems": [why, "another"],
        },
    )
    done = run_memctl("--socket", str(fake_daemon.socket_path), "status")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-3:] == [
        f"team sync: off — {why}",
        "odd: off — ['x']",
        "problem: another",
    ]


def test_a_daemon_older_than_the_fields_shows_as_before(fake_daemon: FakeDaemon) -> None:
    # No `problems`, no `model.problem`: the lines of an older daemon's status are unchanged.
    status = {
        "version": "0.0.9",
        "pid": 1,
        "socket": "/s",
        "model": {"configured": True, "reason": None},
        "features": {"model": {"enabled": True, "reason": None}, "team_sync": {"enabled": True}},
    }
    fake_daemon.on("status", status)
    done = run_memctl("--socket", str(fake_daemon.socket_path), "status")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[2:] == ["model: configured", "team sync: on"]
    assert status_lines({**status, "problems": None})[2:] == done.stdout.splitlines()[2:]


def test_thousands_of_problems_do_not_flood_the_terminal(fake_daemon: FakeDaemon) -> None:
    # An env file of 30,000 pasted shell lines is 30,000 problems (one a line): each printed,
    # they buried the report. The first 20 are shown, then how many more; --json has them all.
    many = [f"~/.config/memoryd/env line {n} is not a NAME=value line" for n in range(30_000)]
    fake_daemon.on(
        "status",
        {
            "version": "9",
            "pid": 1,
            "socket": "/s",
            "model": {"configured": True, "reason": None, "problem": None},
            "features": {},
            "problems": many,
        },
    )
    done = run_memctl("--socket", str(fake_daemon.socket_path), "status")
    assert done.returncode == 0, done.stderr
    shown = [line for line in done.stdout.splitlines() if line.startswith("problem: ")]
    assert shown == [
        *(f"problem: {p}" for p in many[:20]),
        "problem: … and 29,980 more (`memctl status --json` lists them all)",
    ]
    as_json = run_memctl("--socket", str(fake_daemon.socket_path), "status", "--json")
    assert json.loads(as_json.stdout)["problems"] == many
