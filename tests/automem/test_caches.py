"""What the request path keeps between calls stays exact: settings, the checked memory dir,
the index text, the background periodic sweep and the background first load."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from memoryd.automem.context import automem_index
from memoryd.automem.service import AutoMemory
from memoryd.automem.store import TEAM_DIR, DirState, scan_changes, scan_tree
from memoryd.automem.warmup import CATCH_UP_OVER, DirStates
from memoryd_client import RpcError
from tests.automem.conftest import memory_text
from tests.conftest import DaemonHandle, IsolatedEnv


def _write(path: Path, name: str, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(memory_text(name, f"about {name}", "user", body))


async def _idle(am: AutoMemory) -> None:
    """Until no background load or sweep of the service runs."""
    for _ in range(500):
        if not am.states.warming and not any(
            t.get_name() == "worker:automem" for t in asyncio.all_tasks()
        ):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("background work did not finish")


# -- the store's building blocks --------------------------------------------------------------
def test_apply_changes_leaves_what_the_loop_changed_meanwhile(tmp_path: Path) -> None:
    state = DirState(tmp_path, sweep_interval_s=3600)
    for name in ("a", "b", "c"):
        _write(tmp_path / f"{name}.md", name, "one")
    state.refresh()
    before = state.snapshot()
    with open(tmp_path / "a.md", "a") as handle:  # in place: only a full scan sees it
        handle.write("okapi\n")
    (tmp_path / "c.md").unlink()
    changes = scan_changes(tmp_path, before)
    assert changes.changed == {"a.md"}
    assert changes.vanished == ["c.md"]
    # Meanwhile, on the loop: our own write of b.md and a new file.
    _write(tmp_path / "b.md", "b", "zebra two")
    state.note_written("b.md", tmp_path / "b.md")
    _write(tmp_path / "d.md", "d", "fresh")
    state.note_written("d.md", tmp_path / "d.md")
    state.apply_changes(changes)
    assert sorted(state.entries) == ["a.md", "b.md", "d.md"]
    assert [k for k, _ in state.index.search("okapi")] == ["a.md"]
    assert [k for k, _ in state.index.search("zebra")] == ["b.md"]
    assert [h.file for h in state.headers()] == ["a.md", "b.md", "d.md"]


def test_apply_changes_reads_a_file_the_loop_dropped_meanwhile(tmp_path: Path) -> None:
    state = DirState(tmp_path, sweep_interval_s=3600)
    for name in ("a", "b"):
        _write(tmp_path / f"{name}.md", name, "one")
    state.refresh()
    changes = scan_changes(tmp_path, state.snapshot())
    assert (changes.changed, changes.vanished) == (set(), [])
    # Meanwhile, on the loop: b.md deleted, then written again from outside (in place).
    state.note_deleted("b.md", tmp_path / "b.md")
    with open(tmp_path / "b.md", "a") as handle:
        handle.write("walrus\n")
    state.apply_changes(changes)
    assert sorted(state.entries) == ["a.md", "b.md"]
    assert state.index.search("walrus")[0][0] == "b.md"  # read as it is now


def test_load_steps_first_load_and_files_created_meanwhile(tmp_path: Path) -> None:
    state = DirState(tmp_path, sweep_interval_s=3600)
    for name in ("a", "b"):
        _write(tmp_path / f"{name}.md", name, "one")
    seen = scan_tree(tmp_path)
    first, second = seen  # in readdir order
    steps = state.load_steps(seen, 0.0)
    next(steps)
    assert not state.swept
    assert list(state.entries) == [first]
    _write(tmp_path / "c.md", "c", "late")
    (tmp_path / first).unlink()
    (tmp_path / second).unlink()
    for _ in steps:
        pass
    assert state.swept
    assert sorted(state.entries) == ["c.md"]
    updates = state.updates
    state.refresh()  # nothing left to read
    assert state.updates == updates


def test_load_steps_stop_when_a_request_loaded_the_dir(tmp_path: Path) -> None:
    state = DirState(tmp_path, sweep_interval_s=3600)
    for name in ("a", "b", "c"):
        _write(tmp_path / f"{name}.md", name, "one")
    steps = state.load_steps(scan_tree(tmp_path), 0.0)
    next(steps)
    state.refresh()  # a request needs the store now: it loads the rest itself
    assert sorted(state.entries) == ["a.md", "b.md", "c.md"]
    updates = state.updates
    assert list(steps) == []
    assert state.updates == updates


def test_headers_list_is_kept_until_something_changes(tmp_path: Path) -> None:
    state = DirState(tmp_path, sweep_interval_s=3600)
    _write(tmp_path / "a.md", "a", "one")
    state.refresh()
    first = state.headers()
    state.refresh()
    assert state.headers() is first
    _write(tmp_path / "b.md", "b", "two")
    state.refresh()
    assert [h.file for h in state.headers()] == ["a.md", "b.md"]
    assert state.headers() is not first


async def test_many_files_found_after_the_load_are_read_in_slices(tmp_path: Path) -> None:
    """A team pull of 10,000 files into a loaded dir: the next access read every new file on
    the event loop (7.7 s). Now more than CATCH_UP_OVER are left to a background load in
    slices that `ready` waits for; a few are still read at once."""
    states = DirStates(asyncio.create_task)
    states.sweep_interval_s = 3600
    _write(tmp_path / "a.md", "a", "one")
    state = states.state(tmp_path)
    assert len(state.entries) == 1
    updates = state.updates
    for i in range(CATCH_UP_OVER * 3):
        _write(tmp_path / TEAM_DIR / f"t{i:03d}.md", f"t{i}", f"pulled {i}")
    states.state(tmp_path)
    assert state.updates == updates  # nothing read on the request
    assert tmp_path in states.warming
    state = await states.ready(tmp_path)
    assert len(state.entries) == 1 + CATCH_UP_OVER * 3
    assert not states.warming
    _write(tmp_path / "b.md", "b", "okapi")
    assert "b.md" in states.state(tmp_path).entries  # a few: at once, as before


async def test_ready_waits_for_files_found_after_the_load(tmp_path: Path) -> None:
    states = DirStates(asyncio.create_task)
    states.sweep_interval_s = 3600
    _write(tmp_path / "a.md", "a", "one")
    states.state(tmp_path)
    for i in range(CATCH_UP_OVER * 2):
        _write(tmp_path / f"n{i:03d}.md", f"n{i}", "okapi" if i == 7 else "zebra")
    state = await states.ready(tmp_path)
    assert [k for k, _ in state.index.search("okapi")] == ["n007.md"]


# -- through the daemon -------------------------------------------------------------------------
async def test_settings_change_seen_on_the_next_call(
    daemon: DaemonHandle, project: Path, isolated_env: IsolatedEnv
) -> None:
    proj = daemon.daemon.services.projects.resolve(project)
    assert (await automem_index(daemon.daemon.services.automem, proj)).memory_dir is not None
    user = isolated_env.config_dir / "settings.json"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text(json.dumps({"autoMemoryEnabled": False}))
    assert (await automem_index(daemon.daemon.services.automem, proj)).memory_dir is None
    with pytest.raises(RpcError) as err:
        await daemon.call("memory.list", cwd=str(project))
    assert err.value.code == -32003
    user.write_text(json.dumps({"autoMemoryEnabled": True}))
    assert (await automem_index(daemon.daemon.services.automem, proj)).memory_dir is not None
    user.unlink()
    local = project / ".claude" / "settings.local.json"
    local.parent.mkdir()
    local.write_text(json.dumps({"autoMemoryEnabled": False}))
    assert (await automem_index(daemon.daemon.services.automem, proj)).memory_dir is None


async def test_memory_dir_swapped_for_a_symlink_later_is_refused(
    daemon: DaemonHandle, project: Path, memdir: Path, isolated_env: IsolatedEnv
) -> None:
    await daemon.call("memory.list", cwd=str(project))  # checked and kept
    ssh = isolated_env.home / ".ssh"
    ssh.mkdir()
    memdir.parent.mkdir(parents=True, exist_ok=True)
    if memdir.exists():
        memdir.rmdir()
    memdir.symlink_to(ssh)
    with pytest.raises(RpcError) as err:
        await daemon.call(
            "memory.write", cwd=str(project), type="user", name="A", description="a", body="b"
        )
    assert err.value.code == -32002
    assert list(ssh.iterdir()) == []


async def test_index_edits_seen_by_get_context(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    memdir.mkdir(parents=True)
    index = memdir / "MEMORY.md"
    index.write_text("- [A](a.md) — first\n")
    ctx = await daemon.call("get_context", cwd=str(project))
    assert "— first" in ctx["claude_md"]
    with open(index, "a") as handle:  # in place
        handle.write("- [B](b.md) — second\n")
    ctx = await daemon.call("get_context", cwd=str(project))
    assert "— second" in ctx["claude_md"]
    tmp = memdir / ".MEMORY.md.tmp"
    tmp.write_text("- [C](c.md) — third!\n")
    os.replace(tmp, index)  # atomic replace
    ctx = await daemon.call("get_context", cwd=str(project))
    assert "— third!" in ctx["claude_md"]
    assert "— second" not in ctx["claude_md"]
    index.unlink()
    ctx = await daemon.call("get_context", cwd=str(project))
    assert not any(f["type"] == "AutoMem" for f in ctx["files"])


async def test_in_place_edit_seen_after_the_background_sweep(
    daemon: DaemonHandle, project: Path
) -> None:
    am = daemon.daemon.services.automem
    am.sweep_interval_s = 0.05
    res = await daemon.call(
        "memory.write", cwd=str(project), type="user", name="A", description="a", body="lion"
    )
    path = Path(res["path"])
    with open(path, "a") as handle:  # in place: the directory's mtime does not change
        handle.write("Also mention the okapi.\n")
    await asyncio.sleep(0.06)
    await daemon.call("recall", cwd=str(project), query="okapi")  # starts the sweep
    await _idle(am)
    got = await daemon.call("recall", cwd=str(project), query="okapi")
    assert [m["path"] for m in got["memories"]] == [str(path)]


async def test_first_get_context_loads_the_store_in_the_background(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    for i in range(30):
        _write(memdir / f"user_fact_{i:02d}.md", f"fact {i}", f"giraffe number {i}")
    await daemon.call("get_context", cwd=str(project))
    am = daemon.daemon.services.automem
    # get_context started the load; on a fast machine it may already have finished.
    assert memdir in am.states.warming or (
        memdir in am.states.states and am.states.states[memdir].swept
    )
    await _idle(am)
    state = am.states.states[memdir]
    assert state.swept
    assert len(state.entries) == 30
    updates = state.updates
    listed = await daemon.call("memory.list", cwd=str(project))
    assert len(listed["memories"]) == 30
    assert state.updates == updates  # nothing parsed twice


async def test_requests_during_the_background_load_see_every_memory(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    for i in range(200):
        _write(memdir / f"user_fact_{i:03d}.md", f"fact {i}", f"giraffe number {i}")
    await daemon.call("get_context", cwd=str(project))
    await asyncio.sleep(0)
    listed = await daemon.call("memory.list", cwd=str(project))
    assert len(listed["memories"]) == 200
    res = await daemon.call(
        "memory.write", cwd=str(project), type="user", name="new one", description="n", body="x"
    )
    await _idle(daemon.daemon.services.automem)
    listed = await daemon.call("memory.list", cwd=str(project))
    assert len(listed["memories"]) == 201
    assert res["path"] in {m["path"] for m in listed["memories"]}


async def test_warm_memory_list_does_not_parse_the_index_again(
    daemon: DaemonHandle, project: Path, memdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each warm memory.list parsed MEMORY.md twice on the loop (180-510 ms at 10,000): its
    dangling lines and orphans are kept while the memories, the index and its folder stay."""
    from memoryd.automem import index as index_mod

    for i in range(3):
        _write(memdir / f"user_fact_{i}.md", f"fact {i}", f"giraffe {i}")
    (memdir / "MEMORY.md").write_text(
        "- [fact 0](user_fact_0.md) — a\n- [arch](arch.png) — a picture\n"
    )
    await daemon.call("memory.list", cwd=str(project))
    await _idle(daemon.daemon.services.automem)  # the first look indexes the orphans
    first = await daemon.call("memory.list", cwd=str(project))
    assert first["index"]["dangling"] == ["arch.png"]
    parses: list[str] = []
    parse = index_mod.parse_index
    monkeypatch.setattr(index_mod, "parse_index", lambda text: parses.append(text) or parse(text))
    again = await daemon.call("memory.list", cwd=str(project))
    assert parses == []
    assert again["index"] == first["index"]
    (memdir / "arch.png").write_bytes(b"png")  # the folder changed: looked at again
    listed = await daemon.call("memory.list", cwd=str(project))
    assert listed["index"]["dangling"] == []
    assert parses
