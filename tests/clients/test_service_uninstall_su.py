"""`memctl service uninstall` from a shell with no login session of the user (su, sudo -u: no
XDG_RUNTIME_DIR of theirs). `systemctl --user` reached no user manager there: on a booted
machine `disable --now` failed whole, the unit files were removed all the same, their
enablement links left dangling, a manager running elsewhere (a login, lingering) kept the
socket unit listening, and uninstall exited 0.

Run in this process (`main`), so that the user's runtime folder (`/run/user/UID`, which no
test may make) is a folder of the test's; the units are installed as `test_service` does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from memctl.__main__ import main
from memctl.commands import service
from tests.clients.test_service import fake_bin, home, memctl, runtime, units  # noqa: F401

# systemctl as on a booted machine: no user bus without XDG_RUNTIME_DIR; each call logged
# with the two variables that decide where it goes.
BOOTED = """#!/bin/sh
printf '%s|%s|%s\\n' "$XDG_RUNTIME_DIR" "$SYSTEMD_OFFLINE" "$*" >> "{log}"
if [ -z "$XDG_RUNTIME_DIR" ] || [ -e "{log}.down" ]; then
  echo 'Failed to connect to bus: $DBUS_SESSION_BUS_ADDRESS and $XDG_RUNTIME_DIR not defined' >&2
  exit 1
fi
exit 0
"""


def enable_offline(user_home: Path) -> None:
    """The real systemctl, offline (no user manager), enables memoryd.socket of `user_home`."""
    env = {**os.environ, "HOME": str(user_home), "SYSTEMD_OFFLINE": "1"}
    env.pop("XDG_CONFIG_HOME", None)
    subprocess.run(
        ["systemctl", "--user", "enable", "memoryd.socket"],
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )


@dataclass
class Su:
    """memoryd's units installed (fake systemctl, a login session's runtime folder), then
    uninstall run as from su: no XDG_RUNTIME_DIR, the user's runtime folder `user_run`."""

    home: Path
    fake_bin: Path
    tmp_path: Path
    monkeypatch: pytest.MonkeyPatch
    capsys: pytest.CaptureFixture[str]

    @property
    def tool(self) -> Path:
        return self.fake_bin / "systemctl"

    def booted(self) -> Path:
        """The fake systemctl as on a booted machine; the file it logs its calls to."""
        log = self.tmp_path / "booted.log"
        self.tool.write_text(BOOTED.format(log=log))
        return log

    def uninstall(self, *args: str, user_run: Path, faked: bool = True) -> tuple[int, str]:
        path = os.environ["PATH"]
        self.monkeypatch.setenv("HOME", str(self.home))
        self.monkeypatch.setenv("PATH", f"{self.fake_bin}:{path}" if faked else path)
        self.monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
        self.monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
        self.monkeypatch.setattr(service, "user_runtime_dir", lambda: user_run)
        code = main(["service", "uninstall", *args, "--manager", "systemd"])
        return code, self.capsys.readouterr().out


@pytest.fixture
def su(
    home: Path,  # noqa: F811 (the fixture)
    fake_bin: Path,  # noqa: F811
    runtime: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Su:
    done = memctl(home, fake_bin, "service", "install", runtime=runtime)
    assert done.returncode == 0, done.stdout + done.stderr
    return Su(home, fake_bin, tmp_path, monkeypatch, capsys)


def _user_run(su: Su) -> Path:
    folder = su.tmp_path / "user-run"
    folder.mkdir(mode=0o700)
    return folder


def test_a_user_manager_running_elsewhere_is_reached_in_the_users_runtime_folder(su: Su) -> None:
    log, user_run = su.booted(), _user_run(su)
    code, out = su.uninstall(user_run=user_run)
    assert code == 0, out
    assert log.read_text().splitlines() == [
        f"{user_run}||--user disable --now memoryd.socket memoryd.service",
        f"{user_run}||--user daemon-reload",
    ]
    assert f"its user manager runs: {user_run}" in out
    assert f"ran: XDG_RUNTIME_DIR={user_run} {su.tool} --user disable --now memoryd.socket" in out
    assert not (units(su.home) / "memoryd.socket").exists()


def test_a_user_manager_that_cannot_be_reached_there_leaves_everything_and_says_what_to_run(
    su: Su,
) -> None:
    log = su.booted()
    Path(f"{log}.down").touch()
    code, out = su.uninstall(user_run=_user_run(su))
    assert code != 0
    # Without its files no later `disable` could take out units still running there.
    assert (units(su.home) / "memoryd.socket").exists()
    assert (units(su.home) / "memoryd.service").exists()
    assert "nothing was removed: run `memctl service uninstall` in a login session of " in out
    assert "daemon-reload" not in log.read_text()


@pytest.mark.skipif(shutil.which("systemctl") is None, reason="systemctl is not installed")
def test_with_no_user_manager_the_real_systemctl_disables_the_units_on_their_files(
    su: Su,
) -> None:
    # No /run/user/UID: no user manager of this user runs anywhere, so nothing runs to stop;
    # the real systemctl, offline, takes out the link `enable` made.
    enable_offline(su.home)
    link = units(su.home) / "sockets.target.wants" / "memoryd.socket"
    assert link.is_symlink()
    code, out = su.uninstall(user_run=su.tmp_path / "no-user-run", faked=False)
    assert code == 0, out
    assert not link.is_symlink()
    assert not (units(su.home) / "memoryd.socket").exists()
    assert "no user manager of theirs runs" in out
    assert "SYSTEMD_OFFLINE=1 " in out
    assert "exit 1" not in out
    assert "daemon-reload" not in out


def test_the_dry_run_from_su_shows_where_the_commands_go(su: Su) -> None:
    log = su.booted()
    code, out = su.uninstall("--dry-run", user_run=su.tmp_path / "no-user-run")
    assert code == 0, out
    assert f"would run: SYSTEMD_OFFLINE=1 {su.tool} --user disable memoryd.socket" in out
    assert not log.exists()
    assert (units(su.home) / "memoryd.socket").exists()
