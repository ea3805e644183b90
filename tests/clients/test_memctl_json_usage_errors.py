"""`--json` usage errors are JSON on stdout, exit 2 (session 21: argparse's usage text went to
stderr only, and a script parsing stdout had nothing to read)."""

from __future__ import annotations

import json

import pytest

from tests.clients.conftest import run_memctl


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--json", "bogus"], "memctl: argument COMMAND: invalid choice: 'bogus'"),
        (["status", "--json", "--wait", "1"], "memctl: unrecognized arguments: --wait 1"),
        (["--json", "stop", "--wait", "nan"], "memctl stop: argument --wait: 'nan' is not"),
        (["memory-history", "--json"], "memctl memory-history: the following arguments"),
        (["--json"], "memctl: the following arguments are required: COMMAND"),
    ],
)
def test_a_usage_error_under_json_is_json(argv: list[str], said: str) -> None:
    done = run_memctl(*argv)
    assert done.returncode == 2
    reply = json.loads(done.stdout)
    assert reply["exit_code"] == 2
    assert reply["error"].startswith(said)


def test_without_json_it_is_argparses_usage_text() -> None:
    done = run_memctl("bogus")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("usage: memctl")
    # A `--json` after `--` is a value, not the flag: the usage error (a third positional)
    # stays argparse's. `call -- --json` alone made no usage error, so it could not tell.
    done = run_memctl("call", "--", "--json", "{}", "extra")
    assert done.returncode == 2
    assert done.stdout == ""
