"""`memctl start | stop | restart | status`: the background daemon's lifecycle."""

from __future__ import annotations

import argparse
from typing import Any

from memctl import lifecycle
from memctl.output import EXIT_DOWN, emit, fail


def register(sub: Any) -> None:
    for name, func, text in (
        ("start", run_start, "start the daemon in the background (no-op if healthy)"),
        ("stop", run_stop, "ask the daemon to finish its work and exit"),
        ("restart", run_restart, "stop, then start"),
        ("status", run_status, "is the daemon running, and what does it serve"),
    ):
        parser = sub.add_parser(name, help=text)
        parser.set_defaults(func=func)


def run_start(args: argparse.Namespace) -> int:
    sock = lifecycle.socket_path(args.socket)
    try:
        result = lifecycle.start(sock)
    except RuntimeError as exc:
        return fail(args, str(exc), EXIT_DOWN)
    verb = "started" if result["started"] else "already running"
    emit(args, result, f"memoryd {verb} (pid {result.get('pid')}) on {sock}")
    return 0


def run_stop(args: argparse.Namespace) -> int:
    sock = lifecycle.socket_path(args.socket)
    result = lifecycle.stop(sock)
    if not result["stopped"] and result["pid"] is None:
        return fail(args, f"memoryd is not running on {sock}", EXIT_DOWN)
    emit(args, result, f"memoryd stopped (pid {result['pid']})")
    return 0


def run_restart(args: argparse.Namespace) -> int:
    sock = lifecycle.socket_path(args.socket)
    lifecycle.stop(sock)
    return run_start(args)


def run_status(args: argparse.Namespace) -> int:
    sock = lifecycle.socket_path(args.socket)
    status = lifecycle.query_status(sock)
    if status is None:
        return fail(args, f"memoryd is not running on {sock}", EXIT_DOWN)
    model = status.get("model", {})
    lines = [
        f"memoryd {status.get('version')} (pid {status.get('pid')}) on {status.get('socket')}",
        f"uptime {status.get('uptime_s')}s, {status.get('projects')} project(s), "
        f"{status.get('sessions')} session(s)",
        "model: " + ("configured" if model.get("configured") else f"off — {model.get('reason')}"),
    ]
    for name, feature in sorted(status.get("features", {}).items()):
        if isinstance(feature, dict):
            state = "on" if feature.get("enabled") else f"off — {feature.get('reason')}"
            lines.append(f"{name}: {state}")
    emit(args, status, "\n".join(lines))
    return 0
