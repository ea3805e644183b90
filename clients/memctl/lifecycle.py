"""Finding, starting and stopping the background daemon through its status file."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

from memoryd_client import (
    Client,
    DaemonUnavailable,
    RpcError,
    UntrustedSocket,
    default_socket_path,
    paths,
)
from memoryd_client.private_dirs import make_private_dirs
from memoryd_client.private_files import UnsafeFolder, open_private_log

# The daemon's answer to a client past its connection cap (docs/protocol.md, -32004).
BUSY = -32004


def socket_path(arg: Path | None) -> Path:
    if not arg:
        return default_socket_path()
    try:
        return Path(paths.expand_home(str(arg))).absolute()
    except FileNotFoundError:  # os.getcwd() of a deleted folder: it was a traceback
        raise DaemonUnavailable(
            f"the working directory no longer exists, so a relative --socket ({arg}) cannot "
            "be resolved: make it absolute, or run from a folder that exists"
        ) from None


def status_file(sock: Path) -> Path:
    return sock.with_name(sock.name + ".status.json")


def read_status_file(sock: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(status_file(sock).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Has it exited, only not been reaped yet by its parent (Linux; elsewhere: no)?"""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return False
    # The state follows the command name in parentheses, which may itself hold ") ".
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] == b"Z"


def query_status(sock: Path, timeout: float = 5.0) -> dict[str, Any] | None:
    """The daemon's `status`, or None when nobody healthy answers (a hung daemon included)."""
    try:
        return ask_status(sock, timeout)
    except TimeoutError:
        return None


def ask_status(sock: Path, timeout: float = 5.0) -> dict[str, Any] | None:
    """The daemon's `status`; None when nobody listens or the reply is unusable; TimeoutError
    when something accepts the connection but does not answer (a hung daemon is not absent);
    UntrustedSocket when another user's program listens there (nothing to start next to it)."""
    try:
        with Client(sock, timeout=timeout) as conn:
            result = conn.call("status")
    except (TimeoutError, UntrustedSocket):
        raise
    except RpcError as exc:
        if exc.code == BUSY:
            # A daemon at its connection cap is running: say its reason, start no second one.
            raise
        return None
    except (DaemonUnavailable, OSError, ValueError):
        return None
    return result if isinstance(result, dict) else None


def start(sock: Path, wait_s: float = 15.0, extra_args: list[str] | None = None) -> dict[str, Any]:
    """Start a background daemon unless a healthy one answers. Returns its status."""
    running = query_status(sock)
    if running is not None:
        return {"started": False, **running}
    log_file = sock.with_name("memoryd.log")
    try:
        make_private_dirs(sock.parent)
        log_fd = open_private_log(log_file)  # checks the folder before anything is written
    except UnsafeFolder as exc:
        # Another user who made the /tmp/memoryd-<uid> fallback first could have put
        # `memoryd.log` there as a link to a file of yours: that is no socket folder either.
        raise UntrustedSocket(
            f"refusing to start memoryd at {sock}: {exc.problem}; set MEMORYD_SOCKET or "
            "XDG_RUNTIME_DIR to a folder of your own"
        ) from exc
    except OSError as exc:
        raise RuntimeError(f"cannot start memoryd at {sock}: {exc.strerror or exc}") from exc
    command = [
        os.environ.get("MEMORYD_PYTHON", sys.executable),
        "-m",
        "memoryd",
        "--socket",
        str(sock),
        "--log-file",
        str(log_file),
        *(extra_args or []),
    ]
    import subprocess  # only `start` spawns; the other commands stay quick to import

    with open(os.devnull, "rb") as devnull_in, open(log_fd, "ab") as err:
        process = subprocess.Popen(
            command, stdin=devnull_in, stdout=err, stderr=err, start_new_session=True
        )
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        status = query_status(sock, timeout=2.0)
        if status is not None:
            return {"started": True, **status}
        code = process.poll()
        if code is not None:
            why = _last_logged_event(log_file)
            raise RuntimeError(
                f"memoryd exited with code {code} during start-up"
                + (f": {why}" if why else "")
                + f"; see {log_file}"
            )
        time.sleep(0.05)
    raise TimeoutError(f"memoryd did not become healthy within {wait_s:.0f}s; see {log_file}")


def _last_logged_event(log_file: Path) -> str | None:
    """The daemon's one-line reason for stopping: the last JSON log line's event."""
    import json

    try:
        with open(log_file, "rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - 4096))
            lines = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            event = json.loads(line).get("event")
        except (ValueError, AttributeError):
            continue
        if isinstance(event, str):
            return event
    return None


_LAUNCHD_PID = re.compile(r"^\s*pid = (\d+)\s*$", re.MULTILINE)


def launchd_job(sock: Path) -> list[str] | None:
    """`[launchctl, gui/<uid>/<label>]` when the daemon answering on `sock` is the process of
    memoryd's LaunchAgent (launchd says so, by its pid), else None."""
    import shutil

    launchctl = shutil.which("launchctl")
    if launchctl is None:
        return None
    try:
        running = query_status(sock, timeout=2.0)
    except RpcError as exc:
        if exc.code != BUSY:
            raise
        # At its connection cap it answers only why: its pid is in its status file (`restart`
        # ended in the -32004 here, before stopping anything).
        running = read_status_file(sock)
    if running is None:
        return None
    import subprocess

    from memctl.service_units import launchd_target  # `memctl service install`'s agent

    target = launchd_target()
    try:
        shown = subprocess.run(
            [launchctl, "print", target], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = _LAUNCHD_PID.search(shown.stdout) if shown.returncode == 0 else None
    if found is None or int(found.group(1)) != running.get("pid"):
        return None
    return [launchctl, target]


def kickstart(
    job: list[str], sock: Path, old_pid: int | None, wait_s: float = 15.0
) -> dict[str, Any]:
    """Have launchd start the job again (it does not restart a clean exit) and wait for it."""
    import subprocess

    launchctl, target = job
    done = subprocess.run(
        [launchctl, "kickstart", target], capture_output=True, text=True, timeout=30, check=False
    )
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip()
        raise RuntimeError(
            f"memoryd stopped, but `launchctl kickstart {target}` failed"
            + (f": {why}" if why else "")
        )
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        status = query_status(sock, timeout=2.0)
        if status is not None and status.get("pid") != old_pid:
            return status
        time.sleep(0.05)
    raise RuntimeError(f"launchd did not start memoryd again within {wait_s:.0f}s on {sock}")


def stop(sock: Path, wait_s: float = 30.0, term_wait_s: float = 5.0) -> dict[str, Any]:
    """Ask the daemon to shut down; one still running after `wait_s` gets SIGTERM and
    `term_wait_s` more. `stopped` is whether its process is gone (a hung daemon is not).
    `refused` (its reason) when it is at its connection cap and no status file names its pid."""
    started = time.monotonic()
    info = read_status_file(sock)
    pid = int(info["pid"]) if info and isinstance(info.get("pid"), int) else None
    asked = False
    reachable = False
    refused: str | None = None
    try:
        with Client(sock, timeout=5.0) as conn:
            reachable = True  # something listens: a daemon, if perhaps a hung one
            conn.call("shutdown")
            asked = True
    except UntrustedSocket:
        raise
    except RpcError as exc:
        if exc.code == BUSY:
            wait_s = 0.0  # at its connection cap it cannot take the request: SIGTERM at once
            refused = exc.message
    except (DaemonUnavailable, TimeoutError, OSError):
        pass
    if pid is None and refused is not None:
        # Running (it said why it refused), but with no status file there is no pid to signal.
        return {"stopped": False, "pid": None, "refused": refused}
    if pid is None or not reachable:
        # Nobody listens, so the status file is stale (the daemon died without removing it)
        # and its pid may belong to an unrelated process by now: never signal it.
        return {"stopped": asked, "pid": None}
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and pid_alive(pid):
        time.sleep(0.05)
    if pid_alive(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + term_wait_s
        while time.monotonic() < deadline and pid_alive(pid):
            time.sleep(0.05)
    # Not `asked`: a daemon that answered "shutting down" and then hung is still running.
    waited = round(time.monotonic() - started, 1)
    return {"stopped": not pid_alive(pid), "pid": pid, "waited_s": waited}
