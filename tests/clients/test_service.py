"""`memctl service`: the units it writes, what it asks the service manager, and idempotence.

memctl runs as a subprocess with a fake `systemctl` / `launchctl` first on PATH that records
its arguments, so no test ever talks to the real user manager. `systemd-analyze verify` checks
the written units where it is installed.
"""

from __future__ import annotations

import json
import os
import plistlib
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memctl.commands.service import SERVICE_SETTINGS
from memoryd_client import default_socket_path
from tests.clients.conftest import REPO, memctl_env, run_memctl
from tests.clients.fake_daemon import FakeDaemon
from tests.clients.test_lifecycle_version_skew import OLD
from tests.clients.test_lifecycle_version_skew import status as skew_status

FAKE_TOOL = """#!/bin/sh
printf '%s\\n' "$*" >> "{log}"
if [ -e "{log}.down" ]; then echo "Failed to connect to bus: No such file or directory" >&2; exit 1; fi
case "$*" in
  *" restart "*) if [ -e "{log}.restart-fails" ]; then exit 1; fi ;;
  *is-active*) if [ -e "{log}.active" ]; then exit 0; fi; exit 3 ;;
  *show*) cat "{log}.show" 2>/dev/null; exit 0 ;;
  print*) exit 113 ;;
esac
exit 0
"""
SHOW = "--user show --property=NeedDaemonReload --value -- memoryd.socket memoryd.service"


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    folder = tmp_path / "fakebin"
    folder.mkdir()
    for name in ("systemctl", "launchctl"):
        tool = folder / name
        tool.write_text(FAKE_TOOL.format(log=tmp_path / f"{name}.log"))
        tool.chmod(0o755)
    return folder


def directives(text: str, *names: str) -> list[str]:
    return [line for line in text.splitlines() if line.split("=", 1)[0].strip() in names]


def calls(tmp_path: Path, tool: str = "systemctl") -> list[str]:
    log = tmp_path / f"{tool}.log"
    return log.read_text().splitlines() if log.exists() else []


def memctl(
    home: Path, fake_bin: Path, *args: str, runtime: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HOME": str(home),
        "PATH": f"{fake_bin}:{os.environ.get('PATH', '/usr/bin:/bin')}",
    }
    env.pop("XDG_CONFIG_HOME", None)
    if runtime is not None:
        env["XDG_RUNTIME_DIR"] = str(runtime)
    return run_memctl(*args, env=env, timeout=60)


@pytest.fixture
def home(isolated_env: object) -> Path:
    return Path(os.environ["HOME"])


@pytest.fixture
def mac_home(isolated_env: object, short_tmp: Path) -> Path:
    """A HOME short enough for macOS's socket rule: ~/Library/Caches/memoryd/memoryd.sock
    must fit the 103 bytes of a Unix socket's path there (install refuses a longer one)."""
    path = short_tmp / "home"
    path.mkdir()
    return path


@pytest.fixture
def runtime(tmp_path: Path) -> Path:
    path = tmp_path / "run"
    path.mkdir(mode=0o700)
    return path


def units(home: Path) -> Path:
    return home / ".config" / "systemd" / "user"


def test_install_writes_units_with_this_installation_and_starts_them(
    home: Path, fake_bin: Path, runtime: Path, tmp_path: Path
) -> None:
    done = memctl(home, fake_bin, "service", "install", runtime=runtime)
    assert done.returncode == 0, done.stderr + done.stdout
    service = (units(home) / "memoryd.service").read_text()
    socket_unit = (units(home) / "memoryd.socket").read_text()
    memoryd = Path(sys.executable).parent / "memoryd"
    exec_line = next(line for line in service.splitlines() if line.startswith("ExecStart="))
    assert exec_line.startswith(f"ExecStart={memoryd} --socket %t/memoryd/memoryd.sock ")
    assert "ListenStream=%t/memoryd/memoryd.sock" in socket_unit
    for text in (service, socket_unit):
        assert "@" not in text.replace("`", "")  # every placeholder filled
        assert not directives(text, "PrivateTmp", "Documentation")
    # A start-up refusal (exit 2, one line) is not restarted in a loop.
    assert directives(service, "RestartPreventExitStatus") == ["RestartPreventExitStatus=2"]
    # The stop's SIGTERM goes to the daemon, not to its secret-scan worker as it drains.
    assert directives(service, "KillMode", "KillSignal") == ["KillSignal=SIGTERM", "KillMode=mixed"]
    user = "--user"
    assert calls(tmp_path) == [
        SHOW,
        f"{user} daemon-reload",
        f"{user} is-active --quiet memoryd.socket",
        f"{user} enable --now memoryd.socket",
        f"{user} try-restart memoryd.service",
    ]
    assert f"wrote: {units(home) / 'memoryd.service'}" in done.stdout
    assert "ran: " in done.stdout

    # Twice changes nothing: same files, no reload, no restart.
    before = {p.name: p.stat().st_mtime_ns for p in units(home).iterdir()}
    again = memctl(home, fake_bin, "--json", "service", "install", runtime=runtime)
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert [f["changed"] for f in report["files"]] == [False, False]
    assert {p.name: p.stat().st_mtime_ns for p in units(home).iterdir()} == before
    assert calls(tmp_path)[5:] == [
        SHOW,
        f"{user} is-active --quiet memoryd.socket",
        f"{user} enable --now memoryd.socket",
    ]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_the_written_units_pass_systemd_analyze_verify(
    home: Path, fake_bin: Path, runtime: Path
) -> None:
    assert memctl(home, fake_bin, "service", "install", runtime=runtime).returncode == 0
    verified = subprocess.run(
        [
            "systemd-analyze",
            "--user",
            "verify",
            str(units(home) / "memoryd.socket"),
            str(units(home) / "memoryd.service"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime), "HOME": str(home)},
        check=False,
    )
    assert verified.returncode == 0, verified.stderr
    assert verified.stderr.strip() == ""  # not even an unknown-key warning


def test_a_socket_path_with_spaces_is_one_word_of_exec_start(
    home: Path, fake_bin: Path, runtime: Path, tmp_path: Path
) -> None:
    # Found by a bug hunt: `--socket` was left unquoted, so systemd split it and memoryd
    # exited 2 (`unrecognized arguments: Smith/...`), the service never starting.
    socket = tmp_path / "John Smith" / "memoryd.sock"
    done = memctl(home, fake_bin, "--socket", str(socket), "service", "install", runtime=runtime)
    assert done.returncode == 0, done.stderr
    service = (units(home) / "memoryd.service").read_text()
    (exec_start,) = directives(service, "ExecStart")
    assert f'--socket "{socket}"' in exec_start
    assert shlex.split(exec_start.split("=", 1)[1])[2] == str(socket)
    (listen,) = directives((units(home) / "memoryd.socket").read_text(), "ListenStream")
    assert listen == f"ListenStream={socket}"


def test_dry_run_prints_the_files_and_changes_nothing(
    home: Path, fake_bin: Path, runtime: Path, tmp_path: Path
) -> None:
    done = memctl(home, fake_bin, "service", "install", "--dry-run", runtime=runtime)
    assert done.returncode == 0, done.stderr
    assert "[Socket]" in done.stdout
    assert "ExecStart=/" in done.stdout
    assert "would run: " in done.stdout
    assert not units(home).exists()
    # Only questions: the dry run asks systemd what the real run would find.
    assert calls(tmp_path) == [SHOW, "--user is-active --quiet memoryd.socket"]


def test_uninstall_removes_only_its_own_files(
    home: Path, fake_bin: Path, runtime: Path, tmp_path: Path
) -> None:
    assert memctl(home, fake_bin, "service", "install", runtime=runtime).returncode == 0
    status = memctl(home, fake_bin, "service", "status", runtime=runtime)
    assert status.returncode == 0, status.stderr
    assert f"{units(home) / 'memoryd.socket'}: installed, up to date" in status.stdout
    assert "daemon: not running" in status.stdout

    # A hand-written service file is not memctl's to delete.
    (units(home) / "memoryd.service").write_text("[Service]\nExecStart=/opt/mine\n")
    removed = memctl(home, fake_bin, "service", "uninstall", runtime=runtime)
    assert removed.returncode == 0, removed.stderr
    # Only memctl's own unit is stopped and disabled; the user's is not touched at all.
    assert "--user disable --now memoryd.socket" in calls(tmp_path)
    assert not (units(home) / "memoryd.socket").exists()
    assert (units(home) / "memoryd.service").read_text() == "[Service]\nExecStart=/opt/mine\n"
    assert "left alone" in removed.stdout
    (units(home) / "memoryd.service").unlink()
    assert "not installed" in memctl(home, fake_bin, "service", "uninstall").stdout


def test_launch_agent_uses_the_clients_socket_rule(
    mac_home: Path, fake_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = mac_home
    done = memctl(home, fake_bin, "service", "install", "--manager", "launchd")
    assert done.returncode == 0, done.stderr + done.stdout
    plist_path = home / "Library" / "LaunchAgents" / "com.memoryd.daemon.plist"
    with plist_path.open("rb") as handle:
        plist = plistlib.load(handle)
    arguments = plist["ProgramArguments"]
    assert arguments[0] == str(Path(sys.executable).parent / "memoryd")
    socket_arg = arguments[arguments.index("--socket") + 1]
    # What a macOS client computes with the same HOME and nothing set: the same path.
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("MEMORYD_SOCKET", raising=False)
    assert socket_arg == str(default_socket_path(platform="darwin"))
    # No MEMORYD_SOCKET needed anywhere (the roots the test's environment sets are carried).
    assert "MEMORYD_SOCKET" not in plist.get("EnvironmentVariables", {})
    assert (home / "Library" / "Logs" / "memoryd").is_dir()
    uid = os.getuid()
    assert calls(tmp_path, "launchctl") == [
        f"print gui/{uid}/com.memoryd.daemon",
        f"bootstrap gui/{uid} {plist_path}",
    ]
    again = memctl(home, fake_bin, "service", "install", "--manager", "launchd")
    assert f"unchanged: {plist_path}" in again.stdout


def test_the_launch_agent_is_not_throttled_as_background_work(
    mac_home: Path, fake_bin: Path
) -> None:
    # ProcessType=Background had macOS throttle the CPU and disk of the daemon whose answers
    # the hooks wait for (100 ms): Standard is the light limits of a job with no type.
    done = memctl(mac_home, fake_bin, "service", "install", "--manager", "launchd")
    assert done.returncode == 0, done.stderr + done.stdout
    plist_path = mac_home / "Library" / "LaunchAgents" / "com.memoryd.daemon.plist"
    with plist_path.open("rb") as handle:
        assert plistlib.load(handle)["ProcessType"] == "Standard"


def test_the_shipped_templates_stay_templates() -> None:
    repo = Path(__file__).resolve().parents[2]
    for path in (
        repo / "systemd" / "memoryd.service",
        repo / "systemd" / "memoryd.socket",
        repo / "launchd" / "com.memoryd.daemon.plist",
    ):
        text = path.read_text()
        assert "@SOCKET@" in text or "@SOCKET_ARG@" in text
        assert not directives(text, "PrivateTmp", "Documentation")
    with (repo / "launchd" / "com.memoryd.daemon.plist").open("rb") as handle:
        assert plistlib.load(handle)["ProgramArguments"][0] == "@MEMORYD@"


def test_a_changed_socket_unit_that_listens_is_restarted(
    home: Path, fake_bin: Path, runtime: Path, tmp_path: Path
) -> None:
    # Found by a bug hunt: the socket unit was rewritten (another socket) while it listened,
    # and only the service was restarted: systemd kept the old listener and handed the old
    # socket to the new service, while every client looked on the new path.
    assert memctl(home, fake_bin, "service", "install", runtime=runtime).returncode == 0
    (tmp_path / "systemctl.log").unlink()
    (tmp_path / "systemctl.log.active").touch()
    other = tmp_path / "other" / "memoryd.sock"
    (tmp_path / "systemctl.log.restart-fails").touch()
    failed = memctl(home, fake_bin, "--socket", str(other), "service", "install", runtime=runtime)
    assert failed.returncode == 1
    assert f"ListenStream={other}" in (units(home) / "memoryd.socket").read_text()
    # The next run, with nothing left to write, still restarts the socket unit.
    (tmp_path / "systemctl.log.restart-fails").unlink()
    (tmp_path / "systemctl.log").unlink()
    done = memctl(home, fake_bin, "--socket", str(other), "service", "install", runtime=runtime)
    assert done.returncode == 0, done.stdout
    assert f"unchanged: {units(home) / 'memoryd.socket'}" in done.stdout
    assert calls(tmp_path) == [
        SHOW,
        "--user daemon-reload",
        "--user is-active --quiet memoryd.socket",
        "--user enable --now memoryd.socket",
        "--user restart memoryd.socket",
    ]
    # A change to the service alone restarts the service, not the socket.
    (tmp_path / "systemctl.log").unlink()
    assert memctl(home, fake_bin, "service", "install", runtime=runtime).returncode == 0
    (tmp_path / "systemctl.log").unlink()
    service = units(home) / "memoryd.service"
    service.write_text(service.read_text().replace("RestartSec=2", "RestartSec=3"))
    assert memctl(home, fake_bin, "service", "install", runtime=runtime).returncode == 0
    assert calls(tmp_path)[-1] == "--user try-restart memoryd.service"
    assert "--user restart memoryd.socket" not in calls(tmp_path)


@pytest.mark.slow  # a real daemon started and stopped: seconds on a loaded machine
def test_the_launch_agent_takes_the_socket_over_from_a_memctl_started_daemon(
    fake_bin: Path, short_tmp: Path, tmp_path: Path
) -> None:
    # Found by a bug hunt: bootstrapped while a `memctl start` daemon held the socket, the
    # agent's daemon exited 2 ("already serving") and KeepAlive started it every 10 s.
    home = short_tmp / "h"
    home.mkdir()
    sock = str(home / "Library" / "Caches" / "memoryd" / "memoryd.sock")
    assert memctl(home, fake_bin, "--socket", sock, "start").returncode == 0
    try:
        (tmp_path / "launchctl.log.down").touch()  # bootstrap fails: the daemon comes back
        failed = memctl(home, fake_bin, "service", "install", "--manager", "launchd")
        assert failed.returncode == 1, failed.stdout
        assert "started the background daemon again" in failed.stdout
        assert memctl(home, fake_bin, "--socket", sock, "status").returncode == 0
        (tmp_path / "launchctl.log.down").unlink()
        done = memctl(home, fake_bin, "service", "install", "--manager", "launchd")
        assert done.returncode == 0, done.stdout
        assert "so the LaunchAgent can take over its socket" in done.stdout
        assert memctl(home, fake_bin, "--socket", sock, "status").returncode == 3
        assert calls(tmp_path, "launchctl")[-1].startswith(f"bootstrap gui/{os.getuid()} ")
    finally:
        memctl(home, fake_bin, "--socket", sock, "stop")


@pytest.mark.slow  # a real daemon started and stopped: seconds on a loaded machine
def test_install_hands_the_socket_over_from_a_memctl_started_daemon(
    home: Path, fake_bin: Path, short_tmp: Path
) -> None:
    runtime = short_tmp
    started = memctl(home, fake_bin, "start", runtime=runtime)
    assert started.returncode == 0, started.stderr
    try:
        done = memctl(home, fake_bin, "service", "install", runtime=runtime)
        assert done.returncode == 0, done.stderr + done.stdout
        assert "stopped the background daemon" in done.stdout
        assert memctl(home, fake_bin, "status", runtime=runtime).returncode == 3
    finally:
        memctl(home, fake_bin, "stop", runtime=runtime)


@pytest.mark.slow  # a real daemon started and stopped: seconds on a loaded machine
def test_a_background_daemon_keeps_running_when_systemd_cannot_be_reached(
    home: Path, fake_bin: Path, short_tmp: Path, tmp_path: Path
) -> None:
    # Found by a bug hunt: over ssh without a user bus, the second install said "unchanged",
    # stopped the `memctl start` daemon, then failed at enable: nothing served the socket.
    runtime = short_tmp
    assert memctl(home, fake_bin, "start", runtime=runtime).returncode == 0
    try:
        (tmp_path / "systemctl.log.down").touch()
        for _ in range(2):
            done = memctl(home, fake_bin, "service", "install", runtime=runtime)
            assert done.returncode == 1
            assert "user manager cannot be reached; nothing was stopped" in done.stdout
            assert "stopped the background daemon" not in done.stdout
            assert memctl(home, fake_bin, "status", runtime=runtime).returncode == 0
        assert not [c for c in calls(tmp_path) if "enable" in c or "daemon-reload" in c]
        # With systemd back, the dry run says what the real run then does.
        (tmp_path / "systemctl.log.down").unlink()
        dry = memctl(home, fake_bin, "service", "install", "--dry-run", runtime=runtime)
        assert "would stop the background daemon (pid " in dry.stdout
        assert memctl(home, fake_bin, "status", runtime=runtime).returncode == 0
    finally:
        memctl(home, fake_bin, "stop", runtime=runtime)


def test_a_retry_after_a_failed_reload_reloads_and_restarts(
    home: Path, fake_bin: Path, runtime: Path, tmp_path: Path
) -> None:
    # Found by a bug hunt: units written, daemon-reload failed (bus away a moment); the retry
    # said "unchanged" and neither reloaded nor restarted: the old command line stayed.
    (tmp_path / "systemctl.log.down").touch()
    assert memctl(home, fake_bin, "service", "install", runtime=runtime).returncode == 1
    (tmp_path / "systemctl.log.down").unlink()
    (tmp_path / "systemctl.log").unlink()
    done = memctl(home, fake_bin, "service", "install", runtime=runtime)
    assert done.returncode == 0, done.stdout
    assert "--user daemon-reload" in calls(tmp_path)
    assert "--user try-restart memoryd.service" in calls(tmp_path)
    # Done: the next run has nothing left to apply.
    (tmp_path / "systemctl.log").unlink()
    memctl(home, fake_bin, "service", "install", runtime=runtime)
    assert calls(tmp_path) == [
        SHOW,
        "--user is-active --quiet memoryd.socket",
        "--user enable --now memoryd.socket",
    ]
    # A unit changed behind memctl's back (systemd says NeedDaemonReload) is reloaded.
    (tmp_path / "systemctl.log").unlink()
    (tmp_path / "systemctl.log.show").write_text("no\n\nyes\n")
    memctl(home, fake_bin, "service", "install", runtime=runtime)
    assert "--user daemon-reload" in calls(tmp_path)


def test_units_of_the_users_own_are_neither_replaced_nor_stopped(
    home: Path, fake_bin: Path, runtime: Path, tmp_path: Path
) -> None:
    # Found by a bug hunt: uninstall said "left alone" but had run `disable --now` on it;
    # install replaced it without a word.
    units(home).mkdir(parents=True)
    mine = "[Service]\nExecStart=/opt/memoryd/bin/memoryd\n"
    (units(home) / "memoryd.service").write_text(mine)
    removed = memctl(home, fake_bin, "service", "uninstall", runtime=runtime)
    assert removed.returncode == 0
    assert "left alone" in removed.stdout
    assert calls(tmp_path) == []
    for dry in ([], ["--dry-run"]):
        done = memctl(home, fake_bin, "service", "install", *dry, runtime=runtime)
        assert done.returncode == 2
        assert f"refused: {units(home) / 'memoryd.service'} was not written by memctl" in (
            done.stdout
        )
        assert (units(home) / "memoryd.service").read_text() == mine
        assert not (units(home) / "memoryd.socket").exists()
        assert calls(tmp_path) == []


def test_the_dry_run_runs_what_the_real_run_runs(
    home: Path, fake_bin: Path, runtime: Path, tmp_path: Path
) -> None:
    # Found by a bug hunt: the dry run left out try-restart, listed a daemon-reload an
    # unchanged install does not run, and said "would write" for a symlink the real run refused.
    def commands(out: str, prefix: str) -> list[str]:
        return [line.split(": ", 1)[1] for line in out.splitlines() if line.startswith(prefix)]

    for _ in range(2):  # a fresh install, then an unchanged one
        dry = memctl(home, fake_bin, "service", "install", "--dry-run", runtime=runtime)
        real = memctl(home, fake_bin, "service", "install", runtime=runtime)
        assert commands(dry.stdout, "would run:") == commands(real.stdout, "ran:")
    target = tmp_path / "dotfiles.service"
    target.write_text("[Service]\nExecStart=/bin/true\n")
    (units(home) / "memoryd.service").unlink()
    (units(home) / "memoryd.service").symlink_to(target)
    for dry in (["--dry-run"], []):
        done = memctl(home, fake_bin, "service", "install", *dry, runtime=runtime)
        assert done.returncode == 2
        assert "is a symlink" in done.stdout
        assert "would write" not in done.stdout


def test_the_launch_agent_is_well_formed_with_dashes_in_its_paths(
    fake_bin: Path, short_tmp: Path
) -> None:
    # Found by a bug hunt: the template's XML comment named @SOCKET@ and the log files; with
    # HOME=/Users/jean--luc the comment held `--`, which XML forbids: launchd refused it.
    home = short_tmp / "jean--luc & <co>"
    home.mkdir()
    done = memctl(home, fake_bin, "service", "install", "--manager", "launchd")
    assert done.returncode == 0, done.stdout
    plist_path = home / "Library" / "LaunchAgents" / "com.memoryd.daemon.plist"
    with plist_path.open("rb") as handle:
        plist = plistlib.load(handle)
    assert plist["StandardErrorPath"] == str(home / "Library/Logs/memoryd/memoryd.err")
    assert plist_path.read_text().count("<!--") == 1  # the marker alone


def test_a_relative_memoryd_socket_is_refused_and_a_tilde_expanded(
    home: Path, fake_bin: Path, runtime: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by a bug hunt: MEMORYD_SOCKET=run/memoryd.sock became ListenStream=run/memoryd.sock,
    # which systemd rejects, and install said it worked; `~/…` was written as it was.
    monkeypatch.setenv("MEMORYD_SOCKET", "run/memoryd.sock")
    done = memctl(home, fake_bin, "service", "install", runtime=runtime)
    assert done.returncode == 2
    assert "MEMORYD_SOCKET=run/memoryd.sock is a relative path" in done.stderr
    assert not units(home).exists()
    monkeypatch.setenv("MEMORYD_SOCKET", "~/memoryd.sock")
    done = memctl(home, fake_bin, "service", "install", runtime=runtime)
    assert done.returncode == 0, done.stdout
    (listen,) = directives((units(home) / "memoryd.socket").read_text(), "ListenStream")
    assert listen == f"ListenStream={home}/memoryd.sock"
    monkeypatch.setenv("HOME", str(home))
    assert default_socket_path() == home / "memoryd.sock"  # the clients agree


def test_a_path_that_is_not_utf8_is_refused_by_the_dry_run_too(
    fake_bin: Path, tmp_path: Path
) -> None:
    # Found by a bug hunt: a Latin-1 HOME made the dry run show the units as fine and the real
    # run a UnicodeEncodeError traceback.
    home = os.fsencode(tmp_path) + b"/jos\xe9"
    os.mkdir(home)
    env = {os.fsencode(k): os.fsencode(v) for k, v in os.environ.items()}
    env.pop(b"XDG_STATE_HOME", None)
    env.pop(b"XDG_CONFIG_HOME", None)
    env[b"HOME"] = home
    env[b"PATH"] = os.fsencode(fake_bin) + b":" + env.get(b"PATH", b"/usr/bin:/bin")
    env[b"PYTHONPATH"] = os.fsencode(os.pathsep.join([str(REPO / "clients"), str(REPO)]))
    for dry in (["--dry-run"], []):
        done = subprocess.run(
            [sys.executable, "-m", "memctl", "service", "install", *dry],
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert b"Traceback" not in done.stderr
        assert b"is not UTF-8" in done.stdout
        assert b"unit files must be UTF-8" in done.stdout
    assert not os.path.exists(home + b"/.config/systemd")
    assert calls(tmp_path) == []


def test_install_creates_the_env_folder_and_only_private_folders(
    home: Path, fake_bin: Path, runtime: Path
) -> None:
    # Found by a bug hunt: the documented next step, `install -m 600 /dev/null
    # ~/.config/memoryd/env`, failed on a fresh account (nothing made ~/.config/memoryd), and
    # ~/.config, ~/.config/systemd, ~/.local, ~/.local/state were made 0755 (mkdir's mode goes
    # to the last folder only).
    old = os.umask(0o022)
    try:
        dry = memctl(home, fake_bin, "service", "install", "--dry-run", runtime=runtime)
        assert f"would create: {home / '.config' / 'memoryd'} (0700" in dry.stdout
        assert not (home / ".config").exists()
        done = memctl(home, fake_bin, "service", "install", runtime=runtime)
    finally:
        os.umask(old)
    assert done.returncode == 0, done.stderr + done.stdout
    assert f"created: {home / '.config' / 'memoryd'} (0700" in done.stdout
    state = Path(os.environ["XDG_STATE_HOME"])
    made = [p for p in [*home.rglob("*"), state, *state.rglob("*")] if p.is_dir()]
    assert home / ".config" / "memoryd" in made
    assert state / "memoryd" in made
    assert {p: oct(p.stat().st_mode & 0o777) for p in made} == {p: "0o700" for p in made}
    env_file = home / ".config" / "memoryd" / "env"
    written = subprocess.run(["install", "-m", "600", "/dev/null", str(env_file)], check=False)
    assert written.returncode == 0
    again = memctl(home, fake_bin, "service", "install", runtime=runtime)
    assert "created:" not in again.stdout


def test_uninstall_says_which_commands_failed(
    home: Path, fake_bin: Path, runtime: Path, tmp_path: Path
) -> None:
    # With no user bus (ssh, a container) `disable --now` and `daemon-reload` fail: the files
    # go, nothing is stopped, and the output said "ran:" of both as of a success.
    assert memctl(home, fake_bin, "service", "install", runtime=runtime).returncode == 0
    (fake_bin / "systemctl").write_text(
        "#!/bin/sh\necho 'Failed to connect to bus: No medium found' >&2\nexit 1\n"
    )
    removed = memctl(home, fake_bin, "service", "uninstall", runtime=runtime)
    assert not (units(home) / "memoryd.socket").exists()
    for command in ("disable --now memoryd.socket", "daemon-reload"):
        said = next(line for line in removed.stdout.splitlines() if command in line)
        assert said.endswith("(exit 1: Failed to connect to bus: No medium found)"), said


def test_status_says_the_daemon_runs_the_code_from_before_an_upgrade(
    home: Path, fake_bin: Path, fake_daemon: FakeDaemon
) -> None:
    """`pipx upgrade` keeps the installation's path, so the units are unchanged and the service's
    daemon runs the old code until restarted: service status showed its version alone."""
    fake_daemon.on("status", skew_status(OLD))
    sock = str(fake_daemon.socket_path)
    done = memctl(home, fake_bin, "--socket", sock, "service", "status")
    assert done.returncode == 0, done.stderr
    assert f"daemon: memoryd {OLD} (pid 7) on {sock}" in done.stdout
    assert f"warning: the running memoryd ({OLD}) differs from this memctl (0.1.0" in done.stdout
    fake_daemon.on("status", skew_status())  # this checkout's version, read when asked
    done = memctl(home, fake_bin, "--socket", sock, "service", "status")
    assert "warning" not in done.stdout


def test_install_refuses_a_daemon_command_the_service_manager_cannot_run(
    home: Path, fake_bin: Path, runtime: Path, tmp_path: Path
) -> None:
    """memctl run from a checkout with PYTHONPATH by an interpreter with no memoryd installed
    (no `memoryd` script beside it) wrote `ExecStart=python -m memoryd`: the service, without
    PYTHONPATH, failed at every start (No module named memoryd), and install said nothing."""
    bare = tmp_path / "bare" / "python3"  # the venv's base interpreter: memoryd not installed
    bare.parent.mkdir()
    bare.symlink_to(os.path.realpath(sys.executable))
    env = {
        **memctl_env(HOME=str(home), XDG_RUNTIME_DIR=str(runtime)),
        "PATH": f"{fake_bin}:{os.environ.get('PATH', '/usr/bin:/bin')}",
    }
    done = subprocess.run(
        [bare, "-m", "memctl", "service", "install"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr + done.stdout
    assert f"daemon: {bare} -m memoryd" in done.stdout
    assert "does not start as the service manager would start it" in done.stdout
    assert "No module named" in done.stdout
    assert not units(home).exists()
    assert calls(tmp_path) == []


@pytest.mark.parametrize(("manager", "limit"), [("systemd", 107), ("launchd", 103)])
def test_install_refuses_a_socket_path_too_long_for_a_unix_socket(
    home: Path, fake_bin: Path, tmp_path: Path, manager: str, limit: int
) -> None:
    """Such a path was written: systemd drops the ListenStream= (the socket unit cannot
    start), and the LaunchAgent's daemon exits 2, started again every 10 s for ever."""
    folder = tmp_path / "s"
    fits = folder / ("x" * (limit - len(str(folder)) - 1))
    assert len(str(fits)) == limit
    done = memctl(home, fake_bin, "--socket", str(fits), "service", "install", "--manager", manager)
    assert done.returncode == 0, done.stdout
    over = Path(f"{fits}y")
    done = memctl(home, fake_bin, "--socket", str(over), "service", "install", "--manager", manager)
    assert done.returncode == 2, done.stdout
    assert f"refused: the socket path {over} is {limit + 1} bytes, over the {limit}" in done.stdout
    assert "wrote:" not in done.stdout  # refused before anything was written


def test_install_names_the_model_and_team_settings_the_service_will_not_get(
    home: Path, fake_bin: Path, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by a bug hunt: a user moving from `memctl start` (whose daemon has the shell's
    ANTHROPIC_API_KEY) to the service lost the model and team sync without a word. The
    values stay out of the units; install names what to move to the env file."""
    for name in SERVICE_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    # Values no unit or message holds otherwise (the unit's comments say "secret-scan").
    values = ("sk-ant-value-5f0e2a", "team-token-value-91c7d4")
    monkeypatch.setenv("ANTHROPIC_API_KEY", values[0])
    monkeypatch.setenv("MEMORYD_TEAM_TOKEN", values[1])
    env_file = home / ".config" / "memoryd" / "env"
    done = memctl(home, fake_bin, "service", "install", runtime=runtime)
    assert done.returncode == 0, done.stdout
    assert (
        "not given to the service: ANTHROPIC_API_KEY, MEMORYD_TEAM_TOKEN, set in this shell "
        f"(never written into a unit): add them to {env_file}"
    ) in done.stdout
    for value in values:
        assert value not in done.stdout
        for unit in units(home).iterdir():
            assert value not in unit.read_text()
    env_file.write_text(f"# model\nANTHROPIC_API_KEY={values[0]}\n")
    done = memctl(home, fake_bin, "service", "install", runtime=runtime)
    assert (
        "not given to the service: MEMORYD_TEAM_TOKEN, set in this shell (never written into a "
        f"unit): add it to {env_file}"
    ) in done.stdout
    env_file.write_text("ANTHROPIC_API_KEY=a\nMEMORYD_TEAM_TOKEN=b\n")
    assert "not given" not in memctl(home, fake_bin, "service", "install", runtime=runtime).stdout
