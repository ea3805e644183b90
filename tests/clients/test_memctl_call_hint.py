"""`memctl call`'s errors say "the running memoryd may be older than this memctl" only when that
can be true: the method, or every field of the params, is one this memctl's protocol has. A
typo'd method or a made-up field is the user's own mistake, reported plainly (it was told to
restart the daemon)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.clients.conftest import run_memctl
from tests.clients.fake_daemon import FakeDaemon, FakeError

OLDER = "may be older than this memctl"


def _recall(params: dict[str, Any]) -> dict[str, Any]:
    # As the daemon words it (dispatch.format_validation_error), for any field it does not take.
    extra = sorted(set(params) - {"cwd", "query"})
    if extra:
        raise FakeError(
            -32602,
            "invalid params: "
            + "; ".join(f"{name}: Extra inputs are not permitted" for name in extra),
        )
    return {"memories": [], "selector": "local"}


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("memory.lsit", "{}"),  # a typo: no memoryd ever served it
        ("recall", '{"cwd": "/tmp", "query": "q", "bogus": 1}'),  # a made-up field
        ("recall", '{"cwd": "/tmp", "query": "q", "explain": true, "bogus": 1}'),
    ],
)
def test_the_user_s_own_mistake_is_reported_plainly(
    fake_daemon: FakeDaemon, method: str, params: str
) -> None:
    fake_daemon.on("recall", _recall)
    sock = str(fake_daemon.socket_path)
    text = run_memctl("--socket", sock, "call", method, params)
    assert text.returncode == 1
    assert "error -326" in text.stderr
    assert OLDER not in text.stderr
    assert "memctl restart" not in text.stderr
    as_json = run_memctl("--socket", sock, "--json", "call", method, params)
    assert as_json.returncode == 1
    reply = json.loads(as_json.stdout)
    assert reply["code"] in (-32601, -32602)
    assert OLDER not in reply["error"]


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("memory.snapshot", '{"cwd": "/tmp", "path": "/tmp/m.md"}'),  # known here, not there
        ("recall", '{"cwd": "/tmp", "query": "q", "explain": true}'),  # a field added since
    ],
)
def test_what_this_memctl_knows_and_the_daemon_does_not_names_an_older_daemon(
    fake_daemon: FakeDaemon, method: str, params: str
) -> None:
    fake_daemon.on("recall", _recall)
    done = run_memctl("--socket", str(fake_daemon.socket_path), "call", method, params)
    assert done.returncode == 1
    assert OLDER in done.stderr
    assert "`memctl restart` runs the installed one" in done.stderr
