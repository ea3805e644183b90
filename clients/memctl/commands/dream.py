"""`memctl dream [--cwd DIR] [--no-wait]`: consolidate a project's auto memory now."""

from __future__ import annotations

import argparse
from typing import Any

from memctl.output import EXIT_OK, EXIT_RPC, client, emit, one_line
from memctl.project_dir import add_cwd_argument, project_cwd

# A dream runs several model turns; give it room before the client gives up.
DREAM_TIMEOUT_S = 600.0


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "dream", help="consolidate auto memory now: merge duplicates, retire, fix the index"
    )
    add_cwd_argument(parser)
    parser.add_argument(
        "--no-wait", action="store_true", help="start it in the background and return"
    )
    parser.set_defaults(func=run)


def describe(result: dict[str, Any]) -> str:
    if not result.get("stop_reason"):
        return f"dream started for {result.get('project')}"
    if result["stop_reason"] == "nothing_to_do":
        return f"nothing to consolidate in {result.get('memory_dir')} ({result.get('memories')} memories)"
    lines = [f"dream of {result.get('memory_dir')}: {result['stop_reason']}"]
    lines += [f"  edited  {one_line(path)}" for path in result.get("edited", [])]
    lines += [f"  retired {one_line(path)} (kept in history)" for path in result.get("retired", [])]
    if result.get("summary"):
        lines.append(f"  {result['summary']}")
    if result.get("error"):
        lines.append(f"  error: {result['error']}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    cwd = project_cwd(args)
    with client(args, timeout=DREAM_TIMEOUT_S) as conn:
        result = conn.call("memory.dream", {"cwd": cwd, "wait": not args.no_wait})
    emit(args, result, describe(result))
    # A run that failed or that the model refused is an error the daemon answered with: a
    # script (cron, CI) must not read it as done.
    return EXIT_RPC if result.get("stop_reason") == "error" else EXIT_OK
