"""`memctl call` given what it cannot send: a method name that is not UTF-8 (it went out
escaped, and the daemon answered "method not found: �"), and params nested deeper than Python
reads (a RecursionError traceback, exit 1). Both are usage errors now, refused before
anything reaches the daemon, as params that are not JSON are."""

from __future__ import annotations

import json

import pytest

from tests.clients.conftest import run_memctl
from tests.clients.fake_daemon import FakeDaemon


@pytest.mark.parametrize("flags", [[], ["--json"]])
def test_a_method_name_that_is_not_utf8_is_refused(
    fake_daemon: FakeDaemon, flags: list[str]
) -> None:
    # "\udcff": the byte 0xff as the argument reaches Python (and goes out to the child).
    done = run_memctl("--socket", str(fake_daemon.socket_path), *flags, "call", "st\udcffatus")
    assert done.returncode == 2, done.stdout + done.stderr
    said = json.loads(done.stdout)["error"] if flags else done.stderr
    assert "the method is not valid UTF-8" in said
    assert fake_daemon.requests == []


@pytest.mark.parametrize("params", ["[" * 5000 + "]" * 5000, '{"a":' * 5000 + "1" + "}" * 5000])
def test_params_nested_deeper_than_python_reads_are_refused(
    fake_daemon: FakeDaemon, params: str
) -> None:
    done = run_memctl("--socket", str(fake_daemon.socket_path), "call", "status", "-", stdin=params)
    assert done.returncode == 2, done.stderr
    assert (
        done.stderr == "memctl: params is not valid JSON: it is nested deeper than Python reads\n"
    )
    assert fake_daemon.requests == []


def test_strict_json_says_too_deep_as_a_value_error() -> None:
    # Session 24: json's RecursionError came out of strict_json, and memctl call and
    # parse_reply each caught it on their own; one ValueError now, as for NaN.
    from memoryd_client.client import strict_json

    with pytest.raises(ValueError, match="nested deeper than Python reads"):
        strict_json("[" * 100_000)
