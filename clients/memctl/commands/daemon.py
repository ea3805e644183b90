"""`memctl start | stop | restart | status`: the background daemon's lifecycle."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from memctl import lifecycle
from memctl.output import EXIT_DOWN, EXIT_RPC, EXIT_TIMEOUT, emit, fail, one_line, printable
from memoryd_client.client import not_a_socket, socket_path_too_long


def register(sub: Any) -> None:
    for name, func, text in (
        ("start", run_start, "start the daemon in the background (no-op if healthy)"),
        ("stop", run_stop, "ask the daemon to finish its work and exit"),
        ("restart", run_restart, "stop, then start"),
        ("status", run_status, "is the daemon running, and what does it serve"),
    ):
        # Said where a user of a hung daemon looks: the wait was a fixed 5 s named nowhere.
        answer = (
            f"{lifecycle.ANSWER_TIMEOUT_ENV}: seconds a daemon that accepts the connection gets "
            f"to answer before it is called hung (default {lifecycle.ANSWER_TIMEOUT_S:g}; above "
            "0, at most 600)"
        )
        parser = sub.add_parser(name, help=text, epilog=answer)
        if name in ("stop", "restart"):
            parser.add_argument(
                "--wait",
                type=_seconds,
                default=lifecycle.STOP_WAIT_S,
                metavar="SECONDS",
                help="how long the daemon gets to finish its work and exit before SIGTERM "
                f"(and {lifecycle.TERM_WAIT_S:.0f}s more); default {lifecycle.STOP_WAIT_S:.0f}",
            )
        parser.set_defaults(func=func)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):  # NaN fails this too
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 or more)")
    return value


def run_start(args: argparse.Namespace, stopped: dict[str, Any] | None = None) -> int:
    """`stopped`: what `restart` stopped first."""
    sock = lifecycle.socket_path(args.socket)
    try:
        result = lifecycle.start(sock)
    except RuntimeError as exc:
        return fail(args, str(exc), EXIT_DOWN)
    emit(args, result, f"memoryd {start_verb(result, stopped)} (pid {result.get('pid')}) on {sock}")
    return 0


def start_verb(result: dict[str, Any], stopped: dict[str, Any] | None) -> str:
    """What `start` (or `restart`, which `stopped` a daemon first) did, in words."""
    if result["started"]:
        return "started"
    if stopped is not None and result.get("pid") != stopped["pid"]:
        # A daemon stopped closes its socket at once: what answers now is a new one, started
        # by socket activation (systemd's memoryd.socket). "already running" read as if the
        # restart had done nothing; and with none running before, nothing was restarted.
        return f"{'restarted' if stopped['stopped'] else 'started'} by its service manager"
    return "already running"


def run_stop(args: argparse.Namespace) -> int:
    sock = lifecycle.socket_path(args.socket)
    result = lifecycle.stop(sock, wait_s=args.wait)
    if not result["stopped"]:
        return _not_stopped(args, sock, result)
    if result["pid"] is None:
        # Asked, but with no pid known to serve the socket there is no process to wait for.
        emit(args, result, f"memoryd on {sock} is stopping (its pid is unknown: not waited for)")
    else:
        emit(args, result, f"memoryd stopped (pid {result['pid']})" + _why_signalled(result))
    return 0


def _why_signalled(result: dict[str, Any]) -> str:
    if not result.get("suspended"):
        return ""
    return (
        ": its process was suspended (SIGSTOP, Ctrl-Z or a tracer) and could not answer a "
        "request, so it was sent SIGTERM and SIGCONT"
    )


def _not_stopped(args: argparse.Namespace, sock: Path, result: dict[str, Any]) -> int:
    pid = result["pid"]
    if result.get("refused") is not None:
        named = result.get("status_pid")
        why = (
            "no status file next to the socket"
            if named is None
            else f"the status file's pid {named} is not the process serving the socket"
        )
        return fail(
            args,
            f"memoryd is running on {sock} but refused memctl: {result['refused']}; "
            f"no pid known to stop it ({why})",
            EXIT_RPC,
        )
    if pid is None:
        return fail(args, _not_running(sock), EXIT_DOWN)
    # Still running after the shutdown request and SIGTERM: hung, or stuck finishing its work;
    # suspended, a tracer (which SIGCONT does not resume) holds it.
    held = lifecycle.tracer_pid(pid) if result.get("suspended") else None
    why = f"it is held by a tracer (pid {held})" if held is not None else "it may be hung"
    return fail(
        args,
        f"memoryd (pid {pid}) on {sock} did not stop within {result.get('waited_s', 0):.0f}s, "
        f"not even after SIGTERM; {why}: `kill -KILL {pid}` ends it",
        EXIT_TIMEOUT,
        pid=pid,
    )


def _not_running(sock: Path) -> str:
    other = not_a_socket(sock) or socket_path_too_long(sock)
    return f"memoryd is not running on {sock}" + (f": {other}" if other else "")


def run_restart(args: argparse.Namespace) -> int:
    sock = lifecycle.socket_path(args.socket)
    agent = lifecycle.launchd_job(sock)
    result = lifecycle.stop(sock, wait_s=args.wait)
    if not result["stopped"] and (result["pid"] is not None or "refused" in result):
        return _not_stopped(args, sock, result)  # a second daemon cannot take its socket
    if agent is not None:
        # The LaunchAgent's daemon: launchd starts it again, with the plist's environment (a
        # daemon of memctl's own would lack the credentials set there, and go unmanaged).
        try:
            status = lifecycle.kickstart(agent, sock, old_pid=result["pid"])
        except RuntimeError as exc:
            return fail(args, str(exc), EXIT_DOWN)
        emit(
            args,
            {"started": True, **status},
            f"memoryd restarted by launchd (pid {status.get('pid')}) on {sock}",
        )
        return 0
    return run_start(args, stopped=result)


def run_status(args: argparse.Namespace) -> int:
    sock = lifecycle.socket_path(args.socket)
    # A daemon that accepts but does not answer is hung, not absent: that is a timeout (exit 4).
    try:
        status = lifecycle.ask_status(sock, connect_retry_s=lifecycle.connect_retry_s(sock))
    except TimeoutError as exc:
        return fail(args, str(exc) + _why_silent(sock), EXIT_TIMEOUT)
    if status is None:
        return fail(args, _not_running(sock), EXIT_DOWN)
    emit(args, status, "\n".join(status_lines(status)))
    skew = version_skew(status)
    if skew is not None:  # on stderr: the report and its --json stay what scripts read
        sys.stderr.write(f"memctl: warning: {printable(skew)}\n")
    # 0 with problems listed too: `memctl start && memctl status` and scripts that ask whether
    # memoryd runs must not fail over a setup warning; `--json`'s `problems` is for scripts.
    return 0


def version_skew(status: dict[str, Any]) -> str | None:
    """What says the daemon runs other code than this memctl's installation, or None.
    After an upgrade the daemon that was running goes on with the old code until restarted;
    status printed its version alone, and the user had to compare it with `memctl --version`."""
    from memoryd_client.version import installed_version  # read only here: metadata is slow

    running, mine = status.get("version"), installed_version()
    if not isinstance(running, str) or running == mine:
        return None
    return (
        f"the running memoryd ({running}) differs from this memctl ({mine}): it was started "
        "before an upgrade, or from another installation; `memctl restart` runs this one"
    )


def _why_silent(sock: Path) -> str:
    """Why the daemon on `sock` did not answer, when its process says: stopped by a signal or
    held by a tracer. Its pid is the status file's, or with none (a daemon started by hand
    with its status file removed, or unwritable) the socket's listening peer; either only if
    it serves `sock`."""
    info = lifecycle.read_status_file(sock)
    named = info.get("pid") if info else None
    for pid in (named, lifecycle.listener_pid(sock)):
        if lifecycle.is_pid(pid) and lifecycle.suspended(pid) and lifecycle.serving_pid(sock, pid):
            tracer = lifecycle.tracer_pid(pid)
            if tracer is not None:  # SIGCONT does not resume a tracing stop: the tracer does
                return (
                    f": its process (pid {pid}) is held by a debugger or tracer (pid {tracer}); "
                    f"let it continue there, or end it, and memoryd runs on"
                )
            return (
                f": its process (pid {pid}) is stopped (SIGSTOP, or Ctrl-Z in its terminal); "
                f"`kill -CONT {pid}` resumes it, `memctl stop` ends it"
            )
    return ""


# The order `memctl status` prints features in, whatever order the daemon sends them; features
# a newer daemon adds come after these, sorted.
FEATURE_ORDER = (
    "model",
    "auto_memory",
    "instruction_files",
    "extraction",
    "session_memory",
    "magic_docs",
    "auto_dream",
    "team_sync",
)


def status_lines(status: dict[str, Any]) -> list[str]:
    """The human form of a `status` reply: each feature once, in `FEATURE_ORDER`.

    The model's reason is long and shared by every feature that needs a model, so it is said
    once, on the model line; those features then only say that they need one.
    """
    given_features = status.get("features")
    if not isinstance(given_features, dict):  # absent, or not the object the protocol has
        given_features = {}
    features = {k: v for k, v in given_features.items() if isinstance(v, dict)}
    given = status.get("model")
    model: dict[str, Any] = given if isinstance(given, dict) else {}
    model_reason = _text(model.get("reason")) or _text(features.get("model", {}).get("reason"))
    # Why a configured model's calls fail (a refused key, an unknown model); older daemons lack it.
    model_problem = _text(model.get("problem")) or _text(features.get("model", {}).get("problem"))
    # The protocol version is what an upgrade is checked by (docs/operations.md, Upgrade).
    protocol = status.get("protocol_version")
    lines = [
        f"memoryd {status.get('version')}"
        + (f", protocol {protocol}" if protocol is not None else "")
        + f" (pid {status.get('pid')}) on {status.get('socket')}",
        f"uptime {status.get('uptime_s')}s, {status.get('projects')} project(s), "
        f"{status.get('sessions')} session(s)",
    ]
    other = status.get("other_daemon")
    if isinstance(other, dict):  # two daemons of one user: clients split between them
        line = f"warning: another memoryd of this user (pid {other.get('pid')}) is running"
        if isinstance(other.get("socket"), str):
            socket = other["socket"]
            line += f" on {socket}; keep one: memctl --socket {shlex.quote(socket)} stop"
        lines.append(line)
    names = [n for n in FEATURE_ORDER if n in features or n == "model"]
    names += sorted(set(features) - set(FEATURE_ORDER))
    rows: list[tuple[str, str]] = []
    said = {model_reason, model_problem}  # what a line above says in full is not said twice
    for name in names:
        if name == "model":
            on = bool(model.get("configured", features.get("model", {}).get("enabled")))
            if not on:
                rows.append(("model", f"off — {one_line(model_reason)}" if model_reason else "off"))
            elif model_problem:
                rows.append(("model", f"configured — but {one_line(model_problem)}"))
            else:
                rows.append(("model", "configured"))
            continue
        feature = features[name]
        # A feature that is `available` (auto dream) is switched on per project in settings.
        word = "on" if "enabled" in feature else "available"
        on = bool(feature.get("enabled", feature.get("available")))
        reason = feature.get("reason")
        if on:
            state = word
            if feature.get("ranker"):  # auto memory: which recall ranker and why
                state += f"; recall {feature['ranker']}"
        elif reason and reason == model_reason:
            state = "off (needs a model)"
        else:
            state = f"off — {one_line(str(reason))}" if reason else "off"
            said.add(_text(reason))
        rows.append((name.replace("_", " "), state))
    lines.extend(f"{label}: {state}" for label, state in rows)
    left = [p for p in problems(status) if p not in said]
    lines.extend(f"problem: {one_line(p)}" for p in left[:MAX_PROBLEMS_SHOWN])
    if len(left) > MAX_PROBLEMS_SHOWN:
        # An env file of pasted shell lines is one problem a line: 30,000 of them flooded the
        # terminal and hid the rest of the report; --json keeps every one.
        more = len(left) - MAX_PROBLEMS_SHOWN
        lines.append(f"problem: … and {more:,} more (`memctl status --json` lists them all)")
    return lines


# The most `problem:` lines `memctl status` prints (the editors show as many).
MAX_PROBLEMS_SHOWN = 20


def problems(status: dict[str, Any]) -> list[str]:
    """`status.problems`, the setup's faults with their fixes; [] from a daemon older than
    the field (or a malformed one): nothing known is nothing said."""
    given = status.get("problems")
    if not isinstance(given, list):
        return []
    return [p for p in given if isinstance(p, str) and p]


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
