"""Work that grew with a team folder's size more than it must (bench/bench_scale.py and
bench/bench_team_state_save.py measure it): a pull fsynced the folder once per file it wrote,
every save of the sync state deep-copied each checksum it held, and was encoded and written
on the event loop."""

from __future__ import annotations

import asyncio
import copy
import threading
from pathlib import Path
from typing import Any

import pytest

from memoryd.team.sync import engine as engine_module
from memoryd.team.sync import localfs
from memoryd.team.sync import state as state_module
from memoryd.team.sync.client import Permanent, TeamClient
from memoryd.team.sync.state import Conflict, Skipped, StateStore, SyncState
from tests.team.conftest import REPO, Side, SideFactory, seed_server
from tests.team_server.conftest import ThreadedServer


async def seeded(
    server: ThreadedServer, make_side: SideFactory, count: int
) -> tuple[Side, dict[str, str]]:
    """`count` notes in three folders on the server, and a side with an empty folder."""
    token = server.token(REPO)
    files = {f"area{i % 3}/note{i:02d}.md": f"note {i}\n" for i in range(count)}
    await seed_server(make_side, server, token, files)
    return make_side("me", server.url, token), files


async def test_a_pull_syncs_each_folder_once_not_once_per_file(
    server: ThreadedServer, make_side: SideFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    me, files = await seeded(server, make_side, 60)
    synced: list[Path] = []
    monkeypatch.setattr(localfs, "fsync_dir", synced.append)
    report = await me.engine.pull()
    assert sorted(report.pulled) == sorted(files)
    assert all(me.read(key) == text for key, text in files.items())
    # 60 files written in 3 folders: 3 fsyncs (it was 60, one per file).
    assert sorted(synced) == [me.team_dir / f"area{i}" for i in range(3)]


def test_saving_the_state_copies_no_checksum(monkeypatch: pytest.MonkeyPatch) -> None:
    state = SyncState(repo=REPO, server="http://team", team_dir="/t", etag='"e"')
    state.server_checksums = {f"k{i}.md": f"sha256:{i:064x}" for i in range(2000)}
    state.synced = dict(state.server_checksums)
    state.skipped["s.md"] = Skipped("secret", "sha256:0", "aws", None)
    state.add_conflict(Conflict("c.md", "/t/c.conflict-x.md", "2026-01-01T00:00:00Z"))
    state.last_result = {"op": "pull", "ok": True}
    copies = 0
    deepcopy = copy.deepcopy

    def counting(value: Any, memo: Any = None) -> Any:
        nonlocal copies
        copies += 1
        return deepcopy(value, memo)

    monkeypatch.setattr(copy, "deepcopy", counting)
    text = state.to_json()
    monkeypatch.undo()
    assert SyncState.from_json(text) == state
    # The skipped entry's and the conflict's fields at most; it was every checksum too
    # (4,000 copies here, 40,000 for a folder of 20,000 files, at every save).
    assert copies < 20


async def test_a_pull_of_one_change_looks_at_that_path_alone(
    server: ThreadedServer, make_side: SideFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = server.token(REPO)
    files = {f"area{i % 3}/note{i:02d}.md": f"note {i}\n" for i in range(50)}
    await seed_server(make_side, server, token, files)
    me = make_side("me", server.url, token)
    await me.engine.pull()
    teammate = make_side("teammate", server.url, token)
    await teammate.engine.pull()
    teammate.write("area1/note01.md", "changed by a teammate\n")
    await teammate.engine.push()
    folder = me.engine.folder
    looked_at: list[str] = []
    target = folder.target

    def counting(key: str) -> Path:
        looked_at.append(key)
        return target(key)

    monkeypatch.setattr(folder, "target", counting)
    report = await me.engine.pull()
    assert report.pulled == ["area1/note01.md"]
    assert me.read("area1/note01.md") == "changed by a teammate\n"
    assert me.engine.state.synced == {**me.engine.state.server_checksums}
    # Each in-step file was checked as a path again (three stats each) at every such pull.
    assert set(looked_at) == {"area1/note01.md"}


async def test_the_state_is_saved_off_the_event_loop(
    server: ThreadedServer, make_side: SideFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder of 20,000 files has a 4 MB state: encoded and written (fsyncs and all) on the
    loop at every pull and push, it held every other request of the daemon 50-150 ms."""
    token = server.token(REPO)
    await seed_server(make_side, server, token, {"a.md": "a\n", "b/c.md": "c\n"})
    me = make_side("me", server.url, token)
    loop_thread = threading.get_ident()
    saved_on: list[int] = []
    write = state_module.atomic_write_text

    def recording(path: Path, text: str) -> None:
        saved_on.append(threading.get_ident())
        write(path, text)

    monkeypatch.setattr(state_module, "atomic_write_text", recording)
    await me.engine.pull()  # a pull
    me.write("d.md", "mine\n")
    await me.engine.push()  # a push
    assert me.engine.client is not None
    await me.engine.client.close()
    me.engine.client = TeamClient(server.url, "mdt_revoked")
    with pytest.raises(Permanent):
        await me.engine.pull()  # a failure
    await me.engine.client.close()
    assert len(saved_on) == 3
    assert loop_thread not in saved_on
    saved = SyncState.from_json(me.engine.store.path.read_text(encoding="utf-8"))
    assert saved.synced == me.engine.state.synced
    assert "d.md" in saved.synced
    assert saved.last_result is not None
    assert saved.last_result["status"] == 401


async def test_a_save_finishing_late_does_not_write_an_older_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = StateStore(tmp_path / "state.json")
    state = SyncState(repo=REPO, server="http://team", team_dir="/t", etag='"first"')
    encode = state_module.encode_state
    second_written = threading.Event()

    def first_encoded_last(data: dict[str, Any]) -> str:
        if data["etag"] == '"first"':
            assert second_written.wait(10)
        return encode(data)

    monkeypatch.setattr(state_module, "encode_state", first_encoded_last)
    first = asyncio.create_task(store.save_off_loop(state))
    await asyncio.sleep(0)  # its snapshot taken, its thread started
    state.etag = '"second"'
    await store.save_off_loop(state)
    second_written.set()
    await first
    assert SyncState.from_json(store.path.read_text(encoding="utf-8")).etag == '"second"'


async def test_a_push_plans_its_batches_off_the_event_loop(
    server: ThreadedServer, make_side: SideFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sizing each entry's JSON for the batches of a 20,000-file push held the loop ~100 ms."""
    me = make_side("me", server.url, server.token(REPO))
    for i in range(30):
        me.write(f"area{i % 3}/note{i:02d}.md", f"note {i}\n")
    planned_on: list[int] = []
    plan = engine_module.plan_batches

    def recording(entries: Any, **limits: Any) -> Any:
        planned_on.append(threading.get_ident())
        return plan(entries, **limits)

    monkeypatch.setattr(engine_module, "plan_batches", recording)
    report = await me.engine.push()
    assert len(report.pushed) == 30
    assert planned_on
    assert threading.get_ident() not in planned_on


async def test_a_pull_answered_304_with_nothing_new_writes_no_state(
    server: ThreadedServer, make_side: SideFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every get_context pulls at most once a minute; a 304 rewrote (and fsynced) the whole
    state each time — 4 MB for a folder of 20,000 files — to change the time of last_result."""
    token = server.token(REPO)
    await seed_server(make_side, server, token, {"a.md": "a\n", "b/c.md": "c\n"})
    me = make_side("me", server.url, token)
    await me.engine.pull()
    assert (await me.engine.pull()).not_modified  # saved: its last_result pulled nothing
    writes: list[Path] = []
    write = state_module.atomic_write_text

    def counting(path: Path, text: str) -> None:
        writes.append(path)
        write(path, text)

    monkeypatch.setattr(state_module, "atomic_write_text", counting)
    for _ in range(3):
        assert (await me.engine.pull()).not_modified
    assert writes == []
    # Something new is still saved: an edit the 304 pull found pending …
    me.write("d.md", "mine\n")
    assert (await me.engine.pull()).not_modified
    assert len(writes) == 1
    saved = SyncState.from_json(me.engine.store.path.read_text(encoding="utf-8"))
    assert saved.pending == ["d.md"]
    # … and a 304 after a failed pull (its last_result says ok again).
    me.engine.state.last_result = {"op": "pull", "ok": False, "error": "HTTP 503"}
    assert (await me.engine.pull()).not_modified
    assert len(writes) == 2
    saved = SyncState.from_json(me.engine.store.path.read_text(encoding="utf-8"))
    assert saved.last_result is not None
    assert saved.last_result["ok"] is True
    # A restarted daemon's first 304 saves once: the service sets the folder's project roots
    # on the state it loads, and the next start resumes the folder from them.
    again = make_side("me", server.url, token)
    again.engine.state.project_root = "/src/widgets"
    assert (await again.engine.pull()).not_modified
    assert len(writes) == 3
    saved = SyncState.from_json(again.engine.store.path.read_text(encoding="utf-8"))
    assert saved.project_root == "/src/widgets"
    assert (await again.engine.pull()).not_modified
    assert len(writes) == 3


async def test_a_pull_checks_the_servers_keys_off_the_event_loop(
    server: ThreadedServer, make_side: SideFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checking every key a folder's first pull needs held the loop ~80 ms at 20,000 keys."""
    me, files = await seeded(server, make_side, 30)
    checked_on: list[int] = []
    check = engine_module.key_problem

    def recording(key: object) -> str | None:
        checked_on.append(threading.get_ident())
        return check(key)

    monkeypatch.setattr(engine_module, "key_problem", recording)
    report = await me.engine.pull()
    assert sorted(report.pulled) == sorted(files)
    assert len(checked_on) >= len(files)
    assert threading.get_ident() not in checked_on
