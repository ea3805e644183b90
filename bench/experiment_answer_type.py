"""Experiment (session 22): the words of a question that name the kind of answer it wants
("What *city* have both...", "Which *US cities* does John...", "What *fantasy movies* does Tim
like?") weighed less in the lexical query, on LoCoMo's development split, beside the ranker as
it is, in one run.

The idea, from question answering's answer typing: the answer to "What city..." is an
instance ("Rome"), and the memory that holds it need not say "city"; the type word then pulls
up memories that name the type and not the instance ("What animal do both Nate and Joanna
like?" recalls "a stuffed animal" three times, not "Nate finds turtles unique"), and the
coordination factor discounts the evidence for missing it. `QUESTION_WORDS` already drops
"kind", "type", "sort"; this lowers the word after them.

The answer-type words: after a leading "what" or "which" (and "kind / type / sort of"), the
words up to the first auxiliary verb ("does", "has", "is"...), preposition, or term naming
memories (a speaker); none when the auxiliary comes first ("What did Melanie paint?").
Variants: `head` (only the last of those words: "fantasy *movies*") or `all` of them, each at
`weight` × its usual query weight (0: left out; the coordination factor counts it at that
weight too). Everything else in the ranker is as it is (the type words' prefix expansions,
feedback terms and bigrams too).

Each setting is chosen by leave-one-conversation-out over the development split (the best on
four conversations, scored on the fifth); the held-out mean is the figure. `--hybrid` runs
the hybrid with the same lexical side (the embeddings extra; the question embedded whole, as
before). The evaluation split is never read.

    MEMORYD_EVAL_DIR=../shared/eval .venv/bin/python bench/experiment_answer_type.py [--hybrid]

Session 22's run (2 cores; lexical 9 s, hybrid 2 minutes at load 3):
- questions with answer-type words: 227 of 630 (commonest: activity 17, book 12, event 12,
  city 9, movie 7, game 7, motivation 6);
- lexical, as it is 0.811: `head` × 0 / 0.25 / 0.5 / 0.75 / 1.25 / 1.5 / 2: 0.763 / 0.787 /
  0.798 / 0.803 / 0.806 / 0.800 / 0.798; `all` 0.756 / 0.781 / 0.795 / 0.805 / 0.805 / 0.795 /
  0.790; held out **0.802** (multi-hop 0.681 → 0.659, single-hop 0.875 → 0.868); the prompts
  about none 747 memories in every setting;
- hybrid, as it is 0.860: 0.854–0.863 (best `all` × 0.25), held out **0.859** (multi-hop
  0.733 → 0.719).
In 93 of the 227 questions an evidence memory holds the type word ("Tim is currently reading a
fantasy *book* by Patrick Rothfuss", "Maria participated in a charity *event* last Friday"),
and there it is a match that finds it; weighing it less loses more of those than it wins of the
others at every weight, and weighing it more loses too. Not taken; the evaluation split was not
run.
"""

from __future__ import annotations

import itertools
import re
import sys
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _late_interaction import LateScores
from bench_recall_locomo import ABOUT_NONE, DEV, Memory, Query, hits
from cv_recall_locomo import hits_and_none, questions_hit
from experiment_decomposition import filled, late_scores, report_held_out, setup

from memoryd.automem.recall.analysis import STOP_WORDS, terms
from memoryd.automem.recall.ranker import LexicalScores, RecallIndex

if TYPE_CHECKING:
    from memoryd.automem.embeddings.encoder import SentenceEncoder

FloatArray = npt.NDArray[np.float64]
WORD = re.compile(r"[^\W\d_][\w'’-]*|\d+")
TYPE_OF = {"kind", "kinds", "type", "types", "sort", "sorts", "of"}
# the verbs and prepositions that end a question's answer-type phrase
ENDS = {
    "do", "does", "did", "has", "have", "had", "is", "are", "was", "were", "can", "could",
    "will", "would", "should", "might", "may", "des",
    "in", "on", "at", "for", "from", "to", "with", "about", "by", "during", "after", "before",
}  # fmt: skip


def answer_type(question: str, index: RecallIndex, head_only: bool) -> list[str]:
    """The stems of the words naming the kind of answer `question` wants (see the module)."""
    words = [w.lower() for w in WORD.findall(question)]
    if not words or words[0] not in ("what", "which"):
        return []
    at = 1
    while at < len(words) and words[at] in TYPE_OF:
        at += 1
    phrase: list[str] = []
    for word in words[at:]:
        stems = terms(word)
        if word in ENDS or (stems and index._name_df.get(stems[0], 0) > 0):
            break
        if word not in STOP_WORDS and stems:
            phrase.append(stems[0])
    return phrase[-1:] if head_only else phrase


@dataclass(frozen=True)
class Setting:
    head_only: bool
    weight: float

    def label(self) -> str:
        return f"{'head' if self.head_only else 'all'} × {self.weight:g}"


GRID = [Setting(h, w) for h in (True, False) for w in (0.0, 0.25, 0.5, 0.75, 1.25, 1.5, 2.0)]


class TypedIndex(RecallIndex):
    """The ranker as it is, with the query's answer-type terms (`typed`, set per query)
    weighed `type_weight` × as much."""

    typed: frozenset[str] = frozenset()
    type_weight = 1.0
    head_only = True

    def lexical(
        self, query: str, exclude: Collection[str] = (), today: date | None = None
    ) -> LexicalScores:
        self.typed = frozenset(answer_type(query, self, self.head_only))
        try:
            return super().lexical(query, exclude, today)
        finally:
            self.typed = frozenset()

    def _score(self, query: dict[str, float]) -> FloatArray:
        if self.typed and self.type_weight != 1.0:
            query = {t: w * self.type_weight if t in self.typed else w for t, w in query.items()}
        return super()._score(query)


class Conversation:
    def __init__(
        self,
        name: str,
        memories: list[Memory],
        queries: list[Query],
        encoder: SentenceEncoder | None,
    ) -> None:
        self.index = TypedIndex()
        self.ids = filled(self.index, memories)
        self.queries = queries
        self.late: LateScores | None = None
        if encoder is not None:
            self.late = late_scores(name, memories, [q.question for q in queries], encoder)

    def run(self, setting: Setting | None) -> tuple[list[bool], int]:
        """Each question's hit, and the memories the prompts about none recall (lexical)."""
        index = self.index
        index.type_weight = 1.0 if setting is None else setting.weight
        index.head_only = setting is None or setting.head_only
        got = []
        for i, q in enumerate(self.queries):
            lexical = index.lexical(q.question)
            semantic = self.late.semantic(index, lexical, i) if self.late else None
            five = [k for k, _ in index.rank(lexical, 5, semantic)]
            got.append(hits([self.ids[k] for k in five], q.evidence))
        none = 0 if self.late else sum(len(index.search(p, 5)) for p in ABOUT_NONE)
        return got, none


def main() -> int:
    ready = setup(__doc__ or "")
    if ready is None:
        return 0
    hybrid, loaded, encoder = ready
    convs = {n: Conversation(n, *loaded[n], encoder) for n in DEV}
    total = sum(len(convs[n].queries) for n in DEV)
    ranker = "hybrid" if hybrid else "lexical"
    base = {n: convs[n].run(None) for n in DEV}
    # this harness at weight 1 must be the ranker as it is
    for n in DEV:
        if hybrid:
            assert sum(base[n][0]) == questions_hit(RecallIndex(), *loaded[n], convs[n].late)
        else:
            assert (sum(base[n][0]), base[n][1]) == hits_and_none(RecallIndex(), *loaded[n])
    print(f"{ranker} as it is: {sum(sum(h) for h, _ in base.values()) / total:.3f}", end="")
    print("" if hybrid else f", none {sum(x for _, x in base.values())}")
    for head in (True, False):
        typed = [
            answer_type(q.question, convs[n].index, head) for n in DEV for q in convs[n].queries
        ]
        print(f"  questions with answer-type words ({'head' if head else 'all'}): ", end="")
        commonest = Counter(itertools.chain.from_iterable(typed)).most_common(12)
        print(f"{sum(1 for t in typed if t)}; commonest {commonest}")
    results = {s: {n: convs[n].run(s) for n in DEV} for s in GRID}
    for s, by in results.items():
        got = sum(sum(h) for h, _ in by.values())
        extra = "" if hybrid else f", none {sum(x for _, x in by.values())}"
        print(f"  {s.label()}: {got / total:.3f}{extra}", flush=True)
    report_held_out(
        ranker,
        {n: convs[n].queries for n in DEV},
        {n: hit for n, (hit, _) in base.items()},
        {s: {n: hit for n, (hit, _) in by.items()} for s, by in results.items()},
        Setting.label,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
