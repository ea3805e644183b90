"""The relevance floors' scale: a model's cosines measured on unrelated sentences, and moved
onto the scale the floors were set on (all-MiniLM-L6-v2's)."""

from __future__ import annotations

import numpy as np

from memoryd.automem.embeddings.cosine_scale import REFERENCE, UNRELATED, CosineScale, measure
from memoryd.automem.recall.ranker import RecallIndex


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _model_like(shared: float, seed: int = 0) -> np.ndarray:
    """Unit vectors of `UNRELATED` for a model whose vectors all lean one way by `shared`
    (as models with a compressed cosine range do: unrelated texts score ~0.4)."""
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((len(UNRELATED), 64))
    return _unit(_unit(noise) + shared * _unit(np.ones((1, 64))))


def test_measure_finds_the_noise_level_and_spread() -> None:
    spread_out = measure(_model_like(0.0))
    leaning = measure(_model_like(0.9))
    assert spread_out is not None
    assert leaning is not None
    assert abs(spread_out.noise) < 0.05  # random directions: about orthogonal
    assert 0.35 < leaning.noise < 0.55
    assert spread_out.spread > 0
    assert leaning.spread > 0
    # All alike (a broken model): nothing to calibrate on.
    assert measure(np.tile(_unit(np.ones((1, 8))), (len(UNRELATED), 1))) is None


def test_cosines_move_onto_the_floors_scale() -> None:
    model = CosineScale(noise=0.39, spread=0.09)
    moved = model.to(REFERENCE, np.array([0.39, 0.39 + 0.09, 0.39 + 2 * 0.09]))
    # The model's noise level is MiniLM's, and a spread above it is MiniLM's spread above it.
    assert np.allclose(
        moved,
        [
            REFERENCE.noise,
            REFERENCE.noise + REFERENCE.spread,
            REFERENCE.noise + 2 * REFERENCE.spread,
        ],
    )
    assert np.allclose(REFERENCE.to(REFERENCE, np.array([0.1, 0.2])), [0.1, 0.2])


def test_a_model_on_another_scale_keeps_its_floors() -> None:
    """With cosines around 0.4 for anything, the floors would pass every memory unless the
    cosines are moved onto their scale first."""
    idx = RecallIndex()
    keys = ["kayak.md", "coffee.md", "deploys.md"]
    for key, text in zip(keys, ("rows a kayak", "likes coffee", "deploys on Fridays"), strict=True):
        idx.upsert(key, key, text, "")
    fused = (keys, np.array([0.9, 0.8, 0.1], dtype=np.float32))  # two above the mean
    raw = np.array([0.62, 0.43, 0.40], dtype=np.float32)  # kayak close; the others noise
    unmoved = idx.search("paddling", 5, semantic=fused, cosines=(keys, raw))
    assert [k for k, _ in unmoved] == ["kayak.md", "coffee.md"]  # 0.43 passes 0.2
    moved = CosineScale(noise=0.39, spread=0.09).to(REFERENCE, raw)
    got = idx.search("paddling", 5, semantic=fused, cosines=(keys, moved))
    assert [k for k, _ in got] == ["kayak.md"]  # 0.43 is 0.09 on the floors' scale


def test_a_sentence_the_model_did_not_read_is_not_measured() -> None:
    # A sentence the model gives no number for (or of no token it knows) has a zero vector
    # (`encode_tokens`): its cosines of 0 pulled the noise level down, three of them from
    # 0.018 to 0.0 here, and the floors let more memories pass.
    vectors = _model_like(0.2)
    read = measure(vectors[3:])
    assert read is not None
    some_unread = vectors.copy()
    some_unread[:3] = 0.0
    assert measure(some_unread) == read
    # Most of them unread: a model that reads so little is not calibrated on what is left.
    mostly_unread = vectors.copy()
    mostly_unread[: len(UNRELATED) // 2 + 1] = 0.0
    assert measure(mostly_unread) is None
    assert measure(np.zeros_like(vectors)) is None


def _almost_alike(noise: float, seed: int = 0) -> np.ndarray:
    """Unit vectors of `UNRELATED` for a damaged model: one vector for every text but for a
    little noise (`noise` per coordinate), its cosines all near 1."""
    rng = np.random.default_rng(seed)
    return _unit(np.ones((len(UNRELATED), 64)) + noise * rng.standard_normal((len(UNRELATED), 64)))


def test_a_model_whose_cosines_barely_spread_is_refused() -> None:
    # Cosines spread ~2e-5 were accepted (the bar was 1e-6): moved onto the floors' scale,
    # divided by that spread, a cosine's rounding noise came out ~5,000 times larger.
    damaged = _almost_alike(0.01)
    cosines = (damaged @ damaged.T)[np.triu_indices(len(UNRELATED), 1)]
    assert 1e-5 < np.percentile(cosines, 90) - np.percentile(cosines, 50) < 1e-4
    assert measure(damaged) is None
    # Real models spread 0.03–0.11; one spread out a little more than the bar is measured.
    spread = measure(_almost_alike(0.03))
    assert spread is not None
    assert 1e-4 < spread.spread < 1e-3
