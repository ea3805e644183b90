"""Late interaction: a memory scored by its tokens' vectors, not by its one pooled vector.

Each word-like token of the query finds its best cosine among a memory's token vectors (the
encoder's last hidden states); the memory's score is the mean of those, each weighted by the
token's inverse document frequency among the directory's memories, so a rare word the memory
shares in meaning counts more than "did" or "the" (ColBERT's MaxSim, with IDF weights, over a
sentence encoder not trained for it). Fused with the lexical ranker in place of the pooled
cosines, it took LoCoMo hit@5 on the development split from 0.830 to 0.860
(docs/benchmarks.md).

It scores a short list only (`candidates`): the best of the lexical scores and of the pooled
cosines. Of a memory, its first `TOKENS` tokens are kept (`pack`): their ids in one row, their
vectors in another (int8 values, a scale per token), so recall reads the candidates' vectors
alone and document frequencies read the ids alone (`token_store`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

TOKENS = 32  # a memory's first tokens kept; a one-line description has ~17 on average
CANDIDATES = 50  # taken from each ranking, lexical and pooled, before they are merged

IntArray = npt.NDArray[np.int32]
FloatArray = npt.NDArray[np.float32]
ByteRows = npt.NDArray[np.uint8]


@dataclass(frozen=True)
class TokenVectors:
    """One text's tokens without the model's special ones: ids, unit vectors (rows), and
    which of them are word-like (a letter or digit: punctuation says nothing of the topic)."""

    ids: IntArray
    vectors: FloatArray
    wordlike: npt.NDArray[np.bool_]


def token_vectors(
    ids: npt.NDArray[np.integer], hidden: npt.NDArray[np.floating], tokens: list[str]
) -> TokenVectors:
    """A text's `TokenVectors` from the encoder's output for the tokens kept (their ids, last
    hidden states and strings, special tokens already left out): the states as unit vectors."""
    vectors = hidden.astype(np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    wordlike = np.array([any(c.isalnum() for c in t) for t in tokens], dtype=bool)
    return TokenVectors(np.asarray(ids, dtype=np.int32), vectors, wordlike)


@dataclass(frozen=True)
class Frequencies:
    """How many memories hold each token id (ids sorted), out of `memories`."""

    ids: IntArray
    counts: IntArray
    memories: int


def row_width(dim: int) -> int:
    """Bytes of one memory's packed vectors."""
    return TOKENS * (4 + dim)


def pack(tokens: TokenVectors) -> tuple[IntArray, ByteRows]:
    """`tokens` as two rows: the ids (TOKENS int32, -1 past the end), kept apart so document
    frequencies never read the vectors; and the vectors in `row_width` bytes, a float32 scale
    per token, then the int8 values."""
    n, dim = min(len(tokens.ids), TOKENS), tokens.vectors.shape[1]
    ids = np.full(TOKENS, -1, dtype=np.int32)
    ids[:n] = tokens.ids[:n]
    vectors = tokens.vectors[:n].astype(np.float32)
    scales = np.zeros(TOKENS, dtype="<f4")
    scales[:n] = np.maximum(np.abs(vectors).max(axis=1, initial=0.0), 1e-12) / 127.0
    values = np.zeros((TOKENS, dim), dtype=np.int8)
    values[:n] = np.clip(np.rint(vectors / scales[:n, None]), -127, 127)
    return ids, np.concatenate([scales.view(np.uint8), values.view(np.uint8).ravel()])


def _fields(rows: ByteRows, dim: int) -> tuple[FloatArray, npt.NDArray[np.int8]]:
    """(scales, rows × TOKENS; int8 values, rows × TOKENS × dim) of packed vector rows."""
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    if rows.ndim != 2 or rows.shape[1] != row_width(dim):
        raise ValueError(f"packed token rows must be {row_width(dim)} bytes wide")
    scales = np.ascontiguousarray(rows[:, : 4 * TOKENS]).view("<f4").astype(np.float32)
    values = np.ascontiguousarray(rows[:, 4 * TOKENS :]).view(np.int8)
    return scales, values.reshape(len(rows), TOKENS, dim)


def unpack(rows: ByteRows, dim: int) -> FloatArray:
    """The token vectors of packed rows: rows × TOKENS × dim, zero past each memory's end."""
    scales, values = _fields(rows, dim)
    out: FloatArray = values.astype(np.float32) * scales[:, :, None]
    return out


def frequencies(ids: IntArray) -> Frequencies:
    """Document frequencies of the token ids of memories (rows × TOKENS, -1 for none),
    a token counted once a memory."""
    ids = np.sort(np.asarray(ids, dtype=np.int32), axis=1)
    first = np.ones(ids.shape, dtype=bool)
    first[:, 1:] = ids[:, 1:] != ids[:, :-1]
    unique, counts = np.unique(ids[first & (ids >= 0)], return_counts=True)
    return Frequencies(unique.astype(np.int32), counts.astype(np.int32), len(ids))


def idf(ids: IntArray, freq: Frequencies) -> FloatArray:
    """log(1 + N / (1 + df)) of each id: a token no memory holds weighs the most."""
    at = np.searchsorted(freq.ids, ids)
    inside = at < len(freq.ids)
    held = np.zeros(len(ids), dtype=np.float32)
    held[inside] = np.where(freq.ids[at[inside]] == ids[inside], freq.counts[at[inside]], 0)
    weights: FloatArray = np.log1p(freq.memories / (1.0 + held)).astype(np.float32)
    return weights


def scores(query: TokenVectors, ids: IntArray, rows: ByteRows, freq: Frequencies) -> FloatArray:
    """IDF-weighted MaxSim to `query` of each memory, given its token ids and packed vectors
    (higher is closer)."""
    dim = query.vectors.shape[1]
    if not len(rows) or not len(query.ids):
        return np.zeros(len(rows), dtype=np.float32)
    keep = query.wordlike if query.wordlike.any() else np.ones(len(query.ids), dtype=bool)
    q_ids, q_vectors = query.ids[keep], query.vectors[keep].astype(np.float32)
    scales, values = _fields(rows, dim)
    # One matrix product over every (row, token), scaled after: the int8 values times the
    # query, then each token's scale (cheaper than scaling every value first).
    flat = values.reshape(-1, dim).astype(np.float32) @ q_vectors.T
    flat *= scales.reshape(-1, 1)
    similarity = flat.reshape(len(rows), TOKENS, -1)  # row, row token, query token
    similarity[np.asarray(ids) < 0] = -np.inf
    best = similarity.max(axis=1)
    best[~np.isfinite(best)] = 0.0  # a row with no tokens (an empty text)
    weights = idf(q_ids, freq)
    total = float(weights.sum()) or 1.0
    out: FloatArray = (best @ weights / total).astype(np.float32)
    return out


def candidates(lexical: list[str], keys: list[str], cosines: FloatArray) -> list[str]:
    """The memories late interaction scores: the lexical ranker's best (`lexical`, in order)
    and the best `CANDIDATES` by pooled cosine, each once."""
    if len(cosines) > CANDIDATES:
        best = np.argpartition(-cosines, CANDIDATES)[:CANDIDATES]
        best = best[np.argsort(-cosines[best], kind="stable")]
    else:
        best = np.argsort(-cosines, kind="stable")
    return list(dict.fromkeys([*lexical[:CANDIDATES], *(keys[i] for i in best)]))
