"""A memory directory's token vectors, for late interaction: two vector stores changed
together, one of token ids (int32 rows, small: document frequencies read them all) and one of
packed token vectors (bytes: recall reads only its candidates' rows), and the ids' document
frequencies, made again whenever the ids change."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from memoryd.automem.embeddings import late_interaction
from memoryd.automem.embeddings.late_interaction import (
    ByteRows,
    Frequencies,
    IntArray,
    TokenVectors,
)
from memoryd.automem.embeddings.vectors import VectorStore


class TokenStore:
    def __init__(self, folder: Path, model: str, dim: int) -> None:
        self.ids = VectorStore(
            folder / "token-ids", f"{model} token ids", late_interaction.TOKENS, np.int32
        )
        self.vectors = VectorStore(
            folder / "tokens", f"{model} tokens", late_interaction.row_width(dim), np.uint8
        )
        self.frequencies: Frequencies | None = None  # None until `refresh` after a load

    def load(self) -> list[str]:
        """Both stores from disk; what of them was not used, and why."""
        reasons = []
        for store in (self.ids, self.vectors):
            store.load()
            if store.rebuilt_reason:
                reasons.append(store.rebuilt_reason)
        return reasons

    @property
    def dirty(self) -> bool:
        return self.ids.dirty or self.vectors.dirty

    def stale(self, wanted: dict[str, str]) -> tuple[list[str], list[str]]:
        """(keys either store lacks or holds for other content, keys no longer wanted)."""
        missing_ids, gone_ids = self.ids.stale(wanted)
        missing_vectors, gone_vectors = self.vectors.stale(wanted)
        missing = list(dict.fromkeys([*missing_ids, *missing_vectors]))
        return missing, list(dict.fromkeys([*gone_ids, *gone_vectors]))

    def put(
        self, items: list[tuple[str, str]], tokens: list[TokenVectors], copies: list[int]
    ) -> None:
        """`tokens[i]` for the next `copies[i]` of `items` (memories of one text: packed once)."""
        packed = [late_interaction.pack(t) for t in tokens]
        self.vectors.put(items, np.repeat(np.vstack([rows for _, rows in packed]), copies, axis=0))
        self.ids.put(items, np.repeat(np.vstack([ids for ids, _ in packed]), copies, axis=0))

    def remove(self, keys: list[str]) -> None:
        self.ids.remove(keys)
        self.vectors.remove(keys)

    def save(self) -> None:
        self.vectors.save()
        self.ids.save()

    def refresh(self) -> None:
        self.frequencies = late_interaction.frequencies(self.ids.rows()[1])

    def rows(self, keys: list[str]) -> tuple[list[str], IntArray, ByteRows]:
        """(those of `keys` both stores hold, their token ids, their packed vectors)."""
        found, vectors = self.vectors.rows(keys)
        held, ids = self.ids.rows(found)
        if len(held) < len(found):  # a change between the two reads: only those in both
            both = set(held)
            vectors = vectors[[i for i, key in enumerate(found) if key in both]]
            found = held
        return found, ids, vectors
