"""Extraction's per-memory-dir bookkeeping stays bounded however many projects a daemon sees:
its run record, run lock and formatted manifest (which holds the dir's headers) were kept for
every dir it ever extracted for. A dir's run record and lock go once no run holds or waits
for them; its manifest when the store lets go of the dir (`warmup.MAX_WARM_DIRS`)."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest

from memoryd.automem import warmup
from memoryd.automem.extraction import Extraction
from tests.background.conftest import Script, Workspace, transcript, workspace_for
from tests.conftest import DaemonHandle
from tests.fakes.messages_api import FakeMessagesAPI

TURN = transcript(("We deploy on Fridays, remember that.", "Noted."))


async def _turn(ws: Workspace, session: str) -> None:
    reply = await ws.handle.call("after_turn", session_id=session, cwd=str(ws.cwd), messages=TURN)
    assert reply["scheduled"]["extraction"] is True


async def _others_done(ext: Extraction, busy: Path) -> None:
    for _ in range(600):
        if all(r.task is None for d, r in ext._runs.items() if d != busy):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("extraction runs did not finish")


async def test_extraction_keeps_per_dir_state_of_dirs_in_use_only(
    daemon_with_model: DaemonHandle,
    fake_model: FakeMessagesAPI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(warmup, "MAX_WARM_DIRS", 2)
    Script(fake_model)  # every extraction: nothing to save
    ext = daemon_with_model.daemon.services.extraction
    spaces = [workspace_for(daemon_with_model, tmp_path / f"p{i}") for i in range(8)]
    busy = spaces[0].memory_dir
    held = ext.run_lock(busy)  # as dream holds it: the dir's extraction waits behind it
    async with held:
        await _turn(spaces[0], "s0")
        for i, ws in enumerate(spaces[1:], start=1):
            await _turn(ws, f"s{i}")
            await _others_done(ext, busy)
        # The waiting run keeps its record and its lock, although its dir was let go.
        assert busy not in daemon_with_model.daemon.services.automem.states.states
        assert list(ext._runs) == [busy]
        assert ext.run_lock(busy) is held
        gc.collect()
        assert list(ext._run_locks) == [busy]
        assert len(ext._manifests) <= 2
    await ext.wait_idle()
    assert ext.counts["runs"] == 8
    del held
    gc.collect()
    assert ext._runs == {}
    assert list(ext._run_locks) == []
    assert len(ext._manifests) <= 2
    # A dir comes back: its extraction runs as before.
    await _turn(spaces[3], "s3b")
    await ext.wait_idle()
    assert ext.counts["runs"] == 9
    assert ext._runs == {}
