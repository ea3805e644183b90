"""Near-duplicate detection for writes: same type, and nearly the same words.

Two memories are near duplicates when the token sets of name + description + body overlap
strongly (Jaccard ≥ JACCARD_THRESHOLD), or when the normalised texts are nearly the same
character sequence (difflib ratio ≥ RATIO_THRESHOLD — catches small rewordings of short
texts). The cheap set test runs first; difflib only on candidates that share enough words.

Names are compared apart (`distinct_names`): when each name has a content word the other
lacks ("Billing service on-call", "Search service on-call"), the two are different facts
however many other words they share — one differing entity among a dozen words still scored
over 0.8. A name that only adds or drops a word, or words that share a stem ("test", "tests"),
is still a rewording. So are texts apart (`identifiers`): when each names an identifier or a
proper noun the other does not (`db-billing-staging.internal` and `db-search-staging.internal`,
port 5432 and 5433, "page Dana" and "page Sam"), they are two facts, not one reworded.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from memoryd.automem.recall.analysis import raw_tokens, terms

JACCARD_THRESHOLD = 0.8
RATIO_THRESHOLD = 0.9
_PREFILTER = 0.5
# A word holding a digit or joined by `-`, `.`, `_`, `/`, `:` (a host, a path, a version, a
# port), or a capitalised word that starts no line or sentence (a name: Dana, PagerDuty).
# Each starts at a word boundary and never gives back a word (`\w++`): linear in the text.
_IDENTIFIER = re.compile(
    r"\b\w++(?:[-._/:]\w++)+|\b\w*\d\w*\b|(?<![.!?:] )(?<!^)\b[A-Z]\w+", re.MULTILINE
)


@dataclass(frozen=True)
class Candidate:
    key: str
    type: str | None
    normalised: str  # of name + description + body (see `normalise`), computed once per file
    tokens: frozenset[str]
    name_terms: frozenset[str] = frozenset()  # of the text's first line (`memory_text`'s name)
    identifiers: frozenset[str] = frozenset()

    @classmethod
    def of(cls, key: str, type_: str | None, text: str) -> Candidate:
        norm = normalise(text)
        return cls(key, type_, norm, frozenset(norm.split()), name_terms(text), identifiers(text))


def identifiers(text: str) -> frozenset[str]:
    """Identifiers and proper nouns of a text, case-folded (see `_IDENTIFIER`)."""
    return frozenset(m.group().casefold() for m in _IDENTIFIER.finditer(text))


def name_terms(text: str) -> frozenset[str]:
    """The stemmed content words of a memory text's name (its first line)."""
    return frozenset(terms(text.split("\n", 1)[0]))


def distinct_names(a: frozenset[str], b: frozenset[str]) -> bool:
    """Each set has a word the other lacks: two different things are named."""
    return bool(a - b) and bool(b - a)


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
    if distinct_names(name_terms(a), name_terms(b)) or distinct_names(
        identifiers(a), identifiers(b)
    ):
        return False
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
    named, idents = name_terms(text), identifiers(text)
    best: tuple[float, str] | None = None
    for candidate in existing:
        if (
            candidate.type != type_
            or distinct_names(named, candidate.name_terms)
            or distinct_names(idents, candidate.identifiers)
        ):
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
