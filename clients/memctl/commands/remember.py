"""`memctl remember "text" [--type T] [--name TITLE] [--team] [--cwd DIR]`: quick-add one memory.

Without a model the daemon guesses the type from cue words (a URL or "lives at" → reference,
"we decided" / "deadline" / "by Friday" → project, "don't" / "always" / "prefer" → feedback,
"I" / "my" → user, else project) and names the memory with a short title of the text's
meaningful words.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from memctl.output import EXIT_USAGE, client, emit, fail, one_line, printable
from memctl.project_dir import add_cwd_argument, project_cwd
from memctl.text_input import required_text

TYPES = ("user", "feedback", "project", "reference")


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "remember",
        help="save a memory from one line of text (type and title guessed, by a model when configured)",
    )
    parser.add_argument("text", help="what to remember ('-' reads standard input)")
    parser.add_argument(
        "--type",
        choices=TYPES,
        help="the memory type (default: the model's choice, else guessed from the text)",
    )
    parser.add_argument("--name", help="the memory's title (default: made from the text)")
    parser.add_argument("--team", action="store_true", help="save it in the shared team memory")
    add_cwd_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    text, problem = required_text(args.text, "the text", "remember")
    if problem:
        return fail(args, problem, EXIT_USAGE)
    params: dict[str, Any] = {"cwd": project_cwd(args), "text": text}
    if args.type:
        params["type"] = args.type
    if args.name and args.name.strip():
        params["name"] = args.name.strip()
    if args.team:
        params["team"] = True
    with client(args, timeout=60.0) as conn:
        result = conn.call("memory.remember", params)
    if result.get("merged_into"):
        verb = "updated (near duplicate)"
    else:
        verb = "saved" if result.get("created") else "updated"
    # A near duplicate is merged into a file already there, whose name anyone with the folder
    # may have chosen ("x\nsaved [user] …"): each field stays on the one line.
    fields = (one_line(str(result[k])) for k in ("type", "name", "path"))
    emit(args, result, "{} [{}] {}: {}".format(verb, *fields))
    if not args.json:
        for warning in result.get("warnings") or []:
            sys.stderr.write(f"memctl: warning: {printable(str(warning))}\n")
    return 0
