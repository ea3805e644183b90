"""A daemon at its connection cap answers -32004 with why (docs/protocol.md). `memctl status`
said "not running" and `memctl start` started a second daemon (which exited: "already
serving"); `memctl stop` waited 30 s for a shutdown it could not have asked for."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memctl import lifecycle
from memctl.__main__ import main
from tests.clients.conftest import memctl_env, run_memctl
from tests.clients.fake_daemon import FakeDaemon, FakeError
from tests.clients.held_daemon import held_daemon
from tests.clients.test_service import calls, fake_bin  # noqa: F401 (a fixture)

WHY = "memoryd is serving 32 clients, all its open-files limit leaves room for; try again"


def _busy(_params: dict[str, Any]) -> Any:
    raise FakeError(-32004, WHY)


@pytest.fixture
def busy_daemon(fake_daemon: FakeDaemon) -> FakeDaemon:
    """The fake daemon, at its connection cap: it answers `status` and `shutdown` -32004."""
    fake_daemon.on("status", _busy)
    fake_daemon.on("shutdown", _busy)
    return fake_daemon


def test_status_and_start_say_the_daemons_reason(fake_daemon: FakeDaemon) -> None:
    fake_daemon.on("status", _busy)
    env = memctl_env()
    for command in ("status", "start"):
        done = run_memctl("--socket", str(fake_daemon.socket_path), command, env=env)
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        assert WHY in done.stderr
        assert "not running" not in done.stdout + done.stderr


def _install(
    fake_daemon: FakeDaemon,
    fake_bin: Path,  # noqa: F811 (the fixture's folder)
    tmp_path: Path,
    *flags: str,
) -> subprocess.CompletedProcess[str]:
    """`memctl service install --manager systemd`, its systemctl the fake one."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = memctl_env(HOME=str(home), PATH=f"{fake_bin}:{os.environ.get('PATH', '/usr/bin')}")
    env.pop("XDG_CONFIG_HOME", None)
    args = ("--socket", str(fake_daemon.socket_path), "service", "install", "--manager", "systemd")
    return run_memctl(*args, *flags, env=env)


def test_service_status_reports_the_units_and_a_busy_daemon(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    # It printed only the -32004 error, the units' report lost (before a10867a: "not running").
    fake_daemon.on("status", _busy)
    no_tools = tmp_path / "bin"  # no systemctl to ask: the test never talks to a user manager
    no_tools.mkdir()
    env = memctl_env(PATH=str(no_tools), HOME=str(tmp_path))
    done = run_memctl(
        "--socket",
        str(fake_daemon.socket_path),
        "service",
        "--manager",
        "systemd",
        "status",
        env=env,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "/memoryd.socket: missing" in done.stdout
    assert f"daemon: running on {fake_daemon.socket_path}, but it refused memctl: " in done.stdout
    assert WHY in done.stdout


def test_stop_with_no_status_file_says_the_daemon_runs_but_refused(
    busy_daemon: FakeDaemon,
) -> None:
    # It said "memoryd is not running" (exit 3) of a daemon that had just answered why it refused.
    env = memctl_env()
    for command in ("stop", "restart"):
        done = run_memctl("--socket", str(busy_daemon.socket_path), command, env=env)
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        assert (
            f"memoryd is running on {busy_daemon.socket_path} but refused memctl: {WHY}; "
            "no pid known to stop it"
        ) in done.stderr
        assert "not running" not in done.stdout + done.stderr
    assert not busy_daemon.calls("rpc.methods")  # restart started nothing next to it


def test_service_install_stops_a_busy_daemon_by_its_status_files_pid(
    busy_daemon: FakeDaemon,
    fake_bin: Path,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    # It wrote the units, then stopped with the -32004 error, the daemon left on the socket the
    # socket unit must take. The status file's pid gets SIGTERM, as `memctl stop` sends it.
    with held_daemon(busy_daemon) as held:
        dry = _install(busy_daemon, fake_bin, tmp_path, "--dry-run")
        assert f"would stop the background daemon (pid {held.pid})" in dry.stdout, dry.stderr
        assert held.poll() is None
        done = _install(busy_daemon, fake_bin, tmp_path)
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert f"stopped the background daemon (pid {held.pid})" in done.stdout
        assert held.wait(10) == -signal.SIGTERM
        assert "--user enable --now memoryd.socket" in calls(tmp_path)


def _install_in_process(
    monkeypatch: pytest.MonkeyPatch,
    fake_bin: Path,  # noqa: F811 (the fixture's folder)
    tmp_path: Path,
) -> None:
    """`main(["service", "install", …])` in this process: stop's waits (30 s, then 5 s after
    its SIGTERM) made short, HOME under tmp_path, the fake systemctl first on PATH."""
    monkeypatch.setattr(
        lifecycle, "stop", functools.partial(lifecycle.stop, wait_s=0.3, term_wait_s=0.3)
    )
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", f"{fake_bin}:{os.environ.get('PATH', '/usr/bin')}")
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)


def _service_in_process(
    daemon: FakeDaemon, command: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    """`memctl service COMMAND --manager systemd` on `daemon`'s socket, run by `main` in this
    process (after `_install_in_process`): its exit code and what it printed."""
    args = ["--socket", str(daemon.socket_path), "service", command, "--manager", "systemd"]
    code = main(args)
    return code, capsys.readouterr().out


def test_service_install_starts_nothing_beside_a_busy_daemon_still_running_after_sigterm(
    busy_daemon: FakeDaemon,
    fake_bin: Path,  # noqa: F811 (the fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # SIGTERM at once and 5 s: a daemon still draining its requests (or hung) was said to be
    # "stopped", and the socket unit was enabled beside it, its socket still held. In this
    # process, so that stop's waits (30 s, then 5 s after its SIGTERM) can be made short.
    _install_in_process(monkeypatch, fake_bin, tmp_path)
    with held_daemon(busy_daemon, on_term="ignore") as held:
        code, out = _service_in_process(busy_daemon, "install", capsys)
        assert code != 0
        assert f"the background daemon (pid {held.pid}) is still running" in out
        assert "stopped the background daemon" not in out
        assert "enable --now memoryd.socket" not in calls(tmp_path)


@pytest.mark.parametrize("on_term", ["exit", "ignore"])
def test_service_install_stops_a_daemon_that_does_not_answer_status_in_time(
    fake_daemon: FakeDaemon,
    fake_bin: Path,  # noqa: F811 (the fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    on_term: str,
) -> None:
    # A daemon that did not answer `status` within 2 s (slow under load, hung) was taken for
    # none: nothing was stopped and the socket unit was enabled beside it, its socket still
    # held. Its status file's pid serves the socket: it is stopped as any other. Here it never
    # answers, and the waits are made short.
    fake_daemon.on("shutdown", _busy)
    _install_in_process(monkeypatch, fake_bin, tmp_path)
    with (
        _no_status_in_time(fake_daemon, monkeypatch),
        held_daemon(fake_daemon, on_term=on_term) as held,
    ):
        code, out = _service_in_process(fake_daemon, "install", capsys)
        if on_term == "exit":
            assert code == 0, out
            assert f"stopped the background daemon (pid {held.pid})" in out
            assert held.wait(10) == -signal.SIGTERM
            assert "--user enable --now memoryd.socket" in calls(tmp_path)
        else:
            assert code != 0, out
            assert f"the background daemon (pid {held.pid}) is still running" in out
            assert "enable --now memoryd.socket" not in calls(tmp_path)


def test_service_status_names_a_daemon_that_does_not_answer_status_in_time(
    fake_daemon: FakeDaemon,
    fake_bin: Path,  # noqa: F811 (the fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Found by a review: a daemon holding the socket that did not answer in time was reported
    # "daemon: not running", as install's hand-over once took it for none.
    _install_in_process(monkeypatch, fake_bin, tmp_path)
    with (
        _no_status_in_time(fake_daemon, monkeypatch),
        held_daemon(fake_daemon, on_term="exit") as held,
    ):
        _, out = _service_in_process(fake_daemon, "status", capsys)
        assert f"daemon: pid {held.pid} holds {fake_daemon.socket_path} but did not" in out
        assert "daemon: not running" not in out


@contextlib.contextmanager
def _no_status_in_time(fake_daemon: FakeDaemon, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`fake_daemon` answers `status` only as the block ends, and memctl's service commands
    wait 0.2 s for it (not their 2 s)."""
    answer = threading.Event()
    fake_daemon.on("status", lambda _p: answer.wait(30) and {})
    monkeypatch.setattr(
        lifecycle, "status_or_file", functools.partial(lifecycle.status_or_file, timeout=0.2)
    )
    try:
        yield
    finally:
        answer.set()


def test_service_install_signals_no_stale_status_files_pid(
    busy_daemon: FakeDaemon,
    fake_bin: Path,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    # The status file names a process that does not serve the socket: it was sent SIGTERM.
    bystander = subprocess.Popen(["sleep", "120"])
    try:
        status_file = busy_daemon.socket_path.with_name("fake.sock.status.json")
        status_file.write_text(json.dumps({"pid": bystander.pid}))
        done = _install(busy_daemon, fake_bin, tmp_path)
        assert (
            f"the daemon on {busy_daemon.socket_path} refused memctl ({WHY}) and its status "
            f"file's pid {bystander.pid} is not the daemon's: stop it yourself"
        ) in done.stdout, (done.stdout, done.stderr)
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_service_install_says_a_busy_daemon_with_no_status_file_is_left_running(
    fake_daemon: FakeDaemon,
    fake_bin: Path,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    fake_daemon.on("status", _busy)
    done = _install(fake_daemon, fake_bin, tmp_path)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert (
        f"the daemon on {fake_daemon.socket_path} refused memctl ({WHY}) and no status file "
        "names its pid: stop it yourself so the socket unit can take over its socket"
    ) in done.stdout
    assert not fake_daemon.calls("shutdown")


def test_restart_of_a_busy_launch_agent_daemon_stops_it_and_has_launchd_start_it(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    # Where launchctl is (macOS; a fake one here), restart asked `status` to learn whether the
    # daemon is the LaunchAgent's, and ended in the -32004 before stopping anything.
    with held_daemon(fake_daemon) as held:  # stands for the agent's daemon

        def status(_params: dict[str, Any]) -> Any:
            if held.poll() is None:
                raise FakeError(-32004, WHY)
            return {"pid": held.pid + 1, "version": "fake"}  # the one launchd started again

        fake_daemon.on("status", status)
        fake_daemon.on("shutdown", _busy)
        log = tmp_path / "launchctl.log"
        tools = tmp_path / "tools"
        tools.mkdir()
        launchctl = tools / "launchctl"
        launchctl.write_text(
            f'#!/bin/sh\necho "$*" >> "{log}"\n'
            f'case "$1" in print) printf "\\tpid = {held.pid}\\n";; esac\nexit 0\n'
        )
        launchctl.chmod(0o755)
        env = memctl_env(HOME=str(tmp_path), PATH=f"{tools}:{os.environ.get('PATH', '/usr/bin')}")
        done = run_memctl("--socket", str(fake_daemon.socket_path), "restart", env=env)
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert f"memoryd restarted by launchd (pid {held.pid + 1})" in done.stdout
        assert held.wait(10) == -signal.SIGTERM
        assert [line.split()[0] for line in log.read_text().splitlines()] == ["print", "kickstart"]
