"""Near-duplicate detection for writes: same type, and nearly the same words.

Two memories are near duplicates when the token sets of name + description + body overlap
strongly (Jaccard ≥ JACCARD_THRESHOLD), or when the normalised texts are nearly the same
character sequence (difflib ratio ≥ RATIO_THRESHOLD — catches small rewordings of short
texts). The cheap set test runs first; difflib only on candidates that share enough words.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

from memoryd.automem.recall.analysis import raw_tokens

JACCARD_THRESHOLD = 0.8
RATIO_THRESHOLD = 0.9
_PREFILTER = 0.5


@dataclass(frozen=True)
class Candidate:
    key: str
    type: str | None
    normalised: str  # of name + description + body (see `normalise`), computed once per file
    tokens: frozenset[str]

    @classmethod
    def of(cls, key: str, type_: str | None, text: str) -> Candidate:
        norm = normalise(text)
        return cls(key, type_, norm, frozenset(norm.split()))


def normalise(text: str) -> str:
    return " ".join(raw_tokens(text))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def similarity(a: str, b: str) -> float:
    """The larger of token-set Jaccard and difflib ratio over normalised text, 0..1."""
    na, nb = normalise(a), normalise(b)
    ja = jaccard(frozenset(na.split()), frozenset(nb.split()))
    if ja < _PREFILTER:
        return ja
    return max(ja, difflib.SequenceMatcher(None, na, nb, autojunk=False).ratio())


def is_near_duplicate(a: str, b: str) -> bool:
    na, nb = normalise(a), normalise(b)
    ja = jaccard(frozenset(na.split()), frozenset(nb.split()))
    if ja >= JACCARD_THRESHOLD:
        return True
    if ja < _PREFILTER:
        return False
    return difflib.SequenceMatcher(None, na, nb, autojunk=False).ratio() >= RATIO_THRESHOLD


def find_near_duplicate(type_: str, text: str, existing: Iterable[Candidate]) -> str | None:
    """The key of the most similar memory of the same type that is a near duplicate."""
    norm = normalise(text)
    tokens = frozenset(norm.split())
    best: tuple[float, str] | None = None
    for candidate in existing:
        if candidate.type != type_:
            continue
        ja = jaccard(tokens, candidate.tokens)
        if ja < _PREFILTER:
            continue
        score = ja
        if ja < JACCARD_THRESHOLD:
            ratio = difflib.SequenceMatcher(
                None, norm, candidate.normalised, autojunk=False
            ).ratio()
            if ratio < RATIO_THRESHOLD:
                continue
            score = max(ja, ratio)
        if best is None or score > best[0]:
            best = (score, candidate.key)
    return best[1] if best else None


def memory_text(name: str, description: str, body: str) -> str:
    return f"{name}\n{description}\n{body}"
