"""A daemon that runs for months keeps a bounded number of memory dirs loaded: the parsed
memories and recall index of each project it ever saw (deleted ones too) were kept for its
whole life (~90 KB per memory), and so were each project's cut index text and settings. A
dir let go is loaded again, exactly, when its project comes back."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from memoryd.automem import index_cache, settings_cache, warmup
from tests.automem.conftest import memory_text
from tests.conftest import DaemonHandle, IsolatedEnv


def _projects(env: IsolatedEnv, count: int) -> list[Path]:
    roots = []
    for i in range(count):
        root = env.root / "work" / f"p{i}"
        root.mkdir(parents=True)
        roots.append(root)
    return roots


async def test_memory_dirs_kept_loaded_are_bounded(
    daemon: DaemonHandle, isolated_env: IsolatedEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(warmup, "MAX_WARM_DIRS", 3, raising=False)
    monkeypatch.setattr(index_cache, "MAX_CACHED_INDEXES", 4, raising=False)
    monkeypatch.setattr(settings_cache, "MAX_CACHED_ROOTS", 4, raising=False)
    roots = _projects(isolated_env, 10)
    dirs = []
    for i, root in enumerate(roots):
        context = await daemon.call("get_context", cwd=str(root), session_id=f"s{i}")
        dirs.append(Path(context["memory_dir"]))
        await daemon.call(
            "memory.write",
            cwd=str(root),
            type="project",
            name=f"Deploy rule {i}",
            description=f"how project {i} deploys",
            body=f"Project {i} deploys with the zebracorn{i} pipeline.",
        )
        await daemon.call("get_context", cwd=str(root), session_id=f"s{i}")  # the index read
        found = await daemon.call("recall", cwd=str(root), query=f"zebracorn{i} pipeline")
        assert [m["name"] for m in found["memories"]] == [f"Deploy rule {i}"]
        auto_memory = (await daemon.call("status"))["features"]["auto_memory"]
        assert auto_memory["memory_dirs"] <= 3
    am = daemon.daemon.services.automem
    assert len(am.states.states) <= 3
    assert len(am.index_texts) <= 4
    assert len(am.settings) <= 4
    assert len(am._index_views) <= 2 * 3

    # A project let go long ago comes back: its memories are all there, and a file added
    # by hand meanwhile in a subfolder (no stamp of the dir or its index changed) is listed.
    assert dirs[0] not in am.states.states
    extra = dirs[0] / "notes" / "later.md"
    extra.parent.mkdir()
    extra.write_text(memory_text("Later note", "added by hand", "project", "quokkaberry"))
    listed = await daemon.call("memory.list", cwd=str(roots[0]))
    assert sorted(m["name"] for m in listed["memories"]) == ["Deploy rule 0", "Later note"]
    found = await daemon.call("recall", cwd=str(roots[0]), query="quokkaberry")
    assert [m["name"] for m in found["memories"]] == ["Later note"]

    # A project deleted (its memory dir too) is not kept: later projects push it out.
    shutil.rmtree(dirs[1].parent)
    for i, root in enumerate(roots[5:], start=5):
        await daemon.call("recall", cwd=str(root), query=f"zebracorn{i}")
    assert dirs[1] not in am.states.states
    assert len(am.states.states) <= 3
