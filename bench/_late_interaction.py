"""The hybrid's semantic side for the LoCoMo benches, computed as the daemon computes it.

A conversation's memories and questions are embedded once (`token_arrays`: pooled vectors,
and token vectors packed as memoryd stores them); `LateScores` then gives each question's
semantic scores the way `automem/embeddings/semantic.py` does: the candidates (the lexical
ranker's best and the best by pooled cosine), scored by IDF-weighted MaxSim
(`automem/embeddings/late_interaction.py`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memoryd.automem.embeddings import late_interaction as li
from memoryd.automem.recall.ranker import LexicalScores, RecallIndex, Semantic

Arrays = dict[str, np.ndarray]


def token_arrays(name: str, memories: Any, questions: Any) -> Arrays:
    """Conversation `name`'s arrays from (pooled vectors, token vectors) of its memories and of
    its questions (`SentenceEncoder.encode_tokens`'s result): the memories' tokens packed as
    memoryd stores them (`pack`), the questions' concatenated, with offsets."""
    (m_pooled, m_tokens), (q_pooled, q_tokens) = memories, questions
    packed = [li.pack(t) for t in m_tokens]
    return {
        f"{name}_m": m_pooled,
        f"{name}_q": q_pooled,
        f"{name}_mids": np.stack([ids for ids, _ in packed]),
        f"{name}_mrows": np.stack([row for _, row in packed]),
        f"{name}_qids": np.concatenate([t.ids for t in q_tokens]),
        f"{name}_qvectors": np.concatenate([t.vectors for t in q_tokens]).astype(np.float32),
        f"{name}_qwordlike": np.concatenate([t.wordlike for t in q_tokens]),
        f"{name}_qends": np.cumsum([len(t.ids) for t in q_tokens]),
    }


def has_tokens(arrays: Arrays, name: str) -> bool:
    return f"{name}_mids" in arrays


class LateScores:
    """One conversation's semantic scores for its questions (`keys`: its memories, in the
    order they were embedded)."""

    def __init__(self, arrays: Arrays, name: str, keys: list[str]) -> None:
        self.arrays, self.name, self.keys = arrays, name, keys
        self.slot = {k: i for i, k in enumerate(keys)}
        self.freq = li.frequencies(arrays[f"{name}_mids"])

    def cosines(self, question: int) -> np.ndarray:
        return np.asarray(self.arrays[f"{self.name}_m"] @ self.arrays[f"{self.name}_q"][question])

    def semantic(
        self,
        index: RecallIndex,
        lexical: LexicalScores,
        question: int,
        cosines: np.ndarray | None = None,
    ) -> Semantic:
        """Late interaction over the candidates, as the daemon fuses it (`cosines`: the
        question's pooled cosines, when the caller has them already)."""
        a, name, ends = self.arrays, self.name, self.arrays[f"{self.name}_qends"]
        if cosines is None:
            cosines = self.cosines(question)
        wanted = li.candidates(index.best(lexical, li.CANDIDATES), self.keys, cosines)
        rows = [self.slot[k] for k in wanted]
        part = slice(ends[question - 1] if question else 0, ends[question])
        tokens = li.TokenVectors(
            a[f"{name}_qids"][part], a[f"{name}_qvectors"][part], a[f"{name}_qwordlike"][part]
        )
        return wanted, li.scores(
            tokens, a[f"{name}_mids"][rows], a[f"{name}_mrows"][rows], self.freq
        )
