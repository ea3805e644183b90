"""`memctl service status` from a shell with no login session of the user (su, sudo -u: no
XDG_RUNTIME_DIR of theirs). It compared the installed units with units for a socket in /tmp
("installed, differs from what install would write now"), asked `systemctl --user` of no
manager ("is-active: Failed to connect to bus") and looked for the daemon on that /tmp socket
("not running" of a service that was running). Now it asks the user's manager in their runtime
folder (`/run/user/UID`), as uninstall does, or says that none runs.

Run in this process (`main`), so that the user's runtime folder (which no test may make) is a
folder of the test's; the units are installed as `test_service` does.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
from pathlib import Path
from typing import Any

import pytest

from memctl.__main__ import main
from memctl.commands import service
from tests.clients.test_service import fake_bin, home, memctl, runtime, units  # noqa: F401
from tests.clients.test_service_uninstall_su import BOOTED, enable_offline


@pytest.fixture
def installed(
    home: Path,  # noqa: F811 (the fixture)
    fake_bin: Path,  # noqa: F811
    runtime: Path,  # noqa: F811
) -> Path:
    done = memctl(home, fake_bin, "service", "install", runtime=runtime)
    assert done.returncode == 0, done.stdout + done.stderr
    return home


def status_from_su(
    user_home: Path,
    path: str,
    user_run: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[int, dict[str, Any]]:
    monkeypatch.setenv("HOME", str(user_home))
    monkeypatch.setenv("PATH", path)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("MEMORYD_SOCKET", raising=False)
    monkeypatch.setattr(service, "user_runtime_dir", lambda: user_run)
    code = main(["--json", "service", "status", "--manager", "systemd"])
    return code, json.loads(capsys.readouterr().out)


def sudo_u_by_bob(alice: Path, bob: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as `sudo -u alice` run by bob: the password file gives this user the home
    `alice`, and the caller sudo names (SUDO_UID, SUDO_USER) the home `bob`."""
    caller_uid = os.getuid() + 4242
    real = pwd.getpwuid

    def getpwuid(uid: int) -> pwd.struct_passwd:
        entry = list(real(os.getuid()))
        entry[5] = str({os.getuid(): alice, caller_uid: bob}[uid])  # pw_dir
        return pwd.struct_passwd(entry)

    monkeypatch.setattr(pwd, "getpwuid", getpwuid)
    monkeypatch.setenv("SUDO_UID", str(caller_uid))
    monkeypatch.setenv("SUDO_USER", "bob")


def test_status_asks_the_user_manager_in_the_users_runtime_folder(
    installed: Path,
    fake_bin: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    log = tmp_path / "booted.log"
    (fake_bin / "systemctl").write_text(BOOTED.format(log=log))
    user_run = tmp_path / "user-run"
    user_run.mkdir(mode=0o700)
    path = f"{fake_bin}:{os.environ['PATH']}"
    code, reply = status_from_su(installed, path, user_run, monkeypatch, capsys)
    assert code == 0, reply
    assert [f["state"] for f in reply["files"]] == ["installed, up to date"] * 2
    asked = log.read_text().splitlines()
    assert asked == [
        f"{user_run}||--user {verb} {name}"
        for name in ("memoryd.socket", "memoryd.service")
        for verb in ("is-enabled", "is-active")
    ]
    lines = reply["lines"]
    assert (
        f"no login session of this user here (XDG_RUNTIME_DIR is not set); its user manager runs: {user_run}"
        in lines
    )
    assert not any("Failed to connect" in line for line in lines)
    assert f"daemon: not running on {user_run / 'memoryd' / 'memoryd.sock'}" in lines


@pytest.mark.skipif(shutil.which("systemctl") is None, reason="systemctl is not installed")
def test_with_no_user_manager_status_reads_enablement_from_the_files_and_nothing_is_active(
    installed: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    enable_offline(installed)
    assert (units(installed) / "sockets.target.wants" / "memoryd.socket").is_symlink()
    user_run = tmp_path / "no-user-run"
    code, reply = status_from_su(installed, os.environ["PATH"], user_run, monkeypatch, capsys)
    assert code == 0, reply
    assert [f["state"] for f in reply["files"]] == ["installed, up to date"] * 2
    lines = reply["lines"]
    assert "memoryd.socket is-enabled: enabled" in lines
    assert "memoryd.service is-enabled: disabled" in lines
    assert "memoryd.socket is-active: inactive (no user manager of this user runs)" in lines
    assert any(f"no user manager of theirs runs (no {user_run})" in line for line in lines)
    assert not any("bus" in line or "chroot" in line for line in lines)
    assert f"daemon: not running on {user_run / 'memoryd' / 'memoryd.sock'}" in lines


def test_status_from_su_looks_on_memoryd_socket(
    home: Path,  # noqa: F811
    fake_bin: Path,  # noqa: F811
    runtime: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Found in session 24: from su, status put the runtime folder's socket in MEMORYD_SOCKET's
    # place (the layout written out a second time, beside the socket rule): the units installed
    # for MEMORYD_SOCKET "differed", and the daemon was looked for where it is not.
    sock = tmp_path / "elsewhere" / "m.sock"
    monkeypatch.setenv("MEMORYD_SOCKET", str(sock))
    done = memctl(home, fake_bin, "service", "install", runtime=runtime)
    assert done.returncode == 0, done.stdout + done.stderr
    (fake_bin / "systemctl").write_text(BOOTED.format(log=tmp_path / "booted.log"))
    user_run = tmp_path / "user-run"
    user_run.mkdir(mode=0o700)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{fake_bin}:{os.environ['PATH']}")
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setattr(service, "user_runtime_dir", lambda: user_run)
    code = main(["--json", "service", "status", "--manager", "systemd"])
    reply = json.loads(capsys.readouterr().out)
    assert code == 0, reply
    assert [f["state"] for f in reply["files"]] == ["installed, up to date"] * 2
    assert f"daemon: not running on {sock}" in reply["lines"]


def test_sudo_u_with_the_callers_home_reads_the_users_own_units(
    installed: Path,
    fake_bin: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Found in session 24: `sudo -u alice memctl service status` run by bob keeps bob's HOME
    # (and with -E his XDG_CONFIG_HOME, CLAUDE_CONFIG_DIR): it reported bob's units as alice's,
    # and install would have written alice's units, carrying bob's folders, into bob's home.
    bob = installed  # the caller, whose units are installed
    alice = tmp_path / "alice"
    alice.mkdir()
    sudo_u_by_bob(alice, bob, monkeypatch)
    monkeypatch.setenv("HOME", str(bob))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(bob / ".config"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(bob / ".claude"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # not in bob's home: kept
    monkeypatch.setenv("PATH", f"{fake_bin}:{os.environ['PATH']}")
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("MEMORYD_SOCKET", raising=False)
    monkeypatch.setattr(service, "user_runtime_dir", lambda: tmp_path / "alice-run")
    code = main(["--json", "service", "status", "--manager", "systemd"])
    reply = json.loads(capsys.readouterr().out)
    assert code == 0, reply
    assert [(f["path"], f["state"]) for f in reply["files"]] == [
        (str(units(alice) / name), "missing") for name in ("memoryd.socket", "memoryd.service")
    ]
    assert (
        "HOME, CLAUDE_CONFIG_DIR, XDG_CONFIG_HOME named folders of bob, who ran sudo, not of "
        f"{service._user_name()}: left out, HOME={alice}"
    ) in reply["lines"]
    assert os.environ["XDG_STATE_HOME"] == str(tmp_path / "state")


def test_sudo_u_to_a_user_whose_home_is_inside_the_callers_keeps_the_users_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found in session 24 (review): alice's home inside bob's (a service account kept under
    # its owner's home), every folder of alice's was taken for bob's, dropped and said so.
    bob = tmp_path / "bob"
    alice = bob / "services" / "alice"
    sudo_u_by_bob(alice, bob, monkeypatch)
    monkeypatch.setenv("HOME", str(bob))  # kept by sudo: bob's
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(bob / ".claude"))  # -E: bob's
    monkeypatch.setenv("XDG_CONFIG_HOME", str(alice / ".config"))  # alice's own
    monkeypatch.delenv("MEMORYD_SOCKET", raising=False)
    said = service._sudo_callers_folders()
    assert said is not None
    assert said.startswith("HOME, CLAUDE_CONFIG_DIR named folders of bob")
    assert os.environ["HOME"] == str(alice)
    assert "CLAUDE_CONFIG_DIR" not in os.environ
    assert os.environ["XDG_CONFIG_HOME"] == str(alice / ".config")
    # sudo's own HOME (alice's, set so by default on Debian) is left alone, said nowhere.
    monkeypatch.setenv("HOME", str(alice))
    assert service._sudo_callers_folders() is None
    assert os.environ["XDG_CONFIG_HOME"] == str(alice / ".config")


def test_sudo_u_keeps_a_home_of_the_users_own_when_another_folder_was_the_callers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found in session 24 (review): with only -E's CLAUDE_CONFIG_DIR in the caller's home, a
    # HOME the user had set (not the caller's) was still replaced by the password file's.
    bob, alice, here = tmp_path / "bob", tmp_path / "alice", tmp_path / "srv" / "alice"
    sudo_u_by_bob(alice, bob, monkeypatch)
    monkeypatch.setenv("HOME", str(here))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(bob / ".claude"))
    for name in ("MEMORYD_SOCKET", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    said = service._sudo_callers_folders()
    assert said == (
        f"CLAUDE_CONFIG_DIR named folders of bob, who ran sudo, not of {service._user_name()}: "
        "left out"
    )
    assert os.environ["HOME"] == str(here)
    assert "CLAUDE_CONFIG_DIR" not in os.environ
