"""`memctl service install` for a user whose clients run with non-default roots
(CLAUDE_CONFIG_DIR, XDG_STATE_HOME, …): the service manager starts the daemon without the login
shell's environment, so the units carry those variables, and the daemon they start reads and
writes the files the hooks and memctl use (before, switching from `memctl start` to the login
service, or rebooting into it, made memories, history and include approvals seem gone).
"""

from __future__ import annotations

import os
import plistlib
import shlex
import subprocess
from pathlib import Path

import pytest

from memoryd_client import Client
from tests.clients.test_service import fake_bin, home, memctl, runtime, units  # noqa: F401
from tests.daemon.test_lifecycle import wait_healthy


def _unit_environment(service: str, home_dir: Path, runtime_dir: Path) -> dict[str, str]:
    """The environment systemd's user manager gives the service: its own few variables (no
    login shell's), then the unit's Environment= lines (specifiers expanded, words unquoted)."""
    env = {
        "HOME": str(home_dir),
        "PATH": "/usr/bin:/bin",
        "XDG_RUNTIME_DIR": str(runtime_dir),
        "LANG": "C.UTF-8",
    }
    for line in service.splitlines():
        if line.startswith("Environment="):
            for word in shlex.split(line.removeprefix("Environment=").replace("%%", "%")):
                name, _, value = word.partition("=")
                env[name] = value
    return env


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
    env = _unit_environment(service, home, runtime)
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
    assert f"environment: CLAUDE_CONFIG_DIR={config}" in done.stdout


def test_the_launch_agent_carries_the_roots_and_a_relative_one_is_left_out(
    home: Path,  # noqa: F811
    fake_bin: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
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
    assert "Environment=" not in service.replace("EnvironmentFile=", "")
    assert "@" not in service.replace("`", "")
