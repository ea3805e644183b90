"""The local ranker: an in-memory BM25F index over name, description and body.

Documents are added, replaced and removed one at a time (a changed file costs one
re-analysis, never a rebuild). Scoring is BM25F — per-field weights and length
normalisation, one saturation — vectorised with numpy: each term keeps its postings as
(slot, impact) arrays, built lazily and dropped when the term's postings change, so a
query costs a few array operations per term even at 10,000 memories. A prompt's pasted
code and output (`pasted.py`) weigh less than its own words. On top of it: one round of
pseudo-relevance feedback, a coordination factor, a penalty for memories that miss a term
naming other memories, adjacent-pair (bigram) bonuses, three temporal signals (a date the
query names; memories dated the same day as a strong hit; memories that say when, for a
question asking when), and a last pass that keeps near-copies of one memory from filling the
results (maximal marginal relevance).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any

from memoryd.automem.recall import analysis
from memoryd.automem.recall.analysis import terms
from memoryd.automem.recall.dates import (
    DateQuery,
    asks_when,
    mentions_time,
    query_date,
    relative_event,
    without_date_label,
)
from memoryd.automem.recall.keysets import KeySets
from memoryd.automem.recall.pasted import Prompt, split_prompt

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]
    BoolArray = npt.NDArray[np.bool_]
else:
    from memoryd.lazyimport import LazyModule

    # numpy (~12 MB) is imported by the first memory indexed or query ranked, not at start-up.
    np = LazyModule("numpy", globals(), "np")


# Of each of a memory's fields (name, description, body), the characters indexed. A memory's
# analysis runs on the event loop in one step, and stemming a new word costs ~80 µs (pure
# Python Snowball): a 200 KB file of distinct words (a pasted log of ids) held the loop 2.3 s
# on each load and edit. Memories are a few hundred characters (memoryd writes at most
# 200,000 bytes); past this a body's words are not recalled by the local ranker.
MAX_INDEXED_CHARS = 10_000


@dataclass(frozen=True)
class RankerParams:
    """Tuned on the LoCoMo development split only (bench/bench_recall_locomo.py)."""

    weights: tuple[float, float, float] = (2.0, 1.0, 1.0)  # name, description, body
    b: tuple[float, float, float] = (0.5, 0.4, 0.4)
    k1: float = 1.2
    # Pseudo-relevance feedback: the strongest new terms of the top documents join the query.
    prf_docs: int = 3
    prf_terms: int = 8
    prf_weight: float = 0.15
    coord: float = 1.0  # score × (share of query weight the memory matches) ** coord
    name_miss: float = 0.8  # score × this per query term that names memories but not this one
    # Memories dated the same day (saved from one conversation) lend each other part of the
    # best score among them in the top `group_top`.
    group_weight: float = 0.3
    group_top: int = 5
    # A query naming a date favours memories dated then (or up to `date_slack` days later).
    date_boost: float = 0.5
    date_slack: int = 14
    # A "when?" question favours memories that say when (last week, in 2022, two years ago).
    when_boost: float = 0.4
    # Diversity: a candidate that repeats what a better one already says loses this share of
    # its score per unit of overlap (tf-idf cosine); 0 turns it off.
    diversity: float = 0.15
    diversity_pool: int = 20
    # Query terms also match vocabulary sharing their first `prefix_len` letters
    # (grandma ~ grandmother, mentorship ~ mentor), at `prefix_weight`; 0 turns it off.
    prefix_len: int = 6
    prefix_weight: float = 0.3
    # Adjacent query term pairs found adjacent in a memory add `bigram_weight` × idf.
    bigram_weight: float = 0.1
    # Drop words that shape a question but say little about its topic ("what kind of").
    drop_question_words: bool = True
    # Hybrid recall (embeddings on): lexical scores scaled to the best one, plus this × each
    # given memory's semantic score (late interaction over the candidates, or the pooled
    # cosine) as a z-score over those memories (positive part, / 3), before the temporal
    # signals. Chosen on the development split: for late interaction 1.5 was best or tied in
    # every leave-one-conversation-out fold; for pooled cosines it is as good as 2.0.
    semantic_weight: float = 1.5
    # Relevance floors (embeddings on), on each memory's pooled cosine to the query: under
    # `relevance_floor` a memory is not returned, nor under `semantic_only_floor` when no
    # query term matches it. An off-topic prompt then recalls nothing instead of the five
    # memories least unlike it. Set on all-MiniLM-L6-v2's cosines (bench/bench_recall_precision.py;
    # another model's are moved onto that scale first: embeddings/cosine_scale.py); LoCoMo's
    # development split scores the same with them. A lexical match under 0.15 is a shared
    # common word ("project", "test") in a directory large enough to hold one: in LoCoMo's
    # directories the prompts about none recalled 0.9 memories each at 0.1, 0.6 at 0.15.
    # 0 turns each off.
    relevance_floor: float = 0.15
    semantic_only_floor: float = 0.2
    # Code and output pasted into a prompt (`pasted.py`): its terms weigh `pasted_weight` each
    # (once, however often they occur), so they reorder what the user's own words match; a
    # memory that only they match must hold `pasted_min_terms` of them. Alone, a block of
    # code recalled memories sharing one of its common words ("line", "user", "value"):
    # bench/bench_recall_pasted.py. 1.0 and 1 read the prompt as one text.
    pasted_weight: float = 0.3
    pasted_min_terms: int = 2


Semantic = tuple[list[str], "npt.NDArray[np.floating[Any]]"]  # (keys, score of each)


@dataclass
class LexicalScores:
    """The first part of a search: the query's lexical scores, before the semantic ones join
    them (`RecallIndex.rank`). Split so the query can be embedded meanwhile."""

    query: str
    exclude: tuple[str, ...]
    excluded: IntArray  # their slots
    scores: FloatArray | None  # None: the index is empty
    has_terms: bool  # the query has words the ranker uses
    mutations: int  # the index's, when scored
    # the terms pseudo-relevance feedback added to the query, each with the keys of the top
    # memories it came from
    feedback: dict[str, tuple[str, ...]] = field(default_factory=dict)
    today: date | None = None  # what "yesterday" or "last week" in the query count from
    # the lines the user wrote, without what they pasted: the dates a query asks about are in
    # those ("date.today()" in pasted code, "3 days ago" in a pasted git log are not)
    written: str = ""


@dataclass
class _Doc:
    slot: int
    lengths: tuple[int, int, int]
    tfs: dict[str, tuple[int, int, int]]
    when: date | None
    bigrams: tuple[str, ...]  # a tuple, not a frozenset: the collector skips it once it has seen it


# Average field lengths are frozen until they drift this much (relative), so cached
# impacts stay valid across small updates; BM25 barely moves with small drifts.
_AVG_DRIFT = 0.05


def _bm25_idf(n: int, df: int) -> float:
    """BM25's idf of a term (or adjacent pair) held by `df` of `n` memories."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


class RecallIndex:
    def __init__(self, params: RankerParams | None = None) -> None:
        self.params = params or RankerParams()
        self._docs: dict[str, _Doc] = {}
        self._keys: list[str | None] = []  # slot → key
        self._free: list[int] = []
        self._postings: dict[str, dict[int, tuple[int, int, int]]] = {}  # term → slot → tf
        self._name_df: Counter[str] = Counter()  # docs whose name holds the term
        self._vocab: list[str] = []  # sorted, for prefix expansion
        self._bigrams: KeySets[str, str] = KeySets()  # pair → holders' keys
        self._bigram_arrays: dict[str, IntArray] = {}  # pair → holders' slots, cached
        self._days: dict[int, set[int]] = {}  # date ordinal → slots dated then
        self._day_arrays: dict[int, IntArray] = {}  # the same as arrays, cached
        self._length_sums = [0, 0, 0]
        # Slot → its field lengths, slot → date ordinal (0: undated) and slot → dated by its
        # file's last write, not its text; all with room for more slots than are used, grown
        # together by doubling (`_make_room`).
        self._lengths: FloatArray | None = None
        self._date_array: IntArray | None = None
        self._by_file_array: BoolArray | None = None
        self._avgs: tuple[float, float, float] | None = None
        self._arrays: dict[str, tuple[IntArray, FloatArray]] = {}
        self._timed: set[int] = set()  # slots of memories that mention a time
        self._mutations = 0  # bumps on every upsert and remove
        self._idf_cache: dict[str, float] = {}  # valid while `_mutations` is `_idf_mutations`
        self._idf_mutations = 0
        self._vectors: dict[int, dict[str, float]] = {}  # slot → `_content_vector`, likewise
        # Per use ("fuse", "floors"): (keys, mutations, slots, rows) of the last keys seen.
        self._slots_cache: dict[str, tuple[list[str], int, IntArray, IntArray]] = {}

    @property
    def _dates(self) -> IntArray:
        """Slot → date ordinal, 0 when undated, for the slots in use (a view: writes go through)."""
        if self._date_array is None:  # nothing indexed yet (numpy is imported on first use)
            return np.zeros(0, dtype=np.int64)
        return self._date_array[: len(self._keys)]

    @property
    def _by_file(self) -> BoolArray:
        """Slot → dated by its file's last write (a view, like `_dates`)."""
        if self._by_file_array is None:
            return np.zeros(0, dtype=np.bool_)
        return self._by_file_array[: len(self._keys)]

    def _make_room(self, slot: int) -> None:
        """Grow the per-slot arrays, by doubling, so that `slot` fits."""
        old_lengths, old_dates, old_by_file = self._lengths, self._date_array, self._by_file_array
        if old_lengths is not None and slot < len(old_lengths):
            return
        size = max(2 * slot, 64)
        self._lengths = np.zeros((size, 3), dtype=np.float64)
        self._date_array = np.zeros(size, dtype=np.int64)
        self._by_file_array = np.zeros(size, dtype=np.bool_)
        if old_lengths is not None and old_dates is not None and old_by_file is not None:
            self._lengths[: len(old_lengths)] = old_lengths
            self._date_array[: len(old_dates)] = old_dates
            self._by_file_array[: len(old_by_file)] = old_by_file

    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, key: object) -> bool:
        return key in self._docs

    def keys(self) -> list[str]:
        return list(self._docs)

    def terms_of(self, key: str) -> frozenset[str]:
        """The terms the memory's name, description and body hold (none for an unknown key)."""
        doc = self._docs.get(key)
        return frozenset(doc.tfs) if doc is not None else frozenset()

    def lexical_share(self, lexical: LexicalScores, key: str) -> float:
        """The memory's lexical score for the query as a share of the best one (0 to 1)."""
        lexical = self.current(lexical)
        doc = self._docs.get(key)
        if doc is None or lexical.scores is None:
            return 0.0
        best = float(lexical.scores.max())
        return float(lexical.scores[doc.slot]) / best if best > 0 else 0.0

    # -- updates ----------------------------------------------------------------------------
    def upsert(
        self,
        key: str,
        name: str,
        description: str,
        body: str,
        when: date | None = None,
        *,
        dated_by_file: bool = False,
    ) -> None:
        """Index a memory (again), dated `when`: the first full date in its text, or, with
        `dated_by_file`, the day its file was last written."""
        self._remove(key)
        self._mutations += 1
        name, description, body = (
            name[:MAX_INDEXED_CHARS],
            description[:MAX_INDEXED_CHARS],
            body[:MAX_INDEXED_CHARS],
        )
        field_terms = [
            terms(name),
            terms(without_date_label(description)),
            terms(without_date_label(body)),
        ]
        counts = [Counter(ft) for ft in field_terms]
        lengths = (len(field_terms[0]), len(field_terms[1]), len(field_terms[2]))
        vocabulary = set(counts[0]) | set(counts[1]) | set(counts[2])
        # sorted: every later walk over a memory's terms (sums included) is in one order,
        # whatever the interpreter's hash seed
        tfs = {t: (counts[0][t], counts[1][t], counts[2][t]) for t in sorted(vocabulary)}
        bigrams = tuple({f"{a} {b}": None for ft in field_terms for a, b in itertools.pairwise(ft)})
        slot = self._free.pop() if self._free else len(self._keys)
        self._make_room(slot)
        if slot == len(self._keys):
            self._keys.append(key)
        else:
            self._keys[slot] = key
        self._dates[slot] = when.toordinal() if when else 0
        self._by_file[slot] = dated_by_file and when is not None
        if when:
            self._days.setdefault(when.toordinal(), set()).add(slot)
            self._day_arrays.pop(when.toordinal(), None)
        assert self._lengths is not None  # `_make_room` made it
        self._lengths[slot] = lengths
        self._docs[key] = _Doc(slot, lengths, tfs, when, bigrams)
        if mentions_time(f"{description}\n{body}"):
            self._timed.add(slot)
        for term, tf in tfs.items():
            posting = self._postings.get(term)
            if posting is None:
                posting = self._postings[term] = {}
                bisect.insort(self._vocab, term)
            posting[slot] = tf
            self._arrays.pop(term, None)
            if tf[0]:
                self._name_df[term] += 1
        for pair in bigrams:
            self._bigrams.add(pair, key)
            self._bigram_arrays.pop(pair, None)
        for i in range(3):
            self._length_sums[i] += lengths[i]
        self._check_drift()

    def remove(self, key: str) -> None:
        self._remove(key)
        self._check_drift()  # removals move the averages as much as additions do

    def _remove(self, key: str) -> None:
        doc = self._docs.pop(key, None)
        if doc is None:
            return
        self._mutations += 1
        self._timed.discard(doc.slot)
        for term, tf in doc.tfs.items():
            self._arrays.pop(term, None)
            if tf[0]:
                self._name_df[term] -= 1
                if self._name_df[term] <= 0:
                    del self._name_df[term]
            posting = self._postings.get(term)
            if posting is None:
                continue
            posting.pop(doc.slot, None)
            if not posting:
                del self._postings[term]
                at = bisect.bisect_left(self._vocab, term)
                if at < len(self._vocab) and self._vocab[at] == term:
                    del self._vocab[at]
        for pair in doc.bigrams:
            self._bigram_arrays.pop(pair, None)
            self._bigrams.discard(pair, key)
        for i in range(3):
            self._length_sums[i] -= doc.lengths[i]
        self._keys[doc.slot] = None
        self._dates[doc.slot] = 0
        self._by_file[doc.slot] = False
        if doc.when:
            day = doc.when.toordinal()
            self._day_arrays.pop(day, None)
            same_day = self._days.get(day)
            if same_day is not None:
                same_day.discard(doc.slot)
                if not same_day:
                    del self._days[day]
        self._free.append(doc.slot)

    def _current_avgs(self) -> tuple[float, float, float]:
        n = max(len(self._docs), 1)
        return (
            max(self._length_sums[0] / n, 1.0),
            max(self._length_sums[1] / n, 1.0),
            max(self._length_sums[2] / n, 1.0),
        )

    def _check_drift(self) -> None:
        if self._avgs is None:
            return
        now = self._current_avgs()
        if any(abs(a - b) > _AVG_DRIFT * b for a, b in zip(now, self._avgs, strict=True)):
            self._avgs = None
            self._arrays.clear()

    # -- scoring ----------------------------------------------------------------------------
    def _drop_stale_caches(self) -> None:
        """Empty the idf and content-vector caches if the index changed since they were made
        (any change moves every idf a little)."""
        if self._idf_mutations != self._mutations:
            self._idf_cache.clear()
            self._vectors.clear()
            self._idf_mutations = self._mutations

    def _idf(self, term: str) -> float:
        self._drop_stale_caches()
        idf = self._idf_cache.get(term)
        if idf is None:
            n = len(self._docs)
            df = len(self._postings.get(term, ()))
            idf = self._idf_cache[term] = _bm25_idf(n, df)
        return idf

    def _term_arrays(self, term: str) -> tuple[IntArray, FloatArray] | None:
        """(slots, saturated BM25F term frequency) of the term's postings, cached."""
        cached = self._arrays.get(term)
        if cached is not None:
            return cached
        posting = self._postings.get(term)
        if not posting:
            return None
        if self._avgs is None:
            self._avgs = self._current_avgs()
        avgs, w, b, k1 = self._avgs, self.params.weights, self.params.b, self.params.k1
        assert self._lengths is not None  # a term is posted after its memory's lengths
        slots = np.fromiter(posting, dtype=np.int64, count=len(posting))
        tfs = np.fromiter(
            itertools.chain.from_iterable(posting.values()),
            dtype=np.float64,
            count=3 * len(posting),
        ).reshape(-1, 3)
        lengths = self._lengths[slots]
        # Per field: tf × weight / (1 - b + b × length / average), summed; then saturated.
        tf = (
            tfs[:, 0] * w[0] / (1 - b[0] + b[0] * lengths[:, 0] / avgs[0])
            + tfs[:, 1] * w[1] / (1 - b[1] + b[1] * lengths[:, 1] / avgs[1])
            + tfs[:, 2] * w[2] / (1 - b[2] + b[2] * lengths[:, 2] / avgs[2])
        )
        impact = tf / (k1 + tf)
        self._arrays[term] = (slots, impact)
        return slots, impact

    def _score(self, query: dict[str, float]) -> FloatArray:
        scores = np.zeros(len(self._keys), dtype=np.float64)
        matched = np.zeros(len(self._keys), dtype=np.float64)
        p = self.params
        name_hits: IntArray | None = None  # per slot: how many naming terms it holds
        naming = 0  # query terms that name memories
        for term, qweight in query.items():
            arrays = self._term_arrays(term)
            if arrays is None:
                continue
            slots, impact = arrays
            scores[slots] += (qweight * self._idf(term)) * impact
            matched[slots] += qweight
            if p.name_miss != 1.0 and self._name_df.get(term, 0) > 0:
                # A term that names some memories (a person, a tool) is a strong filter.
                if name_hits is None:
                    name_hits = np.zeros(len(self._keys), dtype=np.int64)
                name_hits[slots] += 1
                naming += 1
        total = sum(query.values())
        if p.coord and total > 0:
            scores *= (matched / total) ** p.coord
        if name_hits is not None:
            # × name_miss per naming term missed, one factor at a time (as a running product).
            factors = np.empty(naming + 1, dtype=np.float64)
            factors[0] = 1.0
            for misses in range(1, naming + 1):
                factors[misses] = factors[misses - 1] * p.name_miss
            scores *= factors[naming - name_hits]
        return scores

    def search(
        self,
        query: str,
        limit: int = 5,
        exclude: Collection[str] = (),
        semantic: Semantic | None = None,
        cosines: Semantic | None = None,
    ) -> list[tuple[str, float]]:
        """The best `limit` documents for `query`, best first, as (key, score).

        `semantic`, when given, is (keys, each key's memory's semantic score for the query);
        `cosines` (keys, each memory's pooled cosine to the query) applies the relevance
        floors."""
        return self.rank(self.lexical(query, exclude), limit, semantic, cosines)

    def lexical(
        self, query: str, exclude: Collection[str] = (), today: date | None = None
    ) -> LexicalScores:
        """The first part of `search`; finish it with `rank`. With `today`, a time the query
        names from now ("yesterday", "last week") is a date signal too."""
        p = self.params
        prompt = self.prompt(query)
        query_terms = self.written_terms(prompt.written)
        weights: dict[str, float] = {}
        for term in query_terms:
            weights[term] = weights.get(term, 0.0) + 1.0
        pasted = [t for t in dict.fromkeys(terms(prompt.pasted)) if t not in weights]
        excluded = np.array(
            [self._docs[k].slot for k in exclude if k in self._docs], dtype=np.int64
        )
        has_terms = bool(weights or pasted)
        found = LexicalScores(
            query,
            tuple(exclude),
            excluded,
            None,
            has_terms,
            self._mutations,
            today=today,
            written=prompt.written,
        )
        if not self._docs:
            return found
        self._expand_prefixes(weights)
        own = dict(weights)
        for term in pasted:
            weights.setdefault(term, p.pasted_weight)
        scores = self._score(weights)
        if pasted and p.pasted_min_terms > 1:
            self._drop_paste_only(scores, own, pasted)
        scores[excluded] = 0.0
        if p.prf_docs and p.prf_terms and p.prf_weight:
            top = self._top(scores, p.prf_docs)
            expansion = self._feedback_terms(top, weights)
            if expansion:
                matched = scores > 0
                for term, value in expansion.items():
                    weights[term] = weights.get(term, 0.0) + p.prf_weight * value
                scores = self._score(weights)
                # The feedback terms reorder what the query matched; what only they match is
                # not returned (in a small directory, most of it is off the query's topic).
                scores[~matched] = 0.0
                read = [self._keys[slot] or "" for slot in top]
                found.feedback = {
                    term: tuple(k for k in read if term in self._docs[k].tfs) for term in expansion
                }
        self._phrases(query_terms, scores)
        found.scores = scores
        return found

    def written_terms(self, written: str) -> list[str]:
        """The terms `lexical` ranks by in the lines the user wrote: question-shaping words
        ("what kind of", "did") dropped when the parameters say so."""
        if self.params.drop_question_words:
            return analysis.query_terms(written)
        return terms(written)

    def prompt(self, query: str) -> Prompt:
        """`query` parted into the lines the user wrote and those they pasted, as `lexical`
        reads it: whole, as written, when the parameters weigh a paste as the rest."""
        p = self.params
        if p.pasted_weight != 1.0 or p.pasted_min_terms > 1:
            return split_prompt(query)
        return Prompt(query, "")

    def current(self, lexical: LexicalScores) -> LexicalScores:
        """`lexical`, made again if the index changed since (its slots may have moved)."""
        if lexical.mutations != self._mutations:
            return self.lexical(lexical.query, lexical.exclude, lexical.today)
        return lexical

    def _drop_paste_only(
        self, scores: FloatArray, own: dict[str, float], pasted: list[str]
    ) -> None:
        """Zero the scores of memories that none of the user's own words (`own`) match and
        fewer than `pasted_min_terms` of the pasted terms do."""
        weak = self._holders(pasted) < self.params.pasted_min_terms
        if own:
            weak &= self._holders(own) == 0
        scores[weak] = 0.0

    def _holders(self, query_terms: Collection[str]) -> IntArray:
        """Per slot: how many of `query_terms` the memory holds (from the postings alone)."""
        held = np.zeros(len(self._keys), dtype=np.int64)
        for term in query_terms:
            arrays = self._term_arrays(term)
            if arrays is not None:
                held[arrays[0]] += 1
        return held

    def rank(
        self,
        lexical: LexicalScores,
        limit: int = 5,
        semantic: Semantic | None = None,
        cosines: Semantic | None = None,
    ) -> list[tuple[str, float]]:
        """The rest of `search`: fusion with `semantic`, the relevance floors when `cosines`
        are given, temporal signals, the best `limit`."""
        scores = self._signalled(self.current(lexical), semantic, cosines)
        if scores is None:
            return []
        if self.params.diversity:
            return self._diverse(scores, limit)
        return [(self._keys[i] or "", float(scores[i])) for i in self._top(scores, limit)]

    def _signalled(
        self,
        lexical: LexicalScores,
        semantic: Semantic | None,
        cosines: Semantic | None,
        notes: dict[int, list[str]] | None = None,
    ) -> FloatArray | None:
        """Every memory's score for `rank` to pick from: None when nothing can be ranked.
        `notes`, when given, gathers the date signals that raised the memories of its slots."""
        made, excluded, p = lexical.scores, lexical.excluded, self.params
        if made is None or not (lexical.has_terms or semantic):
            return None
        scores = made.copy()  # the signals below work in place; `lexical` stays as it was made
        if semantic is not None and p.semantic_weight:
            scores = self._fuse(scores, semantic)
            scores[excluded] = 0.0
        if cosines is not None:  # before the temporal signals: a dropped memory lends nothing
            self._drop_below_floors(made, scores, cosines)
        self._temporal(lexical, scores, notes if notes is not None else {})
        return scores

    def date_signals(
        self,
        lexical: LexicalScores,
        keys: Collection[str],
        semantic: Semantic | None = None,
        cosines: Semantic | None = None,
    ) -> dict[str, tuple[str, ...]]:
        """The date signals that raised each of `keys` as `rank` ranks the query now ("dated
        as asked", "says when", "before a.md (2023-05-08)", "same day as b.md"); by key, for
        the known keys."""
        lexical = self.current(lexical)
        notes: dict[int, list[str]] = {self._docs[k].slot: [] for k in keys if k in self._docs}
        if notes:
            self._signalled(lexical, semantic, cosines, notes)
        return {self._keys[slot] or "": tuple(found) for slot, found in notes.items()}

    def memory_date(self, key: str) -> date | None:
        """The memory's date as the ranker reads it (its first full date, or its file's), if any."""
        doc = self._docs.get(key)
        ordinal = int(self._dates[doc.slot]) if doc is not None else 0
        return date.fromordinal(ordinal) if ordinal else None

    def dated_by_file(self, key: str) -> bool:
        """Whether the memory's date is its file's last write (its text names none)."""
        doc = self._docs.get(key)
        return doc is not None and bool(self._by_file[doc.slot])

    def feedback_terms(self, lexical: LexicalScores) -> dict[str, tuple[str, ...]]:
        """The terms pseudo-relevance feedback added to the query, each with the keys of the
        memories it came from, as the index is now."""
        return self.current(lexical).feedback

    def best(self, lexical: LexicalScores, k: int) -> list[str]:
        """Keys of the `k` best lexical scores, best first, excluded ones left out: the
        lexical side of the candidates that late interaction scores."""
        lexical = self.current(lexical)
        if lexical.scores is None:
            return []
        scores = lexical.scores.copy()
        scores[lexical.excluded] = 0.0
        return [self._keys[i] or "" for i in self._top(scores, k)]

    def _diverse(self, scores: FloatArray, limit: int) -> list[tuple[str, float]]:
        """Greedy selection from the best `diversity_pool`: each pick is the candidate whose
        score, discounted by its overlap with what was already picked, is highest (MMR)."""
        pool = self._top(scores, max(limit, self.params.diversity_pool))
        overlap = dict.fromkeys(pool, 0.0)  # each candidate's largest cosine to a pick
        picked: list[tuple[str, float]] = []
        while pool and len(picked) < limit:
            discounted = [
                float(scores[s]) * (1.0 - self.params.diversity * overlap[s]) for s in pool
            ]
            at = max(range(len(pool)), key=discounted.__getitem__)  # first of equals: rank order
            best = pool.pop(at)
            picked.append((self._keys[best] or "", discounted[at]))
            if len(picked) == limit:
                break
            chosen = self._content_vector(best)
            for slot in pool:
                vector = self._content_vector(slot)
                # in the vector's own (sorted) order: the sum is the same to the last bit
                cosine = sum(w * chosen[t] for t, w in vector.items() if t in chosen)
                overlap[slot] = max(overlap[slot], cosine)
        return picked

    def _content_vector(self, slot: int) -> dict[str, float]:
        """The memory's description and body terms as a unit tf-idf vector (names left out:
        memories of one person are not alike for that); cached with the idfs."""
        self._drop_stale_caches()
        vector = self._vectors.get(slot)
        if vector is None:
            doc = self._docs[self._keys[slot] or ""]
            raw = {t: (t1 + t2) * self._idf(t) for t, (_, t1, t2) in doc.tfs.items() if t1 + t2}
            norm = math.sqrt(sum(v * v for v in raw.values())) or 1.0
            vector = self._vectors[slot] = {t: v / norm for t, v in raw.items()}
        return vector

    def _fuse(self, scores: FloatArray, semantic: Semantic) -> FloatArray:
        keys, cosines = semantic
        slots, rows = self._semantic_slots(keys, "fuse")
        if not len(slots):
            return scores
        values = np.asarray(cosines, dtype=np.float64)[rows]
        spread = float(values.std())
        best = float(scores.max())
        fused = scores / best if best > 0 else scores.copy()
        if spread > 0:
            z = np.clip((values - float(values.mean())) / spread, 0.0, None) / 3.0
        else:
            # One candidate, or all alike (copies of one text): no spread to place them by.
            # Each stands as the better of two memories does (z = 1) and the floors judge it;
            # unfused, a paraphrase recalled nothing in a directory of one memory (cosine 0.6).
            z = np.full(len(slots), 1.0 / 3.0)
        fused[slots] += self.params.semantic_weight * z
        return fused

    def _drop_below_floors(
        self, lexical: FloatArray, scores: FloatArray, cosines: Semantic
    ) -> None:
        """Zero the scores of memories too unlike the query to return (`relevance_floor`,
        `semantic_only_floor`). A memory without a vector yet has no cosine and keeps its score."""
        p = self.params
        keys, values = cosines
        slots, rows = self._semantic_slots(keys, "floors")
        if not len(slots):
            return
        cosine = np.asarray(values, dtype=np.float64)[rows]
        low = cosine < p.relevance_floor
        low |= (cosine < p.semantic_only_floor) & (lexical[slots] <= 0)
        scores[slots[low]] = 0.0

    def _semantic_slots(self, keys: list[str], use: str) -> tuple[IntArray, IntArray]:
        """(slot, position in `keys`) of every key indexed here; cached per use while neither
        the list (the vector store hands out the same one until it changes) nor this index
        moves."""
        cached = self._slots_cache.get(use)
        if cached is not None and cached[0] is keys and cached[1] == self._mutations:
            return cached[2], cached[3]
        pairs = [(self._docs[k].slot, i) for i, k in enumerate(keys) if k in self._docs]
        slots = np.fromiter((s for s, _ in pairs), dtype=np.int64, count=len(pairs))
        rows = np.fromiter((i for _, i in pairs), dtype=np.int64, count=len(pairs))
        self._slots_cache[use] = (keys, self._mutations, slots, rows)
        return slots, rows

    def _top(self, scores: FloatArray, k: int) -> list[int]:
        """Slots of the k best positive scores, best first (ties: by key, for stable order)."""
        positive = np.flatnonzero(scores > 0)
        if len(positive) > k * 4:
            cut = np.argpartition(scores[positive], -k * 4)[-k * 4 :]
            positive = positive[cut]
        ranked = sorted(positive.tolist(), key=lambda i: (-scores[i], self._keys[i] or ""))
        return ranked[:k]

    def _expand_prefixes(self, weights: dict[str, float]) -> None:
        n = self.params.prefix_len
        if not n:
            return
        for term in [t for t in weights if len(t) >= n]:
            head = term[:n]
            lo = bisect.bisect_left(self._vocab, head)
            for other in self._vocab[lo : lo + 50]:  # a slice: islice would walk from 0
                if not other.startswith(head):
                    break
                if other != term and other not in weights:
                    weights[other] = self.params.prefix_weight * weights[term]

    def _phrases(self, query_terms: list[str], scores: FloatArray) -> None:
        weight = self.params.bigram_weight
        if not weight:
            return
        n = len(self._docs)
        for a, b in itertools.pairwise(query_terms):
            slots = self._bigram_slots(f"{a} {b}")
            if slots is None:
                continue
            idf = _bm25_idf(n, len(slots))
            scores[slots] += np.where(scores[slots] > 0, weight * idf, 0.0)

    def _bigram_slots(self, pair: str) -> IntArray | None:
        """Slots of the memories holding the adjacent pair, cached; None when none does."""
        slots = self._bigram_arrays.get(pair)
        if slots is None:
            holders = self._bigrams.get(pair)
            if not holders:
                return None
            slots = np.array([self._docs[k].slot for k in holders], dtype=np.int64)
            self._bigram_arrays[pair] = slots
        return slots

    def _day_slots(self, day: int) -> IntArray:
        """Slots of the memories dated `day` (an ordinal), cached."""
        slots = self._day_arrays.get(day)
        if slots is None:
            slots = np.fromiter(self._days.get(day, ()), dtype=np.int64)
            self._day_arrays[day] = slots
        return slots

    def _temporal(
        self, lexical: LexicalScores, scores: FloatArray, notes: dict[int, list[str]]
    ) -> None:
        """The date signals, in place; each noted for the slots of `notes`."""
        p, query = self.params, lexical.written
        dates = self._dates
        if p.when_boost and self._timed and asks_when(query):
            timed = np.fromiter(self._timed, dtype=np.int64, count=len(self._timed))
            scores[timed] *= 1.0 + p.when_boost
            _note(notes, (s for s in notes if s in self._timed and scores[s] > 0), "says when")
        if p.date_boost:
            wanted = query_date(query, lexical.today)
            if wanted is not None:
                asked = self._dated_as_asked(wanted, scores)
                if len(asked):
                    scores[asked] *= 1.0 + p.date_boost
                    marked = set(asked.tolist())
                    _note(
                        notes, (s for s in notes if s in marked and scores[s] > 0), "dated as asked"
                    )
            else:
                self._around_event(lexical, scores, notes)
        if p.group_weight and p.group_top:
            # Only days a memory's text names lend: after a clone, a copy or a rewrite every
            # file shares one day, which says nothing about what belongs together.
            by_file = self._by_file
            by_day: dict[int, list[tuple[float, int]]] = {}
            for slot in self._top(scores, p.group_top):
                if dates[slot] and not by_file[slot]:
                    by_day.setdefault(int(dates[slot]), []).append((float(scores[slot]), slot))
            for day, members in by_day.items():
                members.sort(reverse=True)
                best, best_slot = members[0]
                second = members[1][0] if len(members) > 1 else 0.0
                same_day = self._day_slots(day)
                same_day = same_day[~by_file[same_day]]
                scores[same_day[scores[same_day] > 0]] += p.group_weight * best
                scores[best_slot] += p.group_weight * (second - best)  # no self-lending
                lent = f"same day as {self._keys[best_slot]}"
                _note(
                    notes,
                    (
                        s
                        for s in notes
                        if s != best_slot and dates[s] == day and not by_file[s] and scores[s] > 0
                    ),
                    lent,
                )

    def _dated_as_asked(self, wanted: DateQuery, scores: FloatArray) -> IntArray:
        """Slots of the matched memories dated as `wanted` asks. A memory dated by its text
        may be written up to `date_slack` days after what it tells; one dated by its file's
        last write is dated when it was written, so it must fall in the asked time itself."""
        dates, by_file = self._dates, self._by_file
        slack = self.params.date_slack
        found: list[IntArray] = []
        for ordinal in np.unique(dates[(scores > 0) & (dates > 0)]).tolist():
            day = date.fromordinal(ordinal)
            if not wanted.matches(day, slack):
                continue
            slots = self._day_slots(ordinal)
            found.append(slots if wanted.matches(day, 0) else slots[~by_file[slots]])
        return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)

    def _around_event(
        self, lexical: LexicalScores, scores: FloatArray, notes: dict[int, list[str]]
    ) -> None:
        """ "before the trip": the dated memory that best matches "trip" anchors the query in
        time; memories dated on the asked side of it are favoured like a named date."""
        found = relative_event(lexical.written, lexical.today)
        if found is None:
            return
        direction, event = found
        weights = {t: 1.0 for t in terms(event)}
        if not weights:
            return
        event_scores = self._score(weights)
        # The event's day is the one its memory's text names: a file's last write may be
        # any later day (a clone, an edit).
        event_scores[(self._dates == 0) | self._by_file] = 0.0
        top = self._top(event_scores, 1)
        if not top:
            return
        anchor = int(self._dates[top[0]])
        dated = self._dates > 0
        # The anchor's own day counts: a memory often records the event and what followed.
        side = (self._dates <= anchor) if direction == "before" else (self._dates >= anchor)
        scores[dated & side] *= 1.0 + self.params.date_boost
        when = date.fromordinal(anchor).isoformat()
        where = f"{direction} {self._keys[top[0]]} ({when})"
        _note(
            notes,
            (s for s in notes if s != top[0] and dated[s] and side[s] and scores[s] > 0),
            where,
        )
        if top[0] in notes and scores[top[0]] > 0:
            _note(notes, [top[0]], f"the event asked around ({when})")

    def _feedback_terms(self, top: list[int], query: dict[str, float]) -> dict[str, float]:
        """The strongest new terms of the top documents, weighted 0..1 (tf·idf, normalised)."""
        gathered: dict[str, float] = {}
        for slot in top:
            key = self._keys[slot]
            if key is None:
                continue
            for term, (t0, t1, t2) in self._docs[key].tfs.items():
                if term not in query:
                    gathered[term] = gathered.get(term, 0.0) + (t0 + t1 + t2) * self._idf(term)
        # Equal weights are common (terms seen once): ties go by the term, not by set order,
        # which changes with the interpreter's hash seed.
        best = heapq.nlargest(
            self.params.prf_terms, gathered.items(), key=lambda kv: (kv[1], kv[0])
        )
        if not best:
            return {}
        top_value = best[0][1]
        return {term: value / top_value for term, value in best if value > 0}


def _note(notes: dict[int, list[str]], slots: Iterable[int], signal: str) -> None:
    """Note `signal` for each of `slots` (slots of `notes`)."""
    for slot in list(slots):
        notes[slot].append(signal)
