"""`team.status` reuses its last scan of the folder while the watcher vouches that nothing in
it changed (editors poll status; a scan of 10,000 files took 110-340 ms), and still shows a
file pending the moment it is saved: inotify queues the event within the save itself."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest

from memoryd import fswatch
from memoryd.team.sync.localfs import LocalScan
from tests.conftest import DaemonHandle
from tests.team.conftest import REPO, TeamDaemon, remember_deploy_freeze
from tests.team.test_team_sync_daemon import make_repo
from tests.team_server.conftest import ThreadedServer

DEADLINE_S = 60.0  # generous: a loaded CI machine; the wait costs only when the test fails


class Scans:
    """Counts the folder's scans (every caller's) and the status refreshes (a status during a
    pull or push makes none)."""

    def __init__(self, handle: DaemonHandle, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        team = handle.daemon.services.team
        self.folder = team.folder(handle.daemon.services.projects.resolve(str(root)))
        self.count = self.refreshes = 0
        engine = self.folder.engine
        real_scan, real_refresh = engine.folder.scan, engine.refresh_pending

        def counted() -> LocalScan:
            self.count += 1
            return real_scan()

        async def refresh() -> list[str]:
            self.refreshes += 1
            return await real_refresh()

        monkeypatch.setattr(engine.folder, "scan", counted)
        monkeypatch.setattr(engine, "refresh_pending", refresh)

    async def status_calls(self, handle: DaemonHandle, root: Path, calls: int) -> int:
        """Scans made by `calls` status calls that refreshed `pending` in a row."""
        scans, refreshes = self.count, self.refreshes
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE_S
        while self.refreshes - refreshes < calls:
            assert loop.time() < deadline, "team.status never refreshed pending"
            await handle.call("team.status", cwd=str(root))
        return self.count - scans


async def quiet_status(handle: DaemonHandle, root: Path, scans: Scans) -> None:
    """Call `team.status` until one refreshes `pending` without scanning the folder (the
    watcher has handed over what was written, and a status scan since is reused)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while await scans.status_calls(handle, root, 1):
        if loop.time() > deadline:
            raise AssertionError("every team.status scanned the folder again")
        await asyncio.sleep(0.05)


Watched = tuple[DaemonHandle, Path, Path, Scans]


@pytest.fixture
async def watched(
    team_daemon: TeamDaemon, server: ThreadedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Watched:
    """A daemon syncing a project whose folder is watched, in step, and a status since that
    reused its last scan: (daemon, project root, team folder, scan counter)."""
    # A long debounce: nothing is pushed while the test looks at `pending`.
    handle = await team_daemon("a", url=server.url, token=server.token(REPO), debounce_s=600)
    root = make_repo(tmp_path / "clone")
    await handle.call("team.pull", cwd=str(root))
    scans = Scans(handle, root, monkeypatch)
    await asyncio.wait_for(scans.folder.runner.started.wait(), DEADLINE_S)
    await scans.folder.runner.wait_idle()  # the start's push
    team = scans.folder.engine.folder.team_dir
    (team / "kept.md").write_text("# Kept\n\nIn step with the server.\n")
    pushed = await handle.call("team.push", cwd=str(root))
    assert pushed["ok"] is True
    assert pushed["pending"] == []
    await quiet_status(handle, root, scans)
    return handle, root, team, scans


async def test_a_status_poll_on_an_unchanged_folder_does_not_scan_it(watched: Watched) -> None:
    handle, root, _team, scans = watched
    assert await scans.status_calls(handle, root, 5) == 0  # was one scan of the folder each
    assert (await handle.call("team.status", cwd=str(root)))["pending"] == []


async def test_an_unchanged_folder_is_scanned_again_once_its_last_scan_is_old(
    watched: Watched,
) -> None:
    # What inotify cannot see (another machine's write on NFS, a write through mmap) shows
    # within the age limit: here 0, so the next status scans though nothing was reported.
    handle, root, _team, scans = watched
    scans.folder.engine.status_scan_max_age_s = 0.0
    assert await scans.status_calls(handle, root, 1) == 1


async def test_an_editors_save_is_pending_in_the_very_next_status(watched: Watched) -> None:
    handle, root, team, _scans = watched
    # A new file, no wait between the save and the call.
    (team / "new.md").write_text("# New\n\nWritten by an editor.\n")
    status = await handle.call("team.status", cwd=str(root))
    assert status["pending"] == ["new.md"]


async def test_an_in_place_edit_of_the_same_size_is_pending_at_once(watched: Watched) -> None:
    handle, root, team, _scans = watched
    kept = team / "kept.md"
    text = kept.read_text()
    with kept.open("r+") as file:  # rewritten in place: same inode, same size
        file.write(text.replace("In step", "Out step"))
    status = await handle.call("team.status", cwd=str(root))
    assert status["pending"] == ["kept.md"]


async def test_a_save_in_a_new_subfolder_is_pending_at_once(watched: Watched) -> None:
    handle, root, team, _scans = watched
    (team / "area" / "deep").mkdir(parents=True)
    (team / "area" / "deep" / "note.md").write_text("# Deep\n\nA note in a new folder.\n")
    status = await handle.call("team.status", cwd=str(root))
    assert status["pending"] == ["area/deep/note.md"]


async def test_a_deletion_is_seen_at_once(watched: Watched) -> None:
    handle, root, team, scans = watched
    (team / "other.md").write_text("# Other\n\nTo be deleted.\n")
    assert (await handle.call("team.status", cwd=str(root)))["pending"] == ["other.md"]
    await quiet_status(handle, root, scans)
    (team / "other.md").unlink()
    assert (await handle.call("team.status", cwd=str(root)))["pending"] == []


async def test_a_remembered_memory_is_pending_at_once(watched: Watched) -> None:
    handle, root, _team, _scans = watched
    written = await remember_deploy_freeze(handle, root)
    status = await handle.call("team.status", cwd=str(root))
    assert Path(written["path"]).name in status["pending"]


async def test_an_editors_swap_file_costs_at_most_the_scan_while_it_is_seen(
    watched: Watched,
) -> None:
    handle, root, team, scans = watched
    (team / ".kept.md.swp").write_bytes(b"b0VIM 9.0")  # hidden: never scanned, never pushed
    await handle.call("team.status", cwd=str(root))  # may scan: the watch has not said yet
    runner = scans.folder.runner
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while runner.unchanged_token() is None:
        assert loop.time() < deadline, "the swap file's batch never came"
        await asyncio.sleep(0.02)
    # Nothing a scan sees changed: the scan from before the swap file is good again (a scan
    # made while the watch held its event had thrown it away).
    assert await scans.status_calls(handle, root, 1) == 0


async def test_a_second_poller_during_a_status_scan_sees_the_save_too(
    watched: Watched, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two editors polling: the second status, arriving while the first one scans after a
    save, waits for that scan (local, short) and shows the save too. It answered at once with
    the pending keys from before the save, as it does while a pull or push is in flight."""
    handle, root, team, scans = watched
    team_sync = handle.daemon.services.team
    second_in, first_scanning = threading.Event(), threading.Event()
    real_describe, real_scan = team_sync.describe, scans.folder.engine.folder.scan
    describes = 0

    async def describe(project: Any) -> dict[str, Any]:
        nonlocal describes
        describes += 1
        if describes == 2:
            second_in.set()
        return await real_describe(project)

    def scan() -> LocalScan:
        first_scanning.set()
        second_in.wait(DEADLINE_S)  # the second status is in before this scan ends
        return real_scan()

    monkeypatch.setattr(team_sync, "describe", describe)
    monkeypatch.setattr(scans.folder.engine.folder, "scan", scan)
    (team / "new.md").write_text("# New\n\nSaved while two editors poll.\n")
    first = asyncio.create_task(handle.call("team.status", cwd=str(root)))
    assert await asyncio.to_thread(first_scanning.wait, DEADLINE_S)
    second = await handle.call("team.status", cwd=str(root))
    assert (await first)["pending"] == ["new.md"]
    assert second["pending"] == ["new.md"]  # was []: answered from before the save


def _watch(
    folder: Path, stop: asyncio.Event, ready: asyncio.Event, backlog: fswatch.Backlog
) -> AsyncGenerator[fswatch.Changes]:
    return fswatch.watch(
        folder, stop=stop, recursive=True, debounce_ms=50, step_ms=50, ready=ready, backlog=backlog
    )


async def test_the_backlog_is_not_clear_between_a_write_and_its_batch(tmp_path: Path) -> None:
    """What status relies on: the kernel queues the event within the write, so a watch whose
    batch has not been handed over yet says so."""
    stop, ready, backlog = asyncio.Event(), asyncio.Event(), fswatch.Backlog()
    assert not backlog.clear()  # no watch yet: nothing can be vouched for
    batches: list[fswatch.Changes] = []

    async def run() -> None:
        async for changes in _watch(tmp_path, stop, ready, backlog):
            batches.append(changes)

    task = asyncio.create_task(run())
    await asyncio.wait_for(ready.wait(), DEADLINE_S)
    epoch = backlog.epoch
    assert backlog.clear()
    (tmp_path / "a.md").write_text("x")
    assert not backlog.clear()  # no await since the write: the watcher has not run
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while not batches or not backlog.clear():
        assert loop.time() < deadline, "the write's batch never came"
        await asyncio.sleep(0.02)
    assert backlog.epoch == epoch
    stop.set()
    await asyncio.wait_for(task, DEADLINE_S)
    assert not backlog.clear()  # the watch ended: no longer vouched for


async def test_a_watch_closed_by_its_caller_stops_vouching_at_once(tmp_path: Path) -> None:
    """The runner closes the watch it breaks out of (a folder swapped) and sets up another;
    the old watch's backlog must say at once that it vouches for nothing. It said so only
    once the loop had collected the inotify generator inside `watch` (its fd still open)."""
    stop, ready, backlog = asyncio.Event(), asyncio.Event(), fswatch.Backlog()
    watch = _watch(tmp_path, stop, ready, backlog)
    first = asyncio.ensure_future(anext(watch))
    await asyncio.wait_for(ready.wait(), DEADLINE_S)
    (tmp_path / "a.md").write_text("x")
    await asyncio.wait_for(first, DEADLINE_S)
    await watch.aclose()
    assert not backlog.clear()
