"""A long session's after_turn: its transcript taken as sent and counted off the event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.methods.compact import CompactParams
from memoryd.daemon.methods.turns import AfterTurnParams
from memoryd.llm.tokens import TokenCounter
from memoryd.session import service
from tests.conftest import DaemonHandle
from tests.session.builders import assistant, user


@pytest.mark.parametrize("params", [AfterTurnParams, CompactParams])
def test_the_transcript_is_checked_not_copied(params: Any) -> None:
    # Found by a bug hunt: pydantic copied each of 257,000 messages on every turn (0.36 s).
    messages = [user("hi"), assistant("hello")]
    raw = {"session_id": "s1", "cwd": "/tmp", "messages": messages}
    assert params.model_validate(raw).messages is messages


async def test_a_long_transcript_is_counted_off_the_loop(
    daemon: DaemonHandle, project_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by a bug hunt: counting a 257,000-message transcript held the loop 0.2-0.35 s per
    # turn. A count held here must leave the loop free to answer `status`.
    entered, release = threading.Event(), threading.Event()
    released: list[bool] = []
    real_count = TokenCounter.count

    def held_count(
        self: TokenCounter, messages: Any, usage: Mapping[str, Any] | None = None
    ) -> tuple[int, list[int]]:
        entered.set()
        # On the loop, nothing could set `release` while this waits: it would time out.
        released.append(release.wait(timeout=10))
        return real_count(self, messages, usage)

    monkeypatch.setattr(service, "COUNT_IN_THREAD", 2)  # "long" from two messages on
    monkeypatch.setattr(TokenCounter, "count", held_count)
    writer = await daemon.client()
    try:
        turn = asyncio.create_task(
            writer.call(
                "after_turn",
                {
                    "session_id": "s1",
                    "cwd": str(project_dir),
                    "messages": [user("hi"), assistant("hello")],
                },
            )
        )
        while not entered.is_set():
            await asyncio.sleep(0.01)
        status = await daemon.call("status")
        release.set()
        result = await turn
    finally:
        await writer.close()
    assert status["pid"]
    assert released == [True]
    assert result["tokens"] > 0
