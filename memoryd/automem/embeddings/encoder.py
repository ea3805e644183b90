"""A sentence encoder: an ONNX BERT-style model, mean-pooled and L2-normalised.

Which model and where its files come from: `models`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from memoryd.automem.embeddings.late_interaction import TokenVectors, token_vectors
from memoryd.automem.embeddings.models import EncoderUnavailable, ModelFiles

MAX_TOKENS = 256  # a memory's one-line description fits many times over

Vectors = npt.NDArray[np.float32]


class SentenceEncoder:
    def __init__(self, files: ModelFiles) -> None:
        try:
            import onnxruntime  # type: ignore[import-untyped]
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EncoderUnavailable(f"embeddings extra not installed ({exc.name})") from exc
        self.name = files.name
        self.batch = files.batch
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
        # Pad to the batch's longest text (not a fixed length), with the model's own pad token.
        padding = self._tokenizer.padding or {}
        self._tokenizer.enable_padding(
            pad_id=padding.get("pad_id", 0), pad_token=padding.get("pad_token", "[PAD]")
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        unk = getattr(self._tokenizer.model, "unk_token", None)
        self._unk_id: int | None = self._tokenizer.token_to_id(unk) if unk else None
        self.dim = int(self.encode(["dimension probe"]).shape[1])

    def encode(self, texts: list[str]) -> Vectors:
        """One unit vector per text (float32, rows in order)."""
        return self.encode_tokens(texts)[0] if texts else np.zeros((0, 0), dtype=np.float32)

    def knows_nothing_of(self, texts: list[str]) -> list[bool]:
        """For each text, whether it has no token the model knows (`encode_tokens` gives it a
        zero vector): tokenized only, no model run."""
        out: list[bool] = []
        for start in range(0, len(texts), 256):
            for encoding in self._tokenizer.encode_batch(texts[start : start + 256]):
                out.append(
                    not any(
                        kept and not special and token != self._unk_id
                        for token, special, kept in zip(
                            encoding.ids,
                            encoding.special_tokens_mask,
                            encoding.attention_mask,
                            strict=True,
                        )
                    )
                )
        return out

    def encode_tokens(self, texts: list[str]) -> tuple[Vectors, list[TokenVectors]]:
        """Each text's unit vector (the mean of its token vectors), and its tokens' own unit
        vectors (special tokens left out) for late interaction: one model run gives both.

        A text with no token the model knows (Thai, "ǅ", a word of over 100 letters: all
        [UNK]; or nothing but spaces) says nothing to it: its vector is zero, cosine 0 to
        everything, and it has no token vectors. Averaged, every such text was one and the
        same [UNK] vector, so any of them matched any other at cosine 1.0.

        A text the model gives NaN or infinity for (a graph overflowing on some inputs, as an
        fp16 one can) says nothing either, and is given the same: a NaN cosine passed every
        relevance floor, so such a query recalled memories that share nothing with it."""
        pooled_rows: list[Vectors] = []
        token_lists: list[TokenVectors] = []
        for start in range(0, len(texts), self.batch):
            batch = self._tokenizer.encode_batch(texts[start : start + self.batch])
            ids = np.array([e.ids for e in batch], dtype=np.int64)
            mask = np.array([e.attention_mask for e in batch], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self._session.run(None, feeds)[0]
            kept = mask[..., None].astype(bool)
            # Padding left out, not multiplied by 0: a NaN there (0 × NaN is NaN) made the
            # vector of a text whose own tokens were fine NaN too.
            counts = np.maximum(kept.sum(axis=1), 1).astype(np.float32)
            with np.errstate(invalid="ignore", over="ignore"):  # judged by `finite` below
                pooled = np.where(kept, hidden, np.float32(0.0)).sum(axis=1) / counts
                norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
                pooled = (pooled / norms).astype(np.float32)
            finite = np.isfinite(pooled).all(axis=1)
            for row, encoding in enumerate(batch):
                real = np.array(encoding.attention_mask, dtype=bool) & ~np.array(
                    encoding.special_tokens_mask, dtype=bool
                )
                if not finite[row] or not (real & (ids[row] != self._unk_id)).any():
                    pooled[row] = 0.0
                    real[:] = False
                strings = [t for t, keep in zip(encoding.tokens, real, strict=True) if keep]
                token_lists.append(token_vectors(ids[row][real], hidden[row][real], strings))
            pooled_rows.append(pooled)
        return np.vstack(pooled_rows), token_lists
