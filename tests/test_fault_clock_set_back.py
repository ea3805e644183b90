"""The system clock set back between two turns (by hand, by NTP after a wrong start): a
memory the main agent writes after that is dated before the previous turn's wall time. The
extraction's "main agent wrote memory since the last turn" check still sees it (the previous
turn is placed by the monotonic clock too), so the turn is not extracted a second time."""

from __future__ import annotations

import os
import time
import types
from pathlib import Path

import pytest

from memoryd.automem import extraction
from memoryd.automem.extraction_prompts import NOTHING_MARKER
from tests.background.conftest import Workspace, memory_text, transcript, workspace_for
from tests.conftest import DaemonHandle
from tests.fakes.messages_api import FakeMessagesAPI, text_reply

HOUR = 3600.0


class SetBackClock:
    """The `time` module as extraction sees it, with the wall clock moved back on demand;
    the monotonic clock goes on, as the kernel's does."""

    def __init__(self) -> None:
        self.back_s = 0.0

    def module(self) -> types.SimpleNamespace:
        return types.SimpleNamespace(
            time=lambda: time.time() - self.back_s,
            time_ns=lambda: time.time_ns() - int(self.back_s * 1e9),
            monotonic=time.monotonic,
            monotonic_ns=time.monotonic_ns,
        )


@pytest.fixture
def ws(daemon_with_model: DaemonHandle, tmp_path: Path) -> Workspace:
    return workspace_for(daemon_with_model, tmp_path)


async def test_a_memory_written_after_the_clock_was_set_back_skips_extraction(
    ws: Workspace, fake_model: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = SetBackClock()
    monkeypatch.setattr(extraction, "time", clock.module())
    convo = transcript(("Please stop mocking the database in tests.", "Understood."))
    fake_model.enqueue(text_reply(NOTHING_MARKER))
    await ws.handle.call("after_turn", session_id="s1", cwd=str(ws.cwd), messages=convo)
    await ws.handle.daemon.services.extraction.wait_idle()
    assert len(fake_model.message_requests()) == 1

    clock.back_s = HOUR
    # The main agent saves a memory this turn; its file is dated by the set-back clock.
    ws.memory_dir.mkdir(parents=True, exist_ok=True)
    saved = ws.memory_dir / "feedback_real_database.md"
    saved.write_text(memory_text("Real DB", "no mocks", "feedback", "Hit a real database."))
    now = clock.module().time()
    os.utime(saved, (now, now))
    later = [*convo, *transcript(("and the fixtures too", "Done."))]
    fake_model.enqueue(text_reply(NOTHING_MARKER))
    await ws.handle.call("after_turn", session_id="s1", cwd=str(ws.cwd), messages=later)
    await ws.handle.daemon.services.extraction.wait_idle()
    assert len(fake_model.message_requests()) == 1  # not offered to the extraction agent
    status = (await ws.handle.call("status"))["features"]["extraction"]
    assert status["skipped_main_agent"] == 1
