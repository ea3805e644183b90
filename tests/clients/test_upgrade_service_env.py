"""`memctl service install` for a user whose clients run with non-default roots
(CLAUDE_CONFIG_DIR, XDG_STATE_HOME, …): the service manager starts the daemon without the login
shell's environment, so the units carry those variables, and the daemon they start reads and
writes the files the hooks and memctl use (before, switching from `memctl start` to the login
service, or rebooting into it, made memories, history and include approvals seem gone).
"""

from __future__ import annotations

import os
import plistlib
import pwd
import shlex
import subprocess
from pathlib import Path

import pytest

from memoryd_client import Client
from tests.clients.test_service import (  # noqa: F401
    fake_bin,
    home,
    mac_home,
    memctl,
    runtime,
    units,
)
from tests.daemon.test_lifecycle import wait_healthy


def _passwd_home() -> str:
    return pwd.getpwuid(os.getuid()).pw_dir


def _unit_environment(service: str, runtime_dir: Path) -> dict[str, str]:
    """The environment systemd's user manager gives the service: its own few variables (no
    login shell's; HOME the password database's, as %h), then the unit's Environment= lines
    (specifiers expanded, words unquoted), then its EnvironmentFile= (a missing one skipped)."""
    env = {
        "HOME": _passwd_home(),
        "PATH": "/usr/bin:/bin",
        "XDG_RUNTIME_DIR": str(runtime_dir),
        "LANG": "C.UTF-8",
    }
    for line in service.splitlines():
        if line.startswith("Environment="):
            for word in shlex.split(line.removeprefix("Environment=").replace("%%", "%")):
                name, _, value = word.partition("=")
                env[name] = value
    named = _env_file(service)
    if named.is_file():
        for line in named.read_text().splitlines():
            name, equals, value = line.partition("=")
            if equals:  # systemd skips what is not an assignment
                env[name] = value
    return env


def _env_file(service: str) -> Path:
    """The file the unit's EnvironmentFile= names, %h as the user manager expands it."""
    line = next(x for x in service.splitlines() if x.startswith("EnvironmentFile="))
    spec = line.removeprefix("EnvironmentFile=").removeprefix("-")
    return Path(spec.replace("%h", _passwd_home()).replace("%%", "%"))


@pytest.mark.slow  # a real daemon started and stopped
def test_the_service_daemon_uses_the_clients_roots(
    home: Path,  # noqa: F811
    fake_bin: Path,  # noqa: F811
    runtime: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = tmp_path / "my claude%config"
    state = Path(os.environ["XDG_STATE_HOME"])
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    done = memctl(home, fake_bin, "service", "install", runtime=runtime)
    assert done.returncode == 0, done.stderr + done.stdout
    service = (units(home) / "memoryd.service").read_text()
    exec_start = next(x for x in service.splitlines() if x.startswith("ExecStart="))
    argv = shlex.split(exec_start.removeprefix("ExecStart=").replace("%t", str(runtime)))
    env = _unit_environment(service, runtime)
    project = tmp_path / "proj"
    project.mkdir()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        sock = Path(argv[argv.index("--socket") + 1])
        wait_healthy(sock)
        with Client(sock) as conn:
            written = conn.call(
                "memory.write",
                {
                    "cwd": str(project),
                    "type": "user",
                    "name": "Tabs",
                    "description": "t",
                    "body": "b",
                },
            )
            approvals = conn.call("includes.list", {"cwd": str(project)})
    finally:
        proc.terminate()
        proc.wait(30)
    # Where memctl and the hooks, with the user's environment, look for them.
    assert Path(written["path"]).is_relative_to(config / "projects")
    assert Path(approvals["file"]).is_relative_to(state / "memoryd")
    assert f"environment: HOME={home} CLAUDE_CONFIG_DIR={config}" in done.stdout


@pytest.mark.slow  # a real daemon started and stopped
def test_a_home_that_is_not_the_passwd_entrys_gets_its_env_file_read(
    home: Path,  # noqa: F811
    fake_bin: Path,  # noqa: F811
    runtime: Path,  # noqa: F811
) -> None:
    # `EnvironmentFile=-%h/.config/memoryd/env`: %h is the password database's home, memctl
    # made (and said to fill) the one under HOME, so a user whose HOME is another folder put
    # credentials where the service never read them, and the daemon (HOME the manager's)
    # checked and used the files under the other home too.
    assert str(home) != _passwd_home()
    done = memctl(home, fake_bin, "service", "install", runtime=runtime)
    assert done.returncode == 0, done.stderr + done.stdout
    env_file = home / ".config" / "memoryd" / "env"
    assert f"credentials go in {env_file} (VAR=value lines" in done.stdout
    service = (units(home) / "memoryd.service").read_text()
    assert _env_file(service) == env_file
    env_file.write_text("ANTHROPIC_BASE_URL=http://127.0.0.1:9\nexport oops\n")
    env_file.chmod(0o600)
    env = _unit_environment(service, runtime)
    assert env["HOME"] == str(home)
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    exec_start = next(x for x in service.splitlines() if x.startswith("ExecStart="))
    argv = shlex.split(exec_start.removeprefix("ExecStart=").replace("%t", str(runtime)))
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        sock = Path(argv[argv.index("--socket") + 1])
        wait_healthy(sock)
        with Client(sock) as conn:
            status = conn.call("status")
    finally:
        proc.terminate()
        proc.wait(30)
    # The daemon checks the file the unit read (its line that sets nothing is said).
    assert f"{env_file} line 2 is not a NAME=value line" in " ".join(status["problems"])


def test_the_launch_agent_carries_the_roots_and_a_relative_one_is_left_out(
    mac_home: Path,  # noqa: F811
    fake_bin: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = mac_home  # noqa: F811
    config = tmp_path / "cfg & <co>"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    monkeypatch.setenv("MEMORYD_AUTO_MEMORY_DIR", "relative/mem")
    done = memctl(home, fake_bin, "service", "install", "--manager", "launchd")
    assert done.returncode == 0, done.stderr + done.stdout
    assert "not carried: MEMORYD_AUTO_MEMORY_DIR (not an absolute path)" in done.stdout
    plist_path = home / "Library" / "LaunchAgents" / "com.memoryd.daemon.plist"
    with plist_path.open("rb") as handle:
        variables = plistlib.load(handle)["EnvironmentVariables"]
    assert variables == {
        "HOME": str(home),  # not the password database's here
        "CLAUDE_CONFIG_DIR": str(config),
        "MEMORYD_MANAGED_DIR": os.environ["MEMORYD_MANAGED_DIR"],
        "XDG_STATE_HOME": os.environ["XDG_STATE_HOME"],
        "XDG_DATA_HOME": os.environ["XDG_DATA_HOME"],
        "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"],
    }


def test_units_carry_nothing_when_nothing_is_set(
    home: Path,  # noqa: F811
    fake_bin: Path,  # noqa: F811
    runtime: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("MEMORYD_MANAGED_DIR", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name)
    assert memctl(home, fake_bin, "service", "install", runtime=runtime).returncode == 0
    service = (units(home) / "memoryd.service").read_text()
    # HOME only: the tests' HOME is not the password database's (`carried` without it below).
    environment = [x for x in service.splitlines() if x.startswith("Environment=")]
    assert environment == [f"Environment=HOME={home}"]
    assert "@" not in service.replace("`", "")


def test_home_is_carried_only_when_it_is_not_the_passwd_entrys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memctl.commands import service

    monkeypatch.setattr(service, "_passwd_home", lambda: os.environ["HOME"])
    assert "HOME" not in service.carried()[0]
    monkeypatch.setattr(service, "_passwd_home", lambda: "/home/elsewhere")
    assert next(iter(service.carried()[0].items())) == ("HOME", os.environ["HOME"])


def test_a_home_with_a_line_break_is_refused_as_no_env_file_can_be_named(
    tmp_path: Path,
    fake_bin: Path,  # noqa: F811
    runtime: Path,  # noqa: F811
) -> None:
    odd = tmp_path / "a\nExecStartPre=/bin/false"
    odd.mkdir(parents=True)
    done = memctl(odd, fake_bin, "service", "install", runtime=runtime)
    assert done.returncode == 2, done.stderr + done.stdout
    assert "refused: the env file path" in done.stdout
    assert not (odd / ".config" / "systemd").exists()
