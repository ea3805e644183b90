"""memctl as a user runs it: a subprocess against a real background daemon."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


def memctl(sock: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memctl", "--socket", str(sock), *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=60,
        env=dict(os.environ),
    )


@pytest.fixture
def sock(short_tmp: Path) -> Iterator[Path]:
    path = short_tmp / "d" / "memoryd.sock"
    yield path
    memctl(path, "stop")


def test_status_when_down_is_one_clear_line_and_exit_3(sock: Path) -> None:
    result = memctl(sock, "status")
    assert result.returncode == 3
    assert result.stderr.strip().count("\n") == 0
    assert "not running" in result.stderr
    as_json = memctl(sock, "--json", "status")
    assert as_json.returncode == 3
    assert json.loads(as_json.stdout)["exit_code"] == 3


def test_start_status_call_stop(sock: Path) -> None:
    started = memctl(sock, "--json", "start")
    assert started.returncode == 0, started.stderr
    first = json.loads(started.stdout)
    assert first["started"] is True
    again = json.loads(memctl(sock, "--json", "start").stdout)
    assert again["started"] is False
    assert again["pid"] == first["pid"]

    status = memctl(sock, "status")
    assert status.returncode == 0
    assert f"pid {first['pid']}" in status.stdout
    assert "model: off" in status.stdout

    called = memctl(sock, "call", "settings.set", '{"key": "autoDreamEnabled", "value": true}')
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["value"] is True

    assert memctl(sock, "call", "settings.get", "[1]").returncode == 2
    assert memctl(sock, "call", "settings.get", "{oops").returncode == 2
    rpc_error = memctl(sock, "call", "no.such.method")
    assert rpc_error.returncode == 1
    assert "-32601" in rpc_error.stderr

    stopped = memctl(sock, "stop")
    assert stopped.returncode == 0
    assert memctl(sock, "status").returncode == 3
    assert not sock.exists()


def test_start_replaces_a_stale_daemon(sock: Path) -> None:
    import socket as socketlib

    sock.parent.mkdir(parents=True, mode=0o700)
    stale = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
    stale.bind(str(sock))
    stale.close()
    sock.with_name(sock.name + ".status.json").write_text(json.dumps({"pid": 999_999_999}))
    result = memctl(sock, "--json", "start")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["started"] is True
    assert memctl(sock, "status").returncode == 0


def test_start_says_in_one_line_why_the_daemon_could_not_start(short_tmp: Path) -> None:
    (short_tmp / "afile").write_text("")
    under_a_file = memctl(short_tmp / "afile" / "memoryd.sock", "start")
    assert under_a_file.returncode != 0
    assert "cannot start memoryd at" in under_a_file.stderr
    assert "Traceback" not in under_a_file.stderr
    too_long = memctl(short_tmp / ("x" * 120) / "memoryd.sock", "start")
    assert too_long.returncode != 0
    # The daemon's own reason, read from its log, not only "see the log".
    assert "set --socket or MEMORYD_SOCKET" in too_long.stderr


def test_every_command_is_found_by_the_module_table() -> None:
    import argparse

    from memctl.__main__ import _command_names, build_parser, module_for

    every = build_parser()
    sub_action = next(a for a in every._actions if isinstance(a, argparse._SubParsersAction))
    for command in sub_action.choices:
        module = module_for(["--socket", "/x", "--json", command])
        assert module is not None, command
        alone = build_parser(module)
        only = next(a for a in alone._actions if isinstance(a, argparse._SubParsersAction))
        assert command in only.choices, (command, module)
    assert module_for(["--help"]) is None
    assert module_for(["no-such-command"]) is None
    assert set(_command_names()) >= {"call", "daemon"}


def test_stop_never_signals_the_pid_of_a_stale_status_file(short_tmp: Path) -> None:
    from memctl import lifecycle

    # The daemon died without cleaning up; its pid now belongs to an unrelated process.
    sock = short_tmp / "memoryd.sock"
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lifecycle.status_file(sock).write_text(json.dumps({"pid": bystander.pid}))
        result = lifecycle.stop(sock, wait_s=0.2)
        assert result == {"stopped": False, "pid": None}
        assert bystander.poll() is None  # still running: not sent SIGTERM
    finally:
        bystander.kill()
        bystander.wait()


def _feature_lines(text: str) -> list[str]:
    # Everything after the two header lines: one "name: state" line per feature.
    return [line.split(":", 1)[0] for line in text.splitlines()[2:]]


def test_status_prints_each_feature_once_in_one_order(sock: Path, tmp_path: Path) -> None:
    assert memctl(sock, "start").returncode == 0
    fresh = memctl(sock, "status")
    assert fresh.returncode == 0, fresh.stderr
    project = tmp_path / "proj"
    project.mkdir()
    loaded = memctl(sock, "call", "get_context", json.dumps({"cwd": str(project)}))
    assert loaded.returncode == 0, loaded.stderr
    after = memctl(sock, "status")
    assert "1 project(s)" in after.stdout

    names = _feature_lines(fresh.stdout)
    assert names == _feature_lines(after.stdout)
    assert len(names) == len(set(names))
    assert names == [
        "model",
        "auto memory",
        "instruction files",
        "extraction",
        "session memory",
        "magic docs",
        "auto dream",
        "team sync",
    ]
    # The long "no model" reason is said once, on the model line.
    assert fresh.stdout.count("ANTHROPIC_API_KEY") == 1
    assert "extraction: off (needs a model)" in fresh.stdout
    assert "team sync: off — team sync is not configured" in fresh.stdout
    assert "instruction files: on" in fresh.stdout


def test_status_lines_order_is_the_same_for_any_reply_order() -> None:
    from memctl.commands.daemon import status_lines

    features = {
        "team_sync": {"enabled": True, "reason": None},
        "auto_dream": {"available": True, "reason": None},
        "zeta_new": {"enabled": False, "reason": "not yet"},
        "auto_memory": {"enabled": True},
        "model": {"enabled": True, "reason": None},
    }
    status = {"version": "1", "model": {"configured": True}, "features": features}
    shuffled = {**status, "features": dict(reversed(list(features.items())))}
    assert status_lines(status) == status_lines(shuffled)
    assert status_lines(status)[2:] == [
        "model: configured",
        "auto memory: on",
        "auto dream: available",
        "team sync: on",
        "zeta new: off — not yet",
    ]
    features["auto_memory"]["ranker"] = "lexical: embeddings extra not installed"
    assert "auto memory: on; recall lexical: embeddings extra not installed" in status_lines(status)


def test_remember_without_a_model_guesses_type_and_title(sock: Path, tmp_path: Path) -> None:
    assert memctl(sock, "start").returncode == 0
    project = tmp_path / "proj"
    project.mkdir()
    saved = memctl(sock, "remember", "I prefer small, focused commits", "--cwd", str(project))
    assert saved.returncode == 0, saved.stderr
    assert saved.stdout.startswith("saved [feedback] Prefer small focused commits: ")
    assert saved.stdout.rstrip().endswith("feedback_prefer_small_focused_commits.md")
    named = memctl(
        sock,
        "--json",
        "remember",
        "Grafana lives at https://grafana.example.com/d/ingest",
        "--name",
        "Ingest dashboards",
        "--type",
        "reference",
        "--cwd",
        str(project),
    )
    assert named.returncode == 0, named.stderr
    result = json.loads(named.stdout)
    assert (result["type"], result["name"]) == ("reference", "Ingest dashboards")
    assert "https://grafana.example.com/d/ingest" in Path(result["path"]).read_text()


def test_remember_shows_the_secret_warning(sock: Path, tmp_path: Path) -> None:
    assert memctl(sock, "start").returncode == 0
    project = tmp_path / "proj"
    project.mkdir()
    key = "AK" + "IA" + "QYLPMN5HHHFPZAM2"
    saved = memctl(sock, "remember", f"CI uses key {key}", "--cwd", str(project))
    assert saved.returncode == 0, saved.stderr
    assert saved.stdout.startswith("saved [")
    assert "memctl: warning: saved, but it looks like it holds a secret" in saved.stderr
    assert "aws-access-token" in saved.stderr
    assert key not in saved.stderr
