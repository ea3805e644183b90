"""`memctl call METHOD [JSON]`: any method, raw."""

from __future__ import annotations

import argparse
from typing import Any

from memctl.output import EXIT_RPC, EXIT_USAGE, client, emit, fail, older_daemon_hint
from memctl.text_input import read_text
from memoryd_client import RpcError
from memoryd_client.client import strict_json
from memoryd_client.known_methods import PARAMS
from memoryd_client.paths import utf8_argument


def register(sub: Any) -> None:
    parser = sub.add_parser("call", help="call any RPC method with JSON params")
    parser.add_argument("method")
    parser.add_argument(
        "params", nargs="?", help="a JSON object, or - to read it from standard input"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    method = utf8_argument(args.method)
    if method is None:
        # Sent escaped, the daemon read U+FFFD and answered "method not found: �".
        return fail(args, "the method is not valid UTF-8", EXIT_USAGE)
    params = None
    if args.params:
        # "-": standard input (params over the 128 KiB an argument may hold fit there)
        text = read_text(args.params)
        if text is None:
            return fail(args, "params is not valid UTF-8", EXIT_USAGE)
        try:
            # NaN, Infinity and 1e999 are no JSON: the daemon would answer -32700 about a
            # line the user never wrote.
            params = strict_json(text)
        except ValueError as exc:  # JSONDecodeError, NaN, Infinity, 1e999, nested too deep
            return fail(args, f"params is not valid JSON: {exc}", EXIT_USAGE)
        if not isinstance(params, dict):
            return fail(args, "params must be a JSON object", EXIT_USAGE)
    try:
        with client(args, any_result=True) as conn:
            result = conn.call(method, params)
    except RpcError as exc:
        # A method or parameter name is the user's own here, so "the daemon may be older" is
        # only added when this memctl's protocol has what the daemon said it has not.
        hint = older_daemon_hint(exc.code, exc.message)
        if hint and not _known_here(method, params or {}):
            hint = ""
        return fail(args, f"error {exc.code}: {exc.message}{hint}", EXIT_RPC, code=exc.code)
    emit(args, result)
    return 0


def _known_here(method: str, params: dict[str, Any]) -> bool:
    """Whether the daemon this memctl came with serves `method` and takes every field of
    `params` (memoryd_client's table of them: clients never import the daemon)."""
    fields = PARAMS.get(method)
    return fields is not None and set(params) <= fields
