"""The watch off Linux, through watchfiles (driven here on any OS by posing as another one)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest

from memoryd import fswatch


async def test_a_watch_closed_by_its_caller_closes_the_watchfiles_one_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The inner watch was left to the loop's collection when the outer one was closed (only the
    # Linux path closed its inner one): its watcher went on watching a folder no one watched.
    watchfiles = pytest.importorskip("watchfiles")
    closed = asyncio.Event()

    async def awatch(*paths: Path, **options: Any) -> AsyncGenerator[set[tuple[int, str]]]:
        try:
            while True:
                yield {(1, str(paths[0] / "new.md"))}
        finally:
            closed.set()

    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(watchfiles, "awatch", awatch)
    batches = fswatch.watch(
        tmp_path, stop=asyncio.Event(), recursive=False, debounce_ms=50, step_ms=20
    )
    assert await anext(batches) == {(fswatch.Change.added, str(tmp_path / "new.md"))}
    await batches.aclose()
    assert closed.is_set()  # within the close, no turn of the loop given
