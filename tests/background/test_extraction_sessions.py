"""Extraction with several sessions of one memory dir, and with a client that compacts on
its own (Claude Code), against the scripted fake Messages API."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from memoryd.automem.extraction_prompts import NOTHING_MARKER
from tests.background.conftest import Workspace, transcript
from tests.fakes.messages_api import FakeMessagesAPI, slow, text_reply


async def _after_turn(ws: Workspace, session_id: str, messages: list[dict[str, Any]]) -> Any:
    return await ws.handle.call(
        "after_turn", session_id=session_id, cwd=str(ws.cwd), messages=messages
    )


def _offered(fake: FakeMessagesAPI, marker: str) -> bool:
    return any(marker in json.dumps(r.json) for r in fake.message_requests())


async def test_a_turn_waiting_behind_a_run_is_not_replaced_by_another_sessions_turn(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    fake_model.enqueue(slow(0.5, text_reply(NOTHING_MARKER)))
    fake_model.handler = lambda _req: text_reply(NOTHING_MARKER)
    first = transcript(("first thing in A", "ok"))
    assert (await _after_turn(ws, "A", first))["scheduled"]["extraction"] is True
    while not fake_model.message_requests():
        await asyncio.sleep(0.01)
    # While A's first run waits for the model: A's next turn, then B's (same memory dir).
    last_of_a = [*first, *transcript(("our on-call rota is PagerDuty KIWI-ROTA", "noted"))]
    await _after_turn(ws, "A", last_of_a)
    await _after_turn(ws, "B", transcript(("an unrelated question in B", "ok")))
    await ws.handle.daemon.services.extraction.wait_idle()
    # Before, B's turn took A's place as the dir's one pending turn: A's never ran.
    assert _offered(fake_model, "KIWI-ROTA")
    assert _offered(fake_model, "an unrelated question in B")
    status = (await ws.handle.call("status"))["features"]["extraction"]
    assert status["runs"] == 3
    assert status["coalesced"] == 0
