"""Auto memory's write paths: quick-add's cost, the index's lines, files memoryd did not write."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from memoryd_client import RpcError
from tests.conftest import DaemonHandle
from tests.fakes.messages_api import FakeMessagesAPI, json_reply


def test_host_guess_is_linear_on_long_dotted_and_hyphenated_runs() -> None:
    from memoryd.automem import quickadd, quickguess

    for run in ("db-" * 12000, "db." * 30000, "a" * 60000 + ".x"):
        started = time.perf_counter()
        quickguess.guess_type("Remember this build id: " + run)
        quickadd.derive("Remember this build id: " + run, None)
        assert time.perf_counter() - started < 0.5, run[:9]
    # The suffix still makes a reference, wherever the host name starts.
    for text in ("see grafana.example.com/x", "db.internal:5432", "-db.com", "x.db-1.corp"):
        assert quickguess.guess_type(text) == "reference", text
    for text in ("the company", "foo_db.com", ".com is a suffix"):
        assert quickguess.guess_type(text) != "reference", text


async def test_remember_of_a_long_run_leaves_the_daemon_answering(
    daemon: DaemonHandle, project: Path
) -> None:
    text = "Remember this build id: " + "db-" * 12000
    other = await daemon.client()
    try:
        # The daemon runs in this test's loop: a request holding it delays the status too.
        started = time.perf_counter()
        task = asyncio.create_task(daemon.call("memory.remember", cwd=str(project), text=text))
        await asyncio.sleep(0.05)
        await other.call("status", {})
        assert time.perf_counter() - started < 1.0
        assert (await task)["derived_by"] == "local"
    finally:
        await other.close()


async def test_remember_too_large_is_refused_before_the_model_sees_it(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, project: Path
) -> None:
    fake_model.handler = lambda body: json_reply(
        {"type": "project", "name": "Big note", "description": "a big note"}
    )
    text = "The build log says: " + "compile step ok; " * 20000
    with pytest.raises(RpcError) as err:
        await daemon_with_model.call("memory.remember", cwd=str(project), text=text)
    assert err.value.code == -32004
    assert "200,000 bytes" in err.value.message
    assert fake_model.message_requests() == []
