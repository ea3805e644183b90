"""`memctl call METHOD [JSON]`: any method, raw."""

from __future__ import annotations

import argparse
import json
from typing import Any

from memctl.output import EXIT_USAGE, client, emit, fail
from memctl.text_input import is_utf8


def register(sub: Any) -> None:
    parser = sub.add_parser("call", help="call any RPC method with JSON params")
    parser.add_argument("method")
    parser.add_argument("params", nargs="?", help="a JSON object (default: none)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    params = None
    if args.params:
        if not is_utf8(args.params):  # never standard input: "-" is not JSON
            return fail(args, "params is not valid UTF-8", EXIT_USAGE)
        try:
            params = json.loads(args.params)
        except json.JSONDecodeError as exc:
            return fail(args, f"params is not valid JSON: {exc}", EXIT_USAGE)
        if not isinstance(params, dict):
            return fail(args, "params must be a JSON object", EXIT_USAGE)
    with client(args) as conn:
        result = conn.call(args.method, params)
    emit(args, result)
    return 0
