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
from tests.automem.run_apart import output_of
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
    monkeypatch.setattr(warmup, "MAX_WARM_DIRS", 3)
    monkeypatch.setattr(index_cache, "MAX_CACHED_INDEXES", 4)
    monkeypatch.setattr(settings_cache, "MAX_CACHED_ROOTS", 4)
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


# A fresh interpreter, numpy not imported yet: which thread imports it during a first load.
_FIRST_LOAD = """
import asyncio, sys, tempfile, threading
from pathlib import Path
from memoryd.automem.warmup import DirStates

assert "numpy" not in sys.modules
importers = []

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "numpy":
            importers.append(threading.current_thread() is threading.main_thread())
        return None

sys.meta_path.insert(0, Watch())
memdir = Path(tempfile.mkdtemp())
for i in range(3):
    text = f"---\\nname: m{i}\\ndescription: d{i}\\ntype: user\\n---\\n\\nbody {i}\\n"
    (memdir / f"m{i}.md").write_text(text)

async def main():
    states = DirStates(asyncio.ensure_future)
    states.warm(memdir)
    state = await states.ready(memdir)
    assert len(state.entries) == 3, state.entries

asyncio.run(main())
print("on the loop" if importers[0] else "in a thread")
"""


def test_a_first_load_imports_numpy_off_the_event_loop() -> None:
    # The recall index imports numpy with its first memory: one step of ~50 ms on the loop.
    assert output_of(_FIRST_LOAD) == "in a thread"
