"""Why the local ranker returned a memory (`recall` with `explain`): the words of the query
the memory holds — of the lines the user wrote, and apart, of those they pasted — the terms
feedback added that it holds, its date and the date signals that raised it, and the scores it
was ranked by. Pure: it reads the index and the query's signals as ranked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memoryd.automem.recall.analysis import raw_tokens, terms

if TYPE_CHECKING:
    from memoryd.automem.recall.ranker import LexicalScores, RecallIndex, Semantic


@dataclass(frozen=True)
class Why:
    words: tuple[str, ...]  # the query's own words the memory holds (as folded: lower case)
    pasted_words: tuple[str, ...]  # the pasted code's and output's
    lexical: float  # its lexical score as a share of the best one
    semantic: float | None  # the model's score fused with it: None without embeddings
    cosine: float | None  # its pooled cosine to the query, on the relevance floors' scale
    # the query's words it holds only by their first letters (grandma ~ grandmother)
    near_words: tuple[str, ...] = ()
    # the terms (stems, as indexed) that pseudo-relevance feedback took from the top memories
    # and it holds, for a memory not among those: what lifted it beside the query's words
    feedback_terms: tuple[str, ...] = ()
    date: str | None = None  # its date as the ranker reads it (ISO), if it has one
    date_signals: tuple[str, ...] = ()  # what raised it: "dated as asked", "says when"…
    date_from: str | None = None  # "text" (its first full date) or "file" (its last write)

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"words": list(self.words), "lexical": round(self.lexical, 3)}
        if self.near_words:
            found["near_words"] = list(self.near_words)
        if self.pasted_words:
            found["pasted_words"] = list(self.pasted_words)
        if self.feedback_terms:
            found["feedback_terms"] = list(self.feedback_terms)
        if self.date is not None:
            found["date"] = self.date
            found["date_from"] = self.date_from or "text"
        if self.date_signals:
            found["date_signals"] = list(self.date_signals)
        if self.semantic is not None:
            found["semantic"] = round(self.semantic, 3)
        if self.cosine is not None:
            found["cosine"] = round(self.cosine, 3)
        return found


Analysed = list[tuple[str, list[str]]]  # each word once, in order, with its terms


def held_words(text: str, held: frozenset[str]) -> tuple[str, ...]:
    """The words of `text` whose terms are among `held`, once each, in the text's order (a
    Chinese or Japanese run when one of its character pairs is)."""
    return _held(_analysed(text), held)


def _analysed(text: str, kept: frozenset[str] | None = None) -> Analysed:
    """Each word of `text` once, in order, with its terms (those in `kept`, when given):
    made once for all the memories."""
    words = [(word, terms(word)) for word in dict.fromkeys(raw_tokens(text))]
    if kept is not None:
        words = [(word, [t for t in found if t in kept]) for word, found in words]
    return words


def _held(words: Analysed, held: frozenset[str]) -> tuple[str, ...]:
    return tuple(word for word, found in words if any(t in held for t in found))


def _near(words: Analysed, held: frozenset[str], length: int) -> tuple[str, ...]:
    """The words that match a term of `held` only by their first `length` letters, as the
    ranker's prefix matches do (words of fewer letters match whole or not at all)."""
    if not length:
        return ()
    heads = {t[:length] for t in held if len(t) >= length}
    return tuple(
        word
        for word, found in words
        if not any(t in held for t in found)
        and any(len(t) >= length and t[:length] in heads for t in found)
    )


def explain(
    index: RecallIndex,
    lexical: LexicalScores,
    keys: list[str],
    semantic: Semantic | None = None,
    cosines: Semantic | None = None,
    *,
    floors: bool = True,
) -> dict[str, Why]:
    """Why each of `keys` was returned for the query `lexical` was made for; `semantic` and
    `cosines` as the ranker got them (hybrid ranking), the cosines' floors applied or not."""
    lexical = index.current(lexical)  # once: made again if the index changed since
    prompt = index.prompt(lexical.query)
    # the words the ranker ranked by: question-shaping ones ("kind", "did") left out
    written = _analysed(prompt.written, frozenset(index.written_terms(prompt.written)))
    pasted = _analysed(prompt.pasted)
    # a pasted word also written counts as written
    written_terms = frozenset(t for _, found in written for t in found)
    prefix = index.params.prefix_len if index.params.prefix_weight else 0
    semantic_of = _lookup(semantic, keys)
    cosine_of = _lookup(cosines, keys)
    feedback = index.feedback_terms(lexical)
    sources = {key for found in feedback.values() for key in found}
    signals = index.date_signals(lexical, keys, semantic, cosines if floors else None)
    whys = {}
    for key in keys:
        held = index.terms_of(key)
        when = index.memory_date(key)
        share = index.lexical_share(lexical, key)
        # feedback reorders only what the query matched: none lifted a memory it did not
        lifted_by = () if key in sources or not share else tuple(t for t in feedback if t in held)
        whys[key] = Why(
            _held(written, held),
            _held(pasted, held - written_terms),
            share,
            semantic_of.get(key),
            cosine_of.get(key),
            _near(written, held, prefix),
            lifted_by,
            when.isoformat() if when else None,
            signals.get(key, ()),
            ("file" if index.dated_by_file(key) else "text") if when else None,
        )
    return whys


def _lookup(signal: Semantic | None, wanted: list[str]) -> dict[str, float]:
    """The value `signal` gives each of the `wanted` keys that it has."""
    if signal is None:
        return {}
    keys, values = signal
    positions = {key: i for i, key in enumerate(keys)}
    return {key: float(values[positions[key]]) for key in wanted if key in positions}
