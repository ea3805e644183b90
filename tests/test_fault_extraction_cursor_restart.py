"""Extraction's place in a session survives a daemon killed with SIGKILL: after the restart
the session's next turn is offered as the most recent turn. Kept in memory only, every place
was forgotten, and that turn was offered the whole conversation ("the last 42 messages") to
extract again what was saved already."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "bench")]

from _harness import start_daemon, temp_home  # noqa: E402

from memoryd_client import Client  # noqa: E402
from tests.fakes.messages_api import FakeMessagesAPI, text_reply  # noqa: E402


def _transcript(turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(turns):
        out.append({"role": "user", "content": f"Step {i}: refactor module {i}."})
        out.append({"role": "assistant", "content": [{"type": "text", "text": f"Done {i}."}]})
    return out


@pytest.fixture
def fake() -> Iterator[FakeMessagesAPI]:
    api = FakeMessagesAPI().start()
    api.handler = lambda _body: text_reply("NOTHING_TO_SAVE")
    try:
        yield api
    finally:
        api.stop()


def _after_turn(sock: Path, cwd: Path, turns: int, fake: FakeMessagesAPI) -> dict[str, Any]:
    seen = len(fake.requests)
    with Client(sock, timeout=30) as conn:
        conn.call(
            "after_turn", {"session_id": "s1", "cwd": str(cwd), "messages": _transcript(turns)}
        )
        deadline = time.monotonic() + 30
        while (
            len(fake.requests) == seen or conn.call("status")["features"]["extraction"]["running"]
        ):
            assert time.monotonic() < deadline, "no extraction ran"
            time.sleep(0.05)
    body: dict[str, Any] = fake.requests[seen].json
    return body


def test_a_restart_after_a_kill_offers_only_the_new_turn(fake: FakeMessagesAPI) -> None:
    with temp_home() as env:
        env.update(ANTHROPIC_API_KEY="sk-test", ANTHROPIC_BASE_URL=fake.base_url)
        cwd = Path(env["HOME"]) / "project"
        cwd.mkdir()
        sock = Path(env["MEMORYD_SOCKET"])
        proc = start_daemon(env)
        try:
            first = json.dumps(_after_turn(sock, cwd, 20, fake))
            assert "Step 0:" in first  # a session's first turn is offered whole
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)
            proc = start_daemon(env)
            after = json.dumps(_after_turn(sock, cwd, 21, fake))
        finally:
            proc.terminate()
            proc.wait(30)
    assert "Step 20:" in after
    assert "Step 0:" not in after
    assert "last 42 messages" not in after
