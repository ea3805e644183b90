"""`memctl includes approve|revoke|list [--cwd DIR]`: external includes, per project.

An instruction file of a project may include files outside the project only once the
user approved it here; the approval is kept in memoryd's per-user state, never in the
repository.
"""

from __future__ import annotations

import argparse
from typing import Any

from memctl.output import client, emit, one_line
from memctl.project_dir import add_cwd_argument, project_cwd


def register(sub: Any) -> None:
    parser = sub.add_parser("includes", help="approve or revoke @includes from outside a project")
    actions = parser.add_subparsers(dest="includes_action", metavar="ACTION", required=True)
    for name, help_text in (
        ("approve", "allow this project's instruction files to include files outside it"),
        ("revoke", "withdraw that approval"),
        ("list", "show approvals and the external includes refused for a project"),
    ):
        action = actions.add_parser(name, help=help_text)
        add_cwd_argument(action, "a folder of the project (default: the current one)")
        action.set_defaults(func=run, includes_action=name)


def run(args: argparse.Namespace) -> int:
    action = args.includes_action
    if action == "list":
        params = {"cwd": project_cwd(args)} if args.cwd else {}
        with client(args) as conn:
            result = conn.call("includes.list", params)
        emit(args, result, _list_text(result))
        return 0
    with client(args) as conn:
        result = conn.call(f"includes.{action}", {"cwd": project_cwd(args)})
    # A folder's name may hold a line break: one line, as every command shows a path.
    root = one_line(str(result["project_root"]))
    if action == "approve":
        text = f"approved external includes for {root}"
    elif result.get("removed"):
        text = f"revoked external includes for {root}"
    else:
        text = f"{root} had no approval; nothing to revoke"
    emit(args, result, text)
    return 0


def _list_text(result: dict[str, Any]) -> str:
    lines: list[str] = []
    if "project_root" in result:
        state = "approved" if result.get("approved") else "not approved"
        lines.append(f"{one_line(str(result['project_root']))}: external includes {state}")
        for item in result.get("external", []):
            # Paths a cloned repository chose: one line each.
            lines.append(f"  refused {one_line(item['path'])} (from {one_line(item['parent'])})")
    approvals = result.get("approvals", [])
    if approvals:
        lines.append("approved projects:")
        lines.extend(
            f"  {one_line(str(a['project_root']))}  (since {one_line(str(a['approved_at']))})"
            for a in approvals
        )
    elif "project_root" not in result:
        lines.append("no project has approved external includes")
    return "\n".join(lines)
