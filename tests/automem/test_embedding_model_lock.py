"""The lock daemons sharing a HOME take to convert, quantize or remove memoryd's copy of an
embedding model: waited for a bounded time. Its wait was a blocking flock, and a daemon
stopped with Ctrl-Z while it held the lock held the other's embedding thread for ever (the
ranker 'loading the embedding model' for good, no memory embedded)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.automem.embeddings import models
from memoryd.automem.embeddings.models import EncoderUnavailable, ModelFiles
from tests.fakes.held_lock import held_lock, outcome_of


def test_a_lock_held_past_the_wait_is_unavailable_and_the_copy_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setattr(models, "CONVERT_WAIT_S", 0.2)
    folder = tmp_path / "memoryd" / "models" / "all-MiniLM-L6-v2"
    (folder / "onnx").mkdir(parents=True)
    (folder / "onnx" / "model.onnx").write_bytes(b"graph")
    (folder / "tokenizer.json").write_text("{}")
    files = ModelFiles("m", folder / "onnx" / "model.onnx", folder / "tokenizer.json")
    lock = folder.parent / ".all-MiniLM-L6-v2.lock"
    with held_lock(lock):
        refused = outcome_of(lambda: models.discard_if_made_here(files))
    assert isinstance(refused, EncoderUnavailable)
    assert str(refused) == (
        f"another memoryd has held {lock} over 0 s while converting the model (stopped with "
        "Ctrl-Z?); restart this one once it is done"
    )
    assert (folder / "onnx" / "model.onnx").read_bytes() == b"graph"
    assert models.discard_if_made_here(files)  # the lock let go: removed
    assert not folder.exists()
