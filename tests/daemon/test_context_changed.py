"""`context/changed`: a client that named it is told when a project's loaded instruction files
change, with a real daemon, its real file watcher and real edits. Before it, a client had no
event for this and showed stale rules until it polled."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from memoryd.rules import service as service_module
from memoryd.rules.service import CHANGED_INTERVAL_S, MAX_CHANGED_PATHS
from memoryd_client.aio import AsyncClient
from tests.conftest import DaemonHandle

EVENT = "context/changed"


def _project(root: Path) -> Path:
    (root / ".git").mkdir(parents=True)
    (root / "CLAUDE.md").write_text("# Project\n")
    (root / ".claude" / "rules").mkdir(parents=True)
    (root / ".claude" / "rules" / "style.md").write_text("# Style\n")
    return root.resolve()


async def _load_watched(daemon: DaemonHandle, root: Path, loads: int = 1) -> None:
    """get_context until the watcher covers the load (so an edit is reported by it), when it
    is one of `loads` cached loads."""
    service = daemon.daemon.services.instructions
    for _ in range(200):
        await daemon.call("get_context", cwd=str(root))
        if service.feature_status()["instruction_files"]["trusted"] >= loads:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the watcher never covered the load")


async def _subscriber(daemon: DaemonHandle, events: list[str] | None) -> AsyncClient:
    client = await daemon.client()
    await client.call("subscribe", {} if events is None else {"events": events})
    return client


async def _quiet(client: AsyncClient, after_s: float = 1.5) -> list[dict[str, Any]]:
    """Every notification until none came for `after_s`."""
    got: list[dict[str, Any]] = []
    while True:
        try:
            got.append(await client.next_notification(after_s))
        except TimeoutError:
            return got


async def test_an_edit_of_a_loaded_file_is_told_each_time_to_who_named_the_event(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    root = _project(tmp_path / "proj")
    named = await _subscriber(daemon, [EVENT])
    default = await _subscriber(daemon, None)
    try:
        await _load_watched(daemon, root)
        (root / "CLAUDE.md").write_text("# Project\nUse tabs.\n")
        note = await named.next_notification(10)
        assert note["method"] == EVENT
        assert note["params"] == {
            "project": str(root),
            "paths": [str(root / "CLAUDE.md")],
            "more": 0,
        }
        # A second edit, before anyone loaded the project again, is told too.
        (root / ".claude" / "rules" / "new.md").write_text("# New\n")
        again = await named.next_notification(10)
        assert again["params"]["paths"] == [str(root / ".claude" / "rules" / "new.md")]
        # The default subscription (an older client's "every event") does not get it.
        await daemon.daemon.notify("magicdoc/updated", {"path": "/x.md"})
        first = await default.next_notification(10)
        assert first["method"] == "magicdoc/updated"
    finally:
        await named.close()
        await default.close()


async def test_only_projects_a_client_loaded_are_told(daemon: DaemonHandle, tmp_path: Path) -> None:
    loaded = _project(tmp_path / "loaded")
    other = _project(tmp_path / "other")
    named = await _subscriber(daemon, [EVENT])
    try:
        await _load_watched(daemon, loaded)
        (other / "CLAUDE.md").write_text("# Other, edited\n")
        (tmp_path / "loaded" / "src.py").write_text("print()\n")  # no instruction file
        (loaded / "CLAUDE.md").write_text("# Loaded, edited\n")
        note = await named.next_notification(10)
        assert note["params"]["project"] == str(loaded)
        assert note["params"]["paths"] == [str(loaded / "CLAUDE.md")]
    finally:
        await named.close()


async def test_a_burst_of_edits_is_a_handful_of_notifications_naming_the_first_paths(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    root = _project(tmp_path / "proj")
    rules = root / ".claude" / "rules"
    for i in range(2000):
        (rules / f"r{i:04d}.md").write_text(f"# Rule {i}\n")
    named = await _subscriber(daemon, [EVENT])
    try:
        await _load_watched(daemon, root)
        started = time.monotonic()
        for i in range(2000):  # a branch switch rewrites every rule
            (rules / f"r{i:04d}.md").write_text(f"# Rule {i}, other branch\n")
        elapsed = time.monotonic() - started
        got = await _quiet(named)
    finally:
        await named.close()
    assert got
    # One at once, then at most one per interval while the edits last, and the held paths.
    assert len(got) <= 2 + elapsed / CHANGED_INTERVAL_S
    assert len(got) < 100  # was none at all; one per file would be 2,000
    told = 0
    for note in got:
        params = note["params"]
        assert params["project"] == str(root)
        assert len(params["paths"]) <= MAX_CHANGED_PATHS
        assert params["paths"] == sorted(params["paths"])
        told += len(params["paths"]) + params["more"]
    lost = any(not n["params"]["paths"] for n in got)  # an overflow is told without paths
    assert lost or told >= 2000


async def test_many_reports_of_the_watcher_are_one_notification_per_interval(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    # The watcher's debounce gathers one burst; a long `git checkout` is many reports.
    root = _project(tmp_path / "proj")
    rule = root / ".claude" / "rules" / "style.md"
    named = await _subscriber(daemon, [EVENT])
    try:
        await _load_watched(daemon, root)
        service = daemon.daemon.services.instructions
        started = time.monotonic()
        for i in range(1000):
            service._on_change({root / "CLAUDE.md" if i % 2 else rule})
            if i % 100 == 0:
                await asyncio.sleep(0)  # the notifications go out as the loop turns
        elapsed = time.monotonic() - started
        got = await _quiet(named)
    finally:
        await named.close()
    assert 2 <= len(got) <= 2 + elapsed / CHANGED_INTERVAL_S  # was 1,000
    assert got[0]["params"]["paths"] == [str(rule)]
    assert got[-1]["params"]["paths"] == sorted([str(root / "CLAUDE.md"), str(rule)])


async def test_a_load_served_from_the_cache_stays_watched_past_newer_loads(
    daemon: DaemonHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The loads kept for context/changed were ordered by when they were stored, the cache by
    # use: a load used again (a) outlived, in the cache, two newer ones yet was forgotten
    # first; an edit of it was then neither told nor noticed, and the cache served it stale.
    monkeypatch.setattr(service_module, "MAX_ENTRIES", 2)
    a, b, c = (_project(tmp_path / name) for name in ("a", "b", "c"))
    named = await _subscriber(daemon, [EVENT])
    try:
        for root in (a, b):
            await _load_watched(daemon, root, loads=1 + (root == b))
        await daemon.call("get_context", cwd=str(a))  # from the cache: now the newest used
        await _load_watched(daemon, c, loads=2)
        (a / "CLAUDE.md").write_text("# A, edited\n")
        note = await named.next_notification(10)
        assert note["params"]["project"] == str(a)
        assert "# A, edited" in (await daemon.call("get_context", cwd=str(a)))["claude_md"]
    finally:
        await named.close()


async def test_asking_again_on_the_notice_never_gets_a_load_that_read_the_old_text(
    daemon: DaemonHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A load in flight when the file changed had read the old text; a client that asked again
    # on the notice joined that load and got the old text, and no other notice came.
    root = _project(tmp_path / "proj")
    named = await _subscriber(daemon, [EVENT])
    try:
        await _load_watched(daemon, root)
        (root / "CLAUDE.md").write_text("# Version 2\n")
        await named.next_notification(10)
        gate = threading.Event()
        real_build = service_module.build
        calls: list[int] = []

        def held_build(*args: Any) -> Any:
            built = real_build(*args)  # reads the files now...
            calls.append(1)
            if len(calls) == 1:
                gate.wait(10)  # ...and is done only after the edit below
            return built

        monkeypatch.setattr(service_module, "build", held_build)
        first = asyncio.create_task(daemon.call("get_context", cwd=str(root)))
        while not calls:
            await asyncio.sleep(0.01)
        (root / "CLAUDE.md").write_text("# Version 3\n")
        await named.next_notification(10)
        again = asyncio.create_task(daemon.call("get_context", cwd=str(root)))
        # Both in the daemon before the first load ends (unless the second is answered already).
        while len(daemon.daemon.inflight) < 2 and not again.done():
            await asyncio.sleep(0.01)
        gate.set()
        assert "# Version 2" in (await first)["claude_md"]  # asked before the edit
        assert "# Version 3" in (await again)["claude_md"]
        assert "# Version 3" in (await daemon.call("get_context", cwd=str(root)))["claude_md"]
    finally:
        gate.set()
        await named.close()


async def test_lost_events_tell_every_loaded_project_without_paths(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    root = _project(tmp_path / "proj")
    named = await _subscriber(daemon, [EVENT])
    try:
        await _load_watched(daemon, root)
        watcher = daemon.daemon.services.instructions._watcher
        assert watcher is not None
        watcher._on_lost()  # what the watcher calls when the OS queue overflowed
        note = await named.next_notification(10)
        assert note["params"] == {"project": str(root), "paths": [], "more": 0}
    finally:
        await named.close()


async def test_subscribe_without_events_leaves_context_changed_out(
    daemon: DaemonHandle,
) -> None:
    default = (await daemon.call("subscribe"))["subscribed"]
    assert EVENT not in default
    assert "memory/saved" in default
    named = await daemon.call("subscribe", events=[EVENT, "worker/error"])
    assert named["subscribed"] == [EVENT, "worker/error"]


async def test_a_burst_of_changes_is_matched_against_each_load_by_set_operations(
    daemon: DaemonHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by a bug hunt: each changed path was tested against each load one by one (its
    # parent made, a stat check called): 20,000 files written into a watched folder with 256
    # projects loaded held the event loop ~6 s. The tests now go over the smaller side.
    roots = [_project(tmp_path / f"p{i}") for i in range(3)]
    named = await _subscriber(daemon, [EVENT])
    try:
        for root in roots:
            await daemon.call("get_context", cwd=str(root))
        service = daemon.daemon.services.instructions
        checks = 0
        became_folder = service_module.realfs.became_folder

        def counted(*args: Any) -> bool:
            nonlocal checks
            checks += 1
            return became_folder(*args)

        monkeypatch.setattr(service_module.realfs, "became_folder", counted)
        burst = {roots[0] / f"gen{i}.txt" for i in range(1000)}  # nobody's dependency
        service._on_change({*burst, roots[1] / "CLAUDE.md"})
        assert checks <= 10  # was 3 loads x 1,000 paths
        note = await named.next_notification(10)
    finally:
        await named.close()
    assert note["params"] == {
        "project": str(roots[1]),
        "paths": [str(roots[1] / "CLAUDE.md")],
        "more": 0,
    }
