"""`memctl service install | uninstall | status [--dry-run] [--manager systemd|launchd]`.

Runs memoryd as a login service of the installation memctl itself runs from: systemd user
units with socket activation on Linux, a LaunchAgent on macOS. `install` writes the units with
the absolute path of this installation's daemon, then reloads, enables and starts them
(`systemctl --user`, `launchctl bootstrap`); a file that already has the right content is left
alone, so running it twice changes nothing. `--dry-run` prints the files and commands instead.
`uninstall` stops and disables them and removes only files memctl wrote.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from memctl import files, lifecycle, service_units
from memctl.commands.daemon import version_skew
from memctl.output import EXIT_RPC, EXIT_USAGE, emit, fail
from memoryd_client import default_socket_path, paths
from memoryd_client.client import socket_path_max
from memoryd_client.private_dirs import make_private_dirs


def register(sub: Any) -> None:
    parser = sub.add_parser("service", help="run memoryd as a login service (systemd / launchd)")
    parser.add_argument("action", choices=("install", "uninstall", "status"))
    parser.add_argument(
        "--dry-run", action="store_true", help="print the files and commands, change nothing"
    )
    parser.add_argument(
        "--manager",
        choices=("systemd", "launchd"),
        default="launchd" if sys.platform == "darwin" else "systemd",
        help="the service manager (default: launchd on macOS, else systemd)",
    )
    parser.set_defaults(func=run)


class Report:
    """What a run did, for the human lines and for `--json`."""

    def __init__(self, dry_run: bool) -> None:
        self.dry_run = dry_run
        self.lines: list[str] = []
        self.files: list[dict[str, Any]] = []
        self.commands: list[dict[str, Any]] = []
        self.ok = True
        self.exit_code = EXIT_RPC  # when not ok
        # Set for the service manager's commands (shown before them): how uninstall reaches
        # the user manager from su or sudo -u (`_systemd_reach`).
        self.env: dict[str, str] = {}

    def say(self, text: str) -> None:
        self.lines.append(text)

    def refuse(self, text: str) -> None:
        """Something install will not do, found before anything was changed: exit 2."""
        self.ok = False
        self.exit_code = EXIT_USAGE
        self.say(f"refused: {text}")

    def query(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """Ask the service manager something (read-only: run on a dry run too, so the dry run
        says what the real one would do)."""
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=30, check=False, env=self._env()
        )

    def _env(self) -> dict[str, str] | None:
        return {**os.environ, **self.env} if self.env else None

    def failed(self, done: subprocess.CompletedProcess[str], why: str = "") -> None:
        self.ok = False
        detail = (done.stderr or done.stdout).strip().splitlines()
        self.say(
            f"failed: {' '.join(done.args)} (exit {done.returncode}): {' '.join(detail[-2:])}"
            + (f"; {why}" if why else "")
        )

    def run(self, argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a service-manager command (or only show it, on a dry run)."""
        shown = " ".join([*(f"{k}={v}" for k, v in self.env.items()), *argv])
        if self.dry_run:
            self.say(f"would run: {shown}")
            self.commands.append({"argv": argv, "returncode": None})
            return subprocess.CompletedProcess(argv, 0, "", "")
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=60, check=False, env=self._env()
        )
        self.commands.append({"argv": argv, "returncode": done.returncode})
        if done.returncode == 0:
            self.say(f"ran: {shown}")
        elif not check:
            # Gone on from (a unit already gone), but said: with no user bus `disable --now`
            # removes the links and stops nothing, and "ran:" alone hid that.
            detail = (done.stderr or done.stdout).strip().splitlines()
            self.say(f"ran: {shown} (exit {done.returncode}: {' '.join(detail[-2:])})")
        else:
            self.failed(done)
        return done

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "files": self.files, "commands": self.commands, "lines": self.lines}


def _pending(manager: str) -> Path:
    """Present while units install wrote are not yet in effect (a reload or restart failed, or
    was never reached): the next install finishes the job although no file changes then."""
    return paths.state_dir() / f"service-{manager}.pending"


def _current(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None
    except OSError:
        return ""  # unreadable: not memctl's (no marker), so refused, never replaced


def _ours(text: str | None) -> bool:
    return text is not None and service_units.MARKER in text[:300]


def _systemd_unit_dir() -> Path:
    return (paths.xdg_dir("XDG_CONFIG_HOME") or paths.home() / ".config") / "systemd" / "user"


def _agents_dir() -> Path:
    return paths.home() / "Library" / "LaunchAgents"


def _launchd_logs() -> Path:
    return paths.home() / "Library" / "Logs" / "memoryd"


def carried() -> tuple[dict[str, str], dict[str, str]]:
    """What the service's environment gets from install's (`carried_environment`), HOME first
    when it is not the password database's home folder: the service manager gives the
    daemon that one (and reads it as `%h`), so the daemon used other memory folders, and
    another env file, than the memctl and hooks the user runs."""
    carried, left_out = service_units.carried_environment(os.environ)
    home = str(paths.home())
    if home != _passwd_home():
        if service_units.has_control(home):  # a unit file or plist line cannot hold it
            left_out = {"HOME": "holds a control character", **left_out}
        else:
            carried = {"HOME": home, **carried}
    return carried, left_out


def _passwd_home() -> str | None:
    return _home_of(os.getuid())


def _home_of(uid: int) -> str | None:
    """The home folder of `uid` in the password database."""
    import pwd

    try:
        return pwd.getpwuid(uid).pw_dir
    except KeyError:
        return None


# The variables naming a user's own folders that the service and its units are read from.
_OWN_FOLDERS = ("HOME", "MEMORYD_SOCKET", *service_units.CARRIED_VARIABLES)


def _sudo_callers_folders() -> str | None:
    """Under `sudo -u USER` (or `sudo` to root), the variables naming folders in the home of
    the user who ran sudo are theirs, not USER's: sudo keeps HOME unless set up otherwise,
    and -E every one. They are dropped, the caller's HOME made USER's own (the password
    database's, which their user manager reads units under), and what was done is returned
    to be said; None when memctl runs as the user whose environment it has. Before session
    24 `sudo -u alice memctl service status` read the caller's units, and install wrote
    alice's there."""
    caller = os.environ.get("SUDO_UID", "")
    if not caller.isdecimal() or int(caller) == os.getuid():
        return None
    theirs, own = _home_of(int(caller)), _passwd_home()
    if not theirs or own is None:
        return None
    theirs, mine = theirs.rstrip("/"), own.rstrip("/")
    if theirs in ("", mine):
        return None

    def callers(value: str) -> bool:
        # The home a value is in is the longer of the two holding it: a service account's
        # home kept inside its owner's (HOME=/home/bob/svc, set so by sudo) is the user's.
        return _within(value, theirs) and not (len(mine) > len(theirs) and _within(value, mine))

    names = [
        name
        for name in dict.fromkeys(_OWN_FOLDERS)
        if (value := os.environ.get(name)) and callers(value)
    ]
    if not names:
        return None
    for name in names:
        del os.environ[name]
    # A HOME of the user's own (not the caller's) stays: only the caller's is replaced.
    home = ""
    if "HOME" in names:
        os.environ["HOME"] = own
        home = f", HOME={own}"
    who = os.environ.get("SUDO_USER") or f"uid {caller}"
    return (
        f"{', '.join(names)} named folders of {who}, who ran sudo, not of {_user_name()}: "
        f"left out{home}"
    )


def _within(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or inside it, both written as given (not resolved)."""
    return path == folder or path.startswith(folder + "/")


def planned(manager: str, sock: Path, runtime: str | None = None) -> list[service_units.UnitFile]:
    """The unit files install would write; `runtime`: the user's runtime folder to write them
    for, when not this shell's (status from su or sudo -u)."""
    if runtime is None and paths.xdg_dir("XDG_RUNTIME_DIR") is not None:
        runtime = os.environ["XDG_RUNTIME_DIR"]
    command = service_units.daemon_command()
    environment, _ = carried()
    if manager == "launchd":
        logs = _launchd_logs()
        plist = service_units.launchd_plist(
            _agents_dir(), command, sock, logs / "memoryd.log", logs / "memoryd.err", environment
        )
        return [plist]
    return service_units.systemd_units(
        _systemd_unit_dir(),
        command,
        sock,
        paths.state_dir() / "memoryd.log",
        runtime,
        environment,
        env_file=env_file(),
    )


def _say_environment(report: Report) -> None:
    """Which of the user's roots the service gets, and which it does not."""
    given, left_out = carried()
    if given:
        report.say("environment: " + " ".join(f"{k}={v}" for k, v in given.items()))
    for name, why in left_out.items():
        report.say(f"not carried: {name} ({why}); the service uses its default")


# The daemon's model and team settings, credentials among them: never carried into a unit (a
# unit file is world-readable), so a service daemon has them only from the env file (systemd)
# or the plist's EnvironmentVariables (launchd).
SERVICE_SETTINGS = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "MEMORYD_MODEL",
    "MEMORYD_SMALL_MODEL",
    "MEMORYD_TEAM_URL",
    "MEMORYD_TEAM_TOKEN",
)


def _say_settings_left_behind(report: Report, manager: str) -> None:
    """Which of SERVICE_SETTINGS this shell sets and the service will not see. A user moving
    from `memctl start` (whose daemon has the shell's) to the service lost the model and
    team sync without a word: status then said "no model configured"."""
    here = [name for name in SERVICE_SETTINGS if os.environ.get(name)]
    if manager == "launchd":
        where = "the plist's EnvironmentVariables (again after each install) or `launchctl setenv`"
    else:
        given = _env_file_names(env_file())
        here = [name for name in here if name not in given]
        where = str(env_file())
    if here:
        report.say(
            f"not given to the service: {', '.join(here)}, set in this shell (never written "
            f"into a unit): add {'it' if len(here) == 1 else 'them'} to {where}"
        )


def _env_file_names(path: Path) -> set[str]:
    """The names the env file sets (NAME=value lines), as far as it can be read: a regular
    file's first 64 KiB (no FIFO waited on), as the daemon reads it."""
    raw = files.read_regular_head(path, 64 * 1024)
    if raw is None:
        return set()
    text = raw.decode("utf-8", errors="replace")
    names = set()
    for line in text.splitlines():
        name, equals, _ = line.strip().partition("=")
        if equals and not name.startswith(("#", ";")):
            names.add(name.strip())
    return names


def _tool(manager: str) -> str | None:
    return shutil.which("launchctl" if manager == "launchd" else "systemctl")


def _refusals(report: Report, units: list[service_units.UnitFile], sock: Path) -> None:
    """What install will not do, decided the same way on a dry run as on a real one."""
    manager = "launchd" if units[0].path.suffix == ".plist" else "systemd"
    # The limit of the system the units are for (the daemon checks the same at its bind).
    size = len(os.fsencode(sock))
    limit = socket_path_max("darwin" if manager == "launchd" else "linux")
    if size > limit:
        # systemd drops such a ListenStream= (the socket unit then fails to start); the
        # LaunchAgent's daemon exits 2 and launchd starts it again every 10 s, for ever.
        report.refuse(
            f"the socket path {sock} is {size} bytes, over the {limit} a Unix socket's path "
            "may have: the service could never listen on it; use a shorter --socket or "
            "MEMORYD_SOCKET"
        )
    if service_units.has_control(str(env_file())) and manager == "systemd":
        # EnvironmentFile= takes the path as it is, as ListenStream= does.
        report.refuse(
            f"the env file path {str(env_file())!r} holds a control character, which a unit "
            "file cannot name: set HOME to a path without one"
        )
    if service_units.has_control(str(sock)):
        # ListenStream= takes the path as it is: a line break there ends the line.
        report.refuse(
            f"the socket path {str(sock)!r} holds a control character, which a unit file "
            "cannot name: use --socket, MEMORYD_SOCKET or XDG_RUNTIME_DIR without one"
        )
    for unit in units:
        stray = service_units.stray_control(unit.text)
        if stray is not None:
            line = next(x for x in unit.text.split("\n") if stray in x)
            report.refuse(
                f"{unit.path} would name a path holding the control character {stray!r} "
                f"({line.strip()!r}): use a HOME / XDG_STATE_HOME without one"
            )
        try:
            unit.text.encode("utf-8")
        except UnicodeEncodeError:
            line = next(x for x in unit.text.splitlines() if not _utf8(x))
            report.refuse(
                f"{unit.path} would name a path that is not UTF-8 ({line.strip()}); unit files "
                "must be UTF-8: use a UTF-8 HOME / XDG_STATE_HOME, or --socket"
            )
        if unit.path.is_symlink():
            report.refuse(f"{unit.path} is a symlink; remove it and run install again")
            continue
        current = _current(unit.path)
        if current is not None and current != unit.text and not _ours(current):
            report.refuse(
                f"{unit.path} was not written by memctl (a unit of your own?); move it aside "
                "and run install again"
            )


# The PATH a user service manager gives (systemd's default; launchd's is shorter still).
_SERVICE_PATH = "/usr/local/bin:/usr/bin:/bin"


def _refuse_unrunnable(report: Report, command: list[str]) -> None:
    """Refuse a daemon command that does not run as the service manager starts it: without
    the shell's PYTHONPATH (`python -m memctl` from a checkout gives `python -m memoryd`),
    its `#!` interpreter gone (a venv moved or removed). The service failed at every start
    and install said nothing."""
    environment, _ = carried()
    home = paths.home()
    env = {"PATH": _SERVICE_PATH, "HOME": str(home), **environment}
    why: str | None = None
    try:
        done = subprocess.run(
            [*command, "--version"],
            env=env,
            cwd=home if home.is_dir() else "/",  # a user service's working directory
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except FileNotFoundError as exc:
        # The script is there and its `#!` interpreter is not (a venv moved or made afresh).
        gone = os.path.exists(command[0])
        why = f"{command[0]}: its #! interpreter is gone" if gone else f"{exc.filename}: not found"
    except OSError as exc:
        why = f"{exc.filename or command[0]}: {exc.strerror or exc}"
    except subprocess.TimeoutExpired:
        why = "it did not answer --version within 30 s"
    else:
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            why = lines[-1] if lines else f"exit {done.returncode}"
    if why is not None:
        report.refuse(
            f"the daemon command `{' '.join(command)}` does not start as the service manager "
            f"would start it (without your shell's PYTHONPATH and PATH): {why}; run `memctl "
            "service install` from an installed memoryd (`pipx install .`, or a checkout's "
            ".venv/bin)"
        )


def _refuse_without_session(report: Report, sock: Path) -> None:
    """Refuse install from a shell with no login session of the user (su, sudo -u): without
    a runtime folder of theirs `systemctl --user` cannot reach the user manager, and the
    socket rule gives a path in /tmp where the clients of a login session do not look. The
    units were written with it, then install failed. Only where systemctl is: without systemd
    the units are written for later."""
    why = _no_session()
    if why is None or _tool("systemd") is None:
        return
    user, own = _user_name(), user_runtime_dir()
    again = f"`XDG_RUNTIME_DIR={own} memctl service install`"
    if _user_manager_runs():
        # Lingering, or a login elsewhere: the user manager runs, and its folder is there.
        hint = f"its user manager runs: run {again}"
    else:
        hint = (
            f"log in as {user} (ssh, a desktop session, or `machinectl shell {user}@` from "
            f"another account) and run install there, or `loginctl enable-linger {user}` (its "
            f"user manager then runs without a login) and run {again}"
        )
    report.refuse(
        f"no login session of this user here ({why}: su or sudo -u?): systemd's user manager "
        f"cannot be reached, and the socket would be {sock}, where the clients of a login "
        f"session do not look; {hint}; nothing was written"
    )


def user_runtime_dir() -> Path:
    """The runtime folder logind gives the user while their user manager runs (a login
    anywhere, or lingering): its bus is there, whatever this shell's XDG_RUNTIME_DIR says."""
    return Path(f"/run/user/{os.getuid()}")


def _user_manager_runs() -> bool:
    """Whether this user's manager runs (its runtime folder is there), wherever they logged in."""
    own = user_runtime_dir()
    return own.is_dir() and paths.runtime_dir_problem(str(own)) is None


def _no_session() -> str | None:
    """Why this shell has no runtime folder of the user's (su, sudo -u), None when it has."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if not runtime:
        return "XDG_RUNTIME_DIR is not set"
    problem = paths.runtime_dir_problem(runtime)
    return None if problem is None else f"XDG_RUNTIME_DIR={runtime}: {problem}"


UNINSTALL_OFFLINE = "nothing runs to stop; the units are disabled on their files alone"
STATUS_OFFLINE = "nothing of theirs is active; whether a unit is enabled is read from its files"


def _systemd_reach(report: Report, offline: str = UNINSTALL_OFFLINE) -> bool:
    """Set `report.env` so that `systemctl --user` reaches this user's manager from a shell
    without a login session of theirs (su, sudo -u), where it reached none and uninstall
    stopped nothing (the links stayed, the socket unit kept listening): the user's own runtime
    folder when their manager runs (a login elsewhere, lingering), or, when none runs (so
    nothing of theirs is running to stop), systemctl on the unit files alone
    (`SYSTEMD_OFFLINE=1`, what that means said by `offline`). True for the latter: there is
    nothing to stop or reload."""
    why = _no_session()
    if why is None:
        return False
    own = user_runtime_dir()
    if _user_manager_runs():
        report.env = {"XDG_RUNTIME_DIR": str(own)}
        report.say(f"no login session of this user here ({why}); its user manager runs: {own}")
        return False
    report.env = {"SYSTEMD_OFFLINE": "1"}
    report.say(
        f"no login session of this user here ({why}) and no user manager of theirs runs (no "
        f"{own}): {offline}"
    )
    return True


def _user_name() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _pending_units(pending: Path, units: list[service_units.UnitFile]) -> set[str]:
    """The unit files an earlier run wrote but did not get into effect (its pending file names
    them; an empty one, from before it did, stands for all)."""
    text = _current(pending)
    if text is None:
        return set()
    names = {u.path.name for u in units}
    listed = set(text.split()) & names
    return listed or names


def _write_files(report: Report, units: list[service_units.UnitFile], pending: Path) -> set[str]:
    """Write the units that differ; the names of those that changed (would change, on a dry
    run), with those an earlier run left pending."""
    changed = [u for u in units if _current(u.path) != u.text]
    waiting = _pending_units(pending, units)
    if changed and not report.dry_run:
        # Before the files: whatever stops this run, the next one applies them.
        names = "".join(f"{n}\n" for n in sorted(waiting | {u.path.name for u in changed}))
        files.write_atomic(pending, names, 0o600, 0o700)
        # The unit folder's missing parents (~/.config of a fresh account) are private too:
        # write_atomic's mkdir gives the mode to the last folder only.
        make_private_dirs(units[0].path.parent)
    for unit in units:
        same = unit not in changed
        report.files.append({"path": str(unit.path), "changed": not same})
        if same:
            report.say(f"unchanged: {unit.path}")
        elif report.dry_run:
            report.say(f"would write: {unit.path}")
            report.say(unit.text.rstrip("\n"))
        else:
            files.write_atomic(unit.path, unit.text, 0o644)
            report.say(f"wrote: {unit.path}")
    return waiting | {u.path.name for u in changed}


def install(report: Report, manager: str, sock: Path) -> None:
    units = planned(manager, sock)
    command = service_units.daemon_command()
    report.say(f"daemon: {' '.join(command)}")
    _say_environment(report)
    _say_settings_left_behind(report, manager)
    _refusals(report, units, sock)
    if report.ok:
        _refuse_unrunnable(report, command)
    if not report.ok:
        return
    pending = _pending(manager)
    # A file written by an earlier run whose reload or restart failed still needs them.
    changed = _write_files(report, units, pending)
    apply = bool(changed)
    if manager == "launchd":
        if not report.dry_run:
            make_private_dirs(_launchd_logs())
            make_private_dirs(sock.parent)
    else:
        if not report.dry_run:
            make_private_dirs(paths.state_dir())
        _env_folder(report)
    tool = _tool(manager)
    if tool is None:
        report.ok = False
        report.say(_no_tool_hint(manager, report.dry_run))
        return
    if manager == "launchd":
        done = _launchd_start(report, tool, units[0].path, apply, sock)
    else:
        done = _systemd_start(report, tool, sock, changed)
    if done and not report.dry_run:
        pending.unlink(missing_ok=True)


def env_folder() -> Path:
    """The env file's folder: ~/.config/memoryd under HOME (whatever XDG_CONFIG_HOME says),
    as install's environment has it."""
    return paths.home() / ".config" / "memoryd"


def env_file() -> Path:
    """The file the service unit reads credentials from, named by its absolute path
    (`EnvironmentFile=-%h/…` was the password database's home, not HOME: with another HOME
    the unit read a file memctl never made, and the user's credentials were not seen)."""
    return env_folder() / "env"


def _env_folder(report: Report) -> None:
    """Create the env file's folder, 0700, so the documented `install -m 600 /dev/null
    ~/.config/memoryd/env` works on a fresh account (install(1) makes no folders)."""
    folder = env_folder()
    if folder.is_dir():
        return
    if report.dry_run:
        report.say(f"would create: {folder} (0700, for the env file)")
        return
    make_private_dirs(folder)
    report.say(f"created: {folder} (0700, for the env file)")


def _no_tool_hint(manager: str, dry_run: bool) -> str:
    written = "would be written" if dry_run else "are written"
    if manager == "launchd":
        return f"launchctl not found: the files {written}; load them on macOS with launchctl"
    return (
        f"systemctl not found: the units {written}; with systemd, run "
        "`systemctl --user daemon-reload && systemctl --user enable --now memoryd.socket`"
    )


def _systemd_start(report: Report, systemctl: str, sock: Path, changed: set[str]) -> bool:
    """Reload, hand the socket over, enable and (re)start; True when it is all in effect."""
    apply = bool(changed)
    user = [systemctl, "--user"]
    # Asking first tells whether the user manager can be reached at all (not over ssh without
    # a user bus, nor in most containers): nothing is stopped until it can.
    shown = report.query([*user, "show", "--property=NeedDaemonReload", "--value", "--", *UNITS])
    if shown.returncode != 0:
        report.failed(shown, "systemd's user manager cannot be reached; nothing was stopped")
        return False
    if (apply or "yes" in shown.stdout.split()) and report.run(
        [*user, "daemon-reload"]
    ).returncode != 0:
        return False
    active = report.query([*user, "is-active", "--quiet", "memoryd.socket"])
    if active.returncode not in (0, 3):  # 3: inactive; anything else: systemd did not say
        report.failed(active, "nothing was stopped")
        return False
    try:
        stopped = _hand_over(report, sock, "the socket unit") if active.returncode == 3 else None
    except _NotStopped:
        return False
    if report.run([*user, "enable", "--now", "memoryd.socket"]).returncode != 0:
        if stopped is not None:
            _restart_background(report, sock)
        return False
    if active.returncode == 0 and "memoryd.socket" in changed:
        # A listening socket unit keeps its old settings (its path) until restarted, and hands
        # that socket to every service it starts; the restart takes the service down with it
        # (Requires=), to start again, as changed, on the next connection.
        return report.run([*user, "restart", "memoryd.socket"]).returncode == 0 and _started(
            report, sock
        )
    if apply and report.run([*user, "try-restart", "memoryd.service"]).returncode != 0:
        # A running service keeps its old command line until restarted.
        return False
    return _started(report, sock)


def _started(report: Report, sock: Path) -> bool:
    report.say(
        f"memoryd {'would start' if report.dry_run else 'starts'} on the first connection to "
        f"{sock}; model and team credentials go in "
        f"{env_file()} (VAR=value lines, mode 0600), then "
        "`systemctl --user restart memoryd.service`"
    )
    return True


UNITS = service_units.SYSTEMD_UNITS


class _NotStopped(Exception):
    """The daemon holding the socket was stopped and is still running."""


def _hand_over(report: Report, sock: Path, taker: str) -> dict[str, Any] | None:
    """A daemon from `memctl start` holds the socket the service must serve: stop it (what it
    answered, for `_restart_background` when the service does not start), or say so on a dry
    run. Left running, the service's daemon could not take the socket."""
    # At its connection cap its pid is in its status file, and `lifecycle.stop` sends it
    # SIGTERM at once.
    running, refused = lifecycle.status_or_file(sock)
    if refused is not None and (running is None or not isinstance(running.get("pid"), int)):
        _say_unknown_pid(report, sock, taker, refused, "no status file names its pid")
        return None
    if running is None and refused is None:
        running = _silent_daemon(sock)
    if running is None:
        return None
    what = f"the background daemon (pid {running.get('pid')})"
    if report.dry_run:
        report.say(f"would stop {what} so {taker} can take over its socket")
        return None
    result = lifecycle.stop(sock)
    if result.get("refused") is not None:
        # Its status file's pid is another process's (a stale file): nothing was signalled.
        why = f"its status file's pid {result.get('status_pid')} is not the daemon's"
        _say_unknown_pid(report, sock, taker, result["refused"], why)
        return None
    if not result["stopped"] and result["pid"] is not None:
        # The whole wait, SIGTERM included: one draining its requests or hung is still there.
        # Said "stopped", and the service was started beside it.
        report.ok = False
        report.say(
            f"{what} is still running after SIGTERM (finishing its requests, or hung), so "
            f"{taker} cannot take over its socket: nothing was started; stop it "
            "(`memctl stop`) and run install again"
        )
        raise _NotStopped
    report.say(f"stopped {what} so {taker} can take over its socket")
    return running


def _silent_daemon(sock: Path) -> dict[str, Any] | None:
    """No `status` within its 2 s (a daemon slow under load, hung, or stopped): its status
    file, when the pid it names holds the socket. Taken for absent, the unit was enabled
    beside a daemon still holding the socket."""
    info = lifecycle.read_status_file(sock)
    pid = info.get("pid") if info else None
    return info if lifecycle.is_pid(pid) and lifecycle.serving_pid(sock, pid) else None


def _say_unknown_pid(report: Report, sock: Path, taker: str, refused: str, why: str) -> None:
    report.say(
        f"the daemon on {sock} refused memctl ({refused}) and {why}: stop it yourself so "
        f"{taker} can take over its socket"
    )


def _restart_background(report: Report, sock: Path) -> None:
    """The socket unit did not take over: the daemon stopped for it comes back."""
    try:
        started = lifecycle.start(sock)
    except (RuntimeError, TimeoutError) as exc:
        report.say(f"could not start the background daemon again: {exc}; run `memctl start`")
        return
    report.say(f"started the background daemon again (pid {started.get('pid')})")


def _launchd_start(report: Report, launchctl: str, plist: Path, apply: bool, sock: Path) -> bool:
    target = service_units.launchd_target()
    loaded = report.query([launchctl, "print", target]).returncode == 0
    if loaded and not apply:
        report.say(f"{service_units.LAUNCHD_LABEL} is already loaded")
        return True
    if loaded:
        report.run([launchctl, "bootout", target], check=False)
        stopped = None
    else:
        # The agent's daemon would exit 2 ("already serving") and KeepAlive would start it
        # again every 10 s for as long as a `memctl start` daemon held the socket.
        try:
            stopped = _hand_over(report, sock, "the LaunchAgent")
        except _NotStopped:
            return False
    if report.run([launchctl, "bootstrap", f"gui/{os.getuid()}", str(plist)]).returncode != 0:
        if stopped is not None:
            _restart_background(report, sock)
        return False
    return True


def uninstall(report: Report, manager: str, sock: Path) -> None:
    units = planned(manager, sock)
    present = [u for u in units if u.path.exists() or u.path.is_symlink()]
    if not present:
        report.say("not installed: no memoryd unit files in " + str(units[0].path.parent))
        return
    # Only units memctl wrote are stopped, disabled and removed; a unit of the user's own,
    # or a symlink, is left alone entirely.
    mine = [u for u in present if not u.path.is_symlink() and _ours(_current(u.path))]
    tool = _tool(manager)
    offline = False
    if mine and (tool is not None or report.dry_run):
        if manager == "launchd":
            report.run(
                [tool or "launchctl", "bootout", service_units.launchd_target()], check=False
            )
        else:
            names = [u.path.name for u in mine]
            offline = _systemd_reach(report)
            now = [] if offline else ["--now"]
            done = report.run(
                [tool or "systemctl", "--user", "disable", *now, *names], check=bool(report.env)
            )
            if done.returncode != 0 and report.env:
                # Reached from su or sudo -u and it failed: the units may still run there, and
                # without their files no `disable` could take them out. All is left as it was.
                report.say(
                    f"nothing was removed: run `memctl service uninstall` in a login session "
                    f"of {_user_name()} (ssh, a desktop session, or `machinectl shell "
                    f"{_user_name()}@` from another account)"
                )
                return
    if not report.dry_run:
        _pending(manager).unlink(missing_ok=True)
    for unit in present:
        if unit not in mine:
            report.say(f"left alone: {unit.path} (not written by memctl)")
            continue
        report.files.append({"path": str(unit.path), "removed": True})
        if report.dry_run:
            report.say(f"would remove: {unit.path}")
        else:
            unit.path.unlink()
            report.say(f"removed: {unit.path}")
    if mine and manager == "systemd" and not offline and (tool is not None or report.dry_run):
        report.run([tool or "systemctl", "--user", "daemon-reload"], check=False)


def status(report: Report, manager: str, sock: Path) -> None:
    # From su or sudo -u the units are those a login session wrote (`%t` its runtime folder),
    # and only the user's manager knows whether they are active: they were compared with
    # units for a socket in /tmp ("differs"), and systemctl reached no manager.
    away = manager == "systemd" and _no_session() is not None
    runtime = str(user_runtime_dir()) if away else None
    for unit in planned(manager, sock, runtime):
        current = _current(unit.path)
        if current is None:
            state = "missing"
        elif current == unit.text:
            state = "installed, up to date"
        elif _ours(current):
            state = "installed, differs from what install would write now"
        else:
            state = "present, not written by memctl"
        report.files.append({"path": str(unit.path), "state": state})
        report.say(f"{unit.path}: {state}")
    tool = _tool(manager)
    if tool is not None:
        if manager == "launchd":
            loaded = (
                report.run([tool, "print", service_units.launchd_target()], check=False).returncode
                == 0
            )
            report.say(f"{service_units.LAUNCHD_LABEL}: {'loaded' if loaded else 'not loaded'}")
        else:
            _systemd_status(report, tool)
    running, refused = lifecycle.status_or_file(sock)
    if refused is not None:
        # At its connection cap: the units' report above still stands (it ended in the error).
        report.say(f"daemon: running on {sock}, but it refused memctl: {refused}")
        return
    silent = None if running else _silent_daemon(sock)
    if silent is not None:
        # Said "not running" before: a daemon slow under load, hung or stopped holds the socket.
        report.say(
            f"daemon: pid {silent.get('pid')} holds {sock} but did not answer status "
            "within 2 s (hung, stopped, or slow under load?)"
        )
        return
    report.say(
        f"daemon: memoryd {running.get('version')} (pid {running.get('pid')}) on {sock}"
        if running
        else f"daemon: not running on {sock}"
    )
    skew = version_skew(running) if running else None
    if skew is not None:  # an upgrade in place changes no unit: the daemon needs the restart
        report.say(f"warning: {skew}")


def _systemd_status(report: Report, tool: str) -> None:
    """Each unit's is-enabled and is-active, asked of the user's manager (from a shell with no
    login session of the user, `_systemd_reach`'s way to it)."""
    running = not _systemd_reach(report, STATUS_OFFLINE)
    for name in service_units.SYSTEMD_UNITS:
        for verb in ("is-enabled", "is-active"):
            if verb == "is-active" and not running:
                # Offline systemctl ignores is-active ("Running in chroot"): no manager, so
                # nothing of the user's is active.
                report.say(f"{name} {verb}: inactive (no user manager of this user runs)")
                continue
            done = report.query([tool, "--user", verb, name])
            report.commands.append({"argv": done.args, "returncode": done.returncode})
            answer = (done.stdout or done.stderr).strip().splitlines()
            report.say(f"{name} {verb}: {answer[0] if answer else done.returncode}")


def run(args: argparse.Namespace) -> int:
    # First: the socket rule and every folder below read these.
    callers = _sudo_callers_folders()
    configured = os.environ.get("MEMORYD_SOCKET")
    if args.socket:
        sock = lifecycle.socket_path(args.socket)
    else:
        # The clients' one socket rule, for the system the service is for.
        if configured and not Path(configured).expanduser().is_absolute():
            # Each client would look for it from its own directory (the rule below makes it
            # absolute from memctl's), and systemd takes only an absolute ListenStream=.
            return fail(
                args,
                f"MEMORYD_SOCKET={configured} is a relative path: a login service needs an "
                "absolute one (set MEMORYD_SOCKET to one, or give --socket)",
                EXIT_USAGE,
            )
        # From su or sudo -u, status looks where the service listens, the user's runtime
        # folder, not where this shell's rule (no XDG_RUNTIME_DIR of theirs) would look;
        # MEMORYD_SOCKET still first (it was passed over, and installed units "differed").
        away = args.action == "status" and args.manager == "systemd" and _no_session() is not None
        sock = lifecycle.named_socket(
            default_socket_path(
                "darwin" if args.manager == "launchd" else "linux",
                runtime_dir=user_runtime_dir() if away else None,
            )
        )
    report = Report(dry_run=args.dry_run and args.action != "status")
    if callers is not None:
        report.say(callers)
    if args.action == "install" and args.manager == "systemd" and not (args.socket or configured):
        _refuse_without_session(report, sock)
    {"install": install, "uninstall": uninstall, "status": status}[args.action](
        report, args.manager, sock
    )
    emit(args, {"manager": args.manager, **report.as_dict()}, "\n".join(report.lines))
    return 0 if report.ok else report.exit_code
