"""memctl against a program that answers but is not memoryd (session 21): a result that is no
JSON object was a traceback in every command (`.get` on a string), under `--json` too; `status`
said "not running" and `start` spawned a daemon that exited "already serving"; a `features`
that is no object broke `status`. Now one line, exit 3, and `--json` is JSON a strict parser
reads."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from tests.clients.conftest import run_memctl
from tests.clients.fake_daemon import FakeDaemon


def _strict(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise ValueError(constant)

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    ("args", "method"),
    [
        (["status"], "status"),
        (["start"], "status"),
        (["recall", "tabs"], "recall"),
        (["includes", "list"], "includes.list"),
        (["remember", "use tabs"], "memory.remember"),
        (["dream", "--no-wait"], "memory.dream"),
    ],
)
def test_a_result_that_is_no_object_is_said_not_memoryd(
    fake_daemon: FakeDaemon, args: list[str], method: str
) -> None:
    fake_daemon.on(method, "hello")
    done = run_memctl("--json", "--socket", str(fake_daemon.socket_path), *args)
    assert done.returncode == 3, (done.stdout, done.stderr)
    error = _strict(done.stdout)["error"]
    assert error.startswith(f"what answers on {fake_daemon.socket_path} is not memoryd")
    assert f"its reply to {method} is not a JSON object" in error
    assert not fake_daemon.socket_path.with_name("memoryd.log").exists()  # nothing spawned


def test_nan_in_a_reply_never_reaches_json_output(fake_daemon: FakeDaemon) -> None:
    fake_daemon.on("status", {"pid": math.nan, "uptime_s": math.inf})  # json.dumps writes NaN
    done = run_memctl("--json", "--socket", str(fake_daemon.socket_path), "status")
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert "its reply is not JSON" in _strict(done.stdout)["error"]


def test_a_status_whose_features_are_no_object_still_prints(fake_daemon: FakeDaemon) -> None:
    fake_daemon.on("status", {"pid": 7, "version": "x", "features": [1], "problems": "no"})
    done = run_memctl("--socket", str(fake_daemon.socket_path), "status")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("memoryd x (pid 7)")
    assert "model: off" in done.stdout
