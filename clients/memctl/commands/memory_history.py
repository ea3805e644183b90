"""`memctl memory-history PATH` and `memctl memory-restore PATH VERSION`: nothing is lost."""

from __future__ import annotations

import argparse
import os
from typing import Any

from memctl.output import EXIT_USAGE, client, emit, fail, one_line
from memctl.project_dir import add_cwd_argument, project_cwd
from memoryd_client.paths import utf8_argument


def register(sub: Any) -> None:
    history = sub.add_parser("memory-history", help="list earlier versions of a memory file")
    history.add_argument("path", help="the memory file (absolute, or relative to the memory dir)")
    add_cwd_argument(history)
    history.set_defaults(func=run_history)
    restore = sub.add_parser("memory-restore", help="put an earlier version of a memory file back")
    restore.add_argument("path", help="the memory file (absolute, or relative to the memory dir)")
    restore.add_argument("version", help="a version id from `memctl memory-history`")
    add_cwd_argument(restore)
    restore.set_defaults(func=run_restore)


def _path(args: argparse.Namespace) -> str:
    # A path the user typed relative to where they stand, if it exists there; else the
    # daemon reads it as relative to the memory dir.
    path = str(args.path)
    path = os.path.abspath(path) if os.path.exists(path) else path
    # Under an ASCII locale a UTF-8 name arrives as lone surrogates, which JSON cannot carry.
    sendable = utf8_argument(path)
    if sendable is None:
        raise SystemExit(fail(args, "the path is not valid UTF-8", EXIT_USAGE))
    return sendable


def run_history(args: argparse.Namespace) -> int:
    with client(args) as conn:
        result = conn.call("memory.history", {"cwd": project_cwd(args), "path": _path(args)})
    versions = result["versions"]
    lines = [f"{one_line(result['path'])}{'' if result['exists'] else ' (deleted)'}"]
    if not versions:
        lines.append("  no earlier versions")
    for v in versions:
        reason = one_line(str(v["reason"]))
        lines.append(f"  {v['version']}  {v['time']}  {v['size']:>8} bytes  {reason}")
    emit(args, result, "\n".join(lines))
    return 0


def run_restore(args: argparse.Namespace) -> int:
    with client(args) as conn:
        result = conn.call(
            "memory.restore",
            {"cwd": project_cwd(args), "path": _path(args), "version": args.version},
        )
    emit(args, result, f"restored {one_line(result['path'])} to {result['restored']}")
    return 0
