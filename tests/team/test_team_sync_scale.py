"""Work that grew with a team folder's size more than it must (bench/bench_scale.py measures
it): a pull fsynced the folder once per file it wrote, and every save of the sync state
deep-copied each checksum it held."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from memoryd.team.sync import localfs
from memoryd.team.sync.state import Conflict, Skipped, SyncState
from tests.team.conftest import REPO, SideFactory, seed_server
from tests.team_server.conftest import ThreadedServer


async def test_a_pull_syncs_each_folder_once_not_once_per_file(
    server: ThreadedServer, make_side: SideFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = server.token(REPO)
    files = {f"area{i % 3}/note{i:02d}.md": f"note {i}\n" for i in range(60)}
    await seed_server(make_side, server, token, files)
    me = make_side("me", server.url, token)
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
