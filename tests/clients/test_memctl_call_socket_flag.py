"""`--socket ""` is bad usage (exit 2), before or after the command: as a path it was ".", the
current folder, and memctl answered that memoryd was not running there (exit 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clients.conftest import run_memctl


@pytest.mark.parametrize(
    "argv",
    [
        ["--socket", "", "status"],
        ["--socket=", "status"],
        ["status", "--socket", ""],
        ["--json", "call", "status", "--socket", ""],
    ],
)
def test_an_empty_socket_path_is_refused(argv: list[str]) -> None:
    done = run_memctl(*argv)
    assert done.returncode == 2, done.stdout + done.stderr
    # With --json the usage error is JSON on stdout (session 21), else argparse's on stderr.
    said = json.loads(done.stdout)["error"] if "--json" in argv else done.stderr
    assert "--socket: an empty path" in said
    assert "not running" not in done.stderr + done.stdout


def test_a_socket_path_is_still_taken(short_tmp: Path) -> None:
    done = run_memctl("--json", "status", "--socket", f"{short_tmp}/absent.sock")
    assert done.returncode == 3
    assert json.loads(done.stdout)["exit_code"] == 3
