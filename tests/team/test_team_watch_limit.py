"""The team watcher when the user's inotify watch limit is met (ENOSPC).

A team folder with more folders than fs.inotify.max_user_watches allows (8192 by default before
Linux 5.11) cannot be watched: fswatch raises OSError(ENOSPC) each time it sets the watches up.
The watcher took it for any error of its own: it tried again after 0.2, 0.4, ... 5 s for ever,
with a warning and a push each time, and each try took every watch the user had left (the
rules watcher's and the editors' failed meanwhile).
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from memoryd import fswatch
from memoryd.team.sync import watcher


async def test_the_watch_limit_is_said_once_and_tried_again_seldom(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    team = tmp_path / "team"
    team.mkdir()
    attempts = 0

    async def over_the_limit(*_paths: Path, **_options: Any) -> AsyncIterator[fswatch.Changes]:
        nonlocal attempts
        attempts += 1
        raise OSError(errno.ENOSPC, "inotify_add_watch: No space left on device", str(team))
        yield set()  # an async generator, as fswatch.watch

    warnings: list[str] = []
    monkeypatch.setattr(watcher.fswatch, "watch", over_the_limit)
    monkeypatch.setattr(
        watcher,
        "log",
        SimpleNamespace(
            warning=lambda event, **_kw: warnings.append(event), info=lambda *_a, **_kw: None
        ),
    )
    runner = watcher.SyncRunner.__new__(watcher.SyncRunner)
    runner.engine = SimpleNamespace(folder=SimpleNamespace(team_dir=team), repo="r")  # type: ignore[assignment]
    runner.tuning = watcher.Tuning()
    runner._stop = asyncio.Event()
    runner._backlog = fswatch.Backlog()
    pushes: list[bool] = []
    runner.trigger = lambda deletion=False: pushes.append(deletion)  # type: ignore[method-assign]

    task = asyncio.create_task(runner._watch())
    await asyncio.sleep(3.0)  # was 4 tries, 4 warnings, 4 pushes
    assert attempts == 1
    assert len(warnings) == 1
    assert "max_user_watches" in warnings[0]
    assert pushes == [False]  # what changed is pushed at each try: a poll
    runner._stop.set()
    await asyncio.wait_for(task, 1.0)  # a stop ends the wait at once (not 5 s later)
