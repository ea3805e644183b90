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
from typing import NamedTuple

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


# A Candidate's fields, in order, as a plain tuple (`Candidate.fields`, `Candidate._make`).
CandidateFields = tuple[str, str | None, str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]


class Candidate(NamedTuple):
    """A memory as dedupe compares it. Its words are tuples, not frozensets: a loaded memory
    keeps its `fields`, which the collector stops tracking, where a dataclass with three
    frozensets was four of the ~11 objects a memory each full collection walked."""

    key: str
    type: str | None
    normalised: str  # of name + description + body (see `normalise`), computed once per file
    tokens: tuple[str, ...]  # distinct
    name_terms: tuple[str, ...] = ()  # distinct, of the text's first line (`memory_text`'s name)
    identifiers: tuple[str, ...] = ()  # distinct

    def fields(self) -> CandidateFields:
        """The fields as a plain tuple, which the collector stops tracking (not a Candidate,
        a subclass of tuple): what a loaded memory keeps."""
        return (
            self.key,
            self.type,
            self.normalised,
            self.tokens,
            self.name_terms,
            self.identifiers,
        )

    @classmethod
    def of(cls, key: str, type_: str | None, text: str) -> Candidate:
        norm = normalise(text)
        return cls(
            key,
            type_,
            norm,
            tuple(dict.fromkeys(norm.split())),
            tuple(name_terms(text)),
            tuple(identifiers(text)),
        )


def identifiers(text: str) -> frozenset[str]:
    """Identifiers and proper nouns of a text, case-folded (see `_IDENTIFIER`)."""
    return frozenset(m.group().casefold() for m in _IDENTIFIER.finditer(text))


def name_terms(text: str) -> frozenset[str]:
    """The stemmed content words of a memory text's name (its first line)."""
    return frozenset(terms(text.split("\n", 1)[0]))


def distinct_names(a: frozenset[str], b: Iterable[str]) -> bool:
    """Each has a word the other lacks: two different things are named."""
    return not a.issuperset(b) and not a.issubset(b)


def normalise(text: str) -> str:
    return " ".join(raw_tokens(text))


def jaccard(a: frozenset[str], b: frozenset[str] | tuple[str, ...]) -> float:
    """Of two sets of words (`b` may be a tuple of distinct words)."""
    if not a and not b:
        return 1.0
    shared = len(a.intersection(b))
    return shared / (len(a) + len(b) - shared)


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
