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
from memctl.output import EXIT_RPC, emit
from memoryd_client import default_socket_path, paths


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

    def say(self, text: str) -> None:
        self.lines.append(text)

    def run(self, argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a service-manager command (or only show it, on a dry run)."""
        shown = " ".join(argv)
        if self.dry_run:
            self.say(f"would run: {shown}")
            self.commands.append({"argv": argv, "returncode": None})
            return subprocess.CompletedProcess(argv, 0, "", "")
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        self.commands.append({"argv": argv, "returncode": done.returncode})
        if done.returncode == 0 or not check:
            self.say(f"ran: {shown}")
        else:
            self.ok = False
            detail = (done.stderr or done.stdout).strip().splitlines()
            self.say(f"failed: {shown} (exit {done.returncode}): {' '.join(detail[-2:])}")
        return done

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "files": self.files, "commands": self.commands, "lines": self.lines}


def _systemd_unit_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME")
    return (Path(base) if base else paths.home() / ".config") / "systemd" / "user"


def _agents_dir() -> Path:
    return paths.home() / "Library" / "LaunchAgents"


def _launchd_logs() -> Path:
    return paths.home() / "Library" / "Logs" / "memoryd"


def _launchd_target() -> str:
    return f"gui/{os.getuid()}/{service_units.LAUNCHD_LABEL}"


def planned(manager: str, sock: Path) -> list[service_units.UnitFile]:
    command = service_units.daemon_command()
    if manager == "launchd":
        logs = _launchd_logs()
        plist = service_units.launchd_plist(
            _agents_dir(), command, sock, logs / "memoryd.log", logs / "memoryd.err"
        )
        return [plist]
    return service_units.systemd_units(
        _systemd_unit_dir(),
        command,
        sock,
        paths.state_dir() / "memoryd.log",
        os.environ.get("XDG_RUNTIME_DIR"),
    )


def _tool(manager: str) -> str | None:
    return shutil.which("launchctl" if manager == "launchd" else "systemctl")


def _write_files(report: Report, units: list[service_units.UnitFile]) -> bool:
    """Write the units that differ; True when any changed."""
    changed = False
    for unit in units:
        current = files.read_text(unit.path)
        same = current == unit.text
        report.files.append({"path": str(unit.path), "changed": not same})
        if report.dry_run:
            verb = "unchanged" if same else "would write"
            report.say(f"{verb}: {unit.path}")
            if not same:
                report.say(unit.text.rstrip("\n"))
            continue
        if same:
            report.say(f"unchanged: {unit.path}")
            continue
        if unit.path.is_symlink():
            report.ok = False
            report.say(f"refused: {unit.path} is a symlink; remove it and run install again")
            continue
        files.write_atomic(unit.path, unit.text, 0o644)
        report.say(f"wrote: {unit.path}")
        changed = True
    return changed


def install(report: Report, manager: str, sock: Path) -> None:
    units = planned(manager, sock)
    command = service_units.daemon_command()
    report.say(f"daemon: {' '.join(command)}")
    changed = _write_files(report, units)
    if not report.ok:
        return
    if manager == "launchd":
        if not report.dry_run:
            _launchd_logs().mkdir(parents=True, exist_ok=True, mode=0o700)
            sock.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    else:
        if not report.dry_run:
            paths.state_dir().mkdir(parents=True, exist_ok=True, mode=0o700)
    tool = _tool(manager)
    if tool is None and not report.dry_run:
        report.ok = False
        report.say(_no_tool_hint(manager))
        return
    if manager == "launchd":
        _launchd_start(report, tool or "launchctl", units[0].path, changed)
    else:
        _systemd_start(report, tool or "systemctl", sock, changed)


def _no_tool_hint(manager: str) -> str:
    if manager == "launchd":
        return "launchctl not found: the files are written; load them on macOS with launchctl"
    return (
        "systemctl not found: the units are written; with systemd, run "
        "`systemctl --user daemon-reload && systemctl --user enable --now memoryd.socket`"
    )


def _systemd_start(report: Report, systemctl: str, sock: Path, changed: bool) -> None:
    user = [systemctl, "--user"]
    if (changed or report.dry_run) and report.run([*user, "daemon-reload"]).returncode != 0:
        return
    active = subprocess.CompletedProcess([], 1)
    if not report.dry_run:
        active = subprocess.run(
            [*user, "is-active", "--quiet", "memoryd.socket"], check=False, timeout=30
        )
    if active.returncode != 0 and not report.dry_run:
        # A daemon from `memctl start` holds the socket the unit must listen on: hand it over.
        running = lifecycle.query_status(sock, timeout=2.0)
        if running is not None:
            lifecycle.stop(sock)
            report.say(
                f"stopped the background daemon (pid {running.get('pid')}) so the socket unit "
                "can take over its socket"
            )
    if report.run([*user, "enable", "--now", "memoryd.socket"]).returncode != 0:
        return
    if changed:
        # A running service keeps its old command line until restarted.
        report.run([*user, "try-restart", "memoryd.service"])
    report.say(
        f"memoryd {'would start' if report.dry_run else 'starts'} on the first connection to "
        f"{sock}; model and team credentials go in "
        f"~/.config/memoryd/env (VAR=value lines, mode 0600), then "
        "`systemctl --user restart memoryd.service`"
    )


def _launchd_start(report: Report, launchctl: str, plist: Path, changed: bool) -> None:
    target = _launchd_target()
    loaded = False
    if not report.dry_run:
        loaded = (
            subprocess.run(
                [launchctl, "print", target], capture_output=True, check=False, timeout=30
            ).returncode
            == 0
        )
    if loaded and not changed:
        report.say(f"{service_units.LAUNCHD_LABEL} is already loaded")
        return
    if loaded:
        report.run([launchctl, "bootout", target], check=False)
    report.run([launchctl, "bootstrap", f"gui/{os.getuid()}", str(plist)])


def uninstall(report: Report, manager: str, sock: Path) -> None:
    units = planned(manager, sock)
    present = [u for u in units if u.path.exists() or u.path.is_symlink()]
    if not present:
        report.say("not installed: no memoryd unit files in " + str(units[0].path.parent))
        return
    tool = _tool(manager)
    if tool is not None or report.dry_run:
        if manager == "launchd":
            report.run([tool or "launchctl", "bootout", _launchd_target()], check=False)
        else:
            names = [u.path.name for u in present]
            report.run([tool or "systemctl", "--user", "disable", "--now", *names], check=False)
    for unit in present:
        text = files.read_text(unit.path) if not unit.path.is_symlink() else None
        if text is None or service_units.MARKER not in text[:300]:
            report.say(f"left alone: {unit.path} (not written by memctl)")
            continue
        report.files.append({"path": str(unit.path), "removed": True})
        if report.dry_run:
            report.say(f"would remove: {unit.path}")
        else:
            unit.path.unlink()
            report.say(f"removed: {unit.path}")
    if manager == "systemd" and (tool is not None or report.dry_run):
        report.run([tool or "systemctl", "--user", "daemon-reload"], check=False)


def status(report: Report, manager: str, sock: Path) -> None:
    for unit in planned(manager, sock):
        current = files.read_text(unit.path)
        if current is None:
            state = "missing"
        elif current == unit.text:
            state = "installed, up to date"
        elif service_units.MARKER in current[:300]:
            state = "installed, differs from what install would write now"
        else:
            state = "present, not written by memctl"
        report.files.append({"path": str(unit.path), "state": state})
        report.say(f"{unit.path}: {state}")
    tool = _tool(manager)
    if tool is not None:
        if manager == "launchd":
            loaded = report.run([tool, "print", _launchd_target()], check=False).returncode == 0
            report.say(f"{service_units.LAUNCHD_LABEL}: {'loaded' if loaded else 'not loaded'}")
        else:
            for name in service_units.SYSTEMD_UNITS:
                for verb in ("is-enabled", "is-active"):
                    done = subprocess.run(
                        [tool, "--user", verb, name],
                        capture_output=True,
                        text=True,
                        check=False,
                        timeout=30,
                    )
                    report.commands.append(
                        {"argv": [tool, "--user", verb, name], "returncode": done.returncode}
                    )
                    answer = (done.stdout or done.stderr).strip().splitlines()
                    report.say(f"{name} {verb}: {answer[0] if answer else done.returncode}")
    running = lifecycle.query_status(sock, timeout=2.0)
    report.say(
        f"daemon: memoryd {running.get('version')} (pid {running.get('pid')}) on {sock}"
        if running
        else f"daemon: not running on {sock}"
    )


def run(args: argparse.Namespace) -> int:
    if args.socket:
        sock = lifecycle.socket_path(args.socket)
    else:
        # The clients' one socket rule, for the system the service is for.
        sock = default_socket_path("darwin" if args.manager == "launchd" else "linux")
    report = Report(dry_run=args.dry_run and args.action != "status")
    {"install": install, "uninstall": uninstall, "status": status}[args.action](
        report, args.manager, sock
    )
    emit(args, {"manager": args.manager, **report.as_dict()}, "\n".join(report.lines))
    return 0 if report.ok else EXIT_RPC
