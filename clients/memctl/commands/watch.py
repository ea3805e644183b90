"""`memctl watch`: subscribe and print notifications as they arrive ("memory saved: x.md")."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from memctl.notifications import describe
from memctl.output import EXIT_DOWN, client, fail, json_text, one_line


def register(sub: Any) -> None:
    parser = sub.add_parser("watch", help="print daemon notifications as they arrive")
    parser.add_argument(
        "--event",
        dest="events",
        action="append",
        metavar="EVENT",
        help=(
            "only this event (repeatable), e.g. memory/saved; default: all but "
            "context/changed (an instruction file of a loaded project edited), named this way"
        ),
    )
    parser.add_argument(
        "--count", type=int, default=0, help="exit after this many notifications (default: never)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.count < 0:
        return fail(args, "--count must be 0 or more", 2)
    # No timeout: waiting for the next event is the whole point.
    with client(args, timeout=None) as conn:
        subscribed = conn.subscribe(args.events)
        if not args.json:
            events = ", ".join(subscribed.get("subscribed", []))
            sys.stderr.write(f"watching {one_line(events)} (Ctrl-C to stop)\n")
        seen = 0
        while args.count == 0 or seen < args.count:
            try:
                message = conn.next_notification()
            except ConnectionError as exc:
                # Its own words: closed, lost (and why), or a line that is not memoryd's.
                return fail(args, str(exc) or "memoryd closed the connection", EXIT_DOWN)
            line = json_text(message) if args.json else one_line(describe(message))
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
            seen += 1
    return 0
