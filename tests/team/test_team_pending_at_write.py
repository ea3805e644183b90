"""A team memory the daemon writes is pending in `team.status` at once: a client waiting for
"pushed" must not take the folder's earlier push (whose scan came before the write) for it."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from memoryd.team.sync.localfs import LocalScan
from tests.conftest import DaemonHandle
from tests.team.conftest import REPO, remember_deploy_freeze, server_history
from tests.team.test_team_sync_daemon import make_repo, start
from tests.team_server.conftest import ThreadedServer


async def test_a_team_write_during_a_push_in_flight_is_pending_at_once(
    server: ThreadedServer,
    short_tmp: Path,
    tmp_path: Path,
    daemons: list[DaemonHandle],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A long debounce: the watcher pushes nothing while the test looks.
    handle = await start(short_tmp, "a", url=server.url, token=server.token(REPO), debounce_s=30)
    daemons.append(handle)
    root = make_repo(tmp_path / "clone")
    await handle.call("team.pull", cwd=str(root))
    team = handle.daemon.services.team
    folder = team.folder(handle.daemon.services.projects.resolve(str(root)))
    await folder.runner.wait_idle()
    engine = folder.engine

    # A push whose scan has read the folder but not finished: the write lands after it.
    scanned, go_on = threading.Event(), threading.Event()
    real_scan = engine.folder.scan

    def slow_scan() -> LocalScan:
        result = real_scan()
        scanned.set()
        go_on.wait(10)
        return result

    monkeypatch.setattr(engine.folder, "scan", slow_scan)
    push: asyncio.Task[Any] = asyncio.create_task(handle.call("team.push", cwd=str(root)))
    assert await asyncio.to_thread(scanned.wait, 10)
    written = await remember_deploy_freeze(handle, root)
    key = Path(written["path"]).name
    during = await handle.call("team.status", cwd=str(root))
    assert key in during["pending"]  # was []: the push in flight kept the old list
    go_on.set()
    pushed = await push
    assert pushed["ok"] is True
    assert key not in server_history(server)  # that push never saw the file...
    assert key in pushed["pending"]  # ...and says it is still to go (said [] before)

    monkeypatch.setattr(engine.folder, "scan", real_scan)
    again = await handle.call("team.push", cwd=str(root))
    assert key in server_history(server)
    assert again["pending"] == []
