"""Experiment (session 22): a question decomposed at its coordination ("Caroline and Melanie",
"Nate, Joanna or Tim"), each part ranked alone and the rankings merged, on LoCoMo's
development split, beside the ranker as it is, in one run.

The idea: multi-hop is the weakest category (lexical 0.628 on the evaluation split, hybrid
0.781), and many multi-hop questions coordinate two people ("What subject have Caroline and
Melanie both painted?"). Ranked whole, the query needs both names: a memory naming one of
them misses the other's term (the coordination factor, and `name_miss` for a term that names
memories), so what rises are the memories that name both, which tell what the two did
together ("Gina supports Jon through setbacks"), not what each one did. Decomposed, the
question becomes one part per conjunct ("What subject have Caroline both painted?", "What
subject have Melanie both painted?"), each part is ranked as a question of its own, and the
parts' rankings are merged into the five.

Decomposition: the first coordination of single words joined by "and", "or" or "&" (and a
list before it: "A, B and C"); each conjunct must be a word that leaves a term (not a stop
word, not a number: "between August 11 and August 15" is a date range, left whole). Part i is
the question with the coordinated span replaced by conjunct i. Modes:
- `names`: only a coordination whose every conjunct is a term naming memories (the index's
  name field holds it: in LoCoMo, the speakers) — names are alternatives in such a question;
- `any`: any coordination ("Melanie and her kids": "kids", "national park or a theme park").

Merges (each part's scores are what `rank` picks from: `RecallIndex._signalled`, temporal
signals and, in the hybrid, the part's own semantic scores fused; the five then picked with
the ranker's diversity pass):
- `rr`: round-robin over the parts' fives (each as `rank` gives it), first of each, then
  second of each..., without repeats;
- `rr+whole`: the same with the whole question's five first in each round;
- `sum w`: the whole question's scores scaled to their best, plus w × each part's scaled to
  its best;
- `max w`: the same with w × the best of the parts' scaled scores.

The hybrid (`--hybrid`, needs the embeddings extra): each part is embedded as its own
question (memoryd's default model, late interaction over its candidates, as
`bench/_late_interaction.py` computes it for the daemon), so the semantic side is decomposed
too.

Each setting is chosen by leave-one-conversation-out over the development split (the best on
four conversations, scored on the fifth); the held-out mean is the figure, beside the ranker as
it is in the same run (asserted equal to `cv_recall_locomo`'s count). Also printed: the
held-out choices' hits per LoCoMo category, and (lexical) the memories the 80 coding prompts
about none recall. The evaluation split is never read.

    MEMORYD_EVAL_DIR=../shared/eval .venv/bin/python bench/experiment_decomposition.py [--hybrid]

Session 22's run (2 cores; lexical 9 s, hybrid 40 s, most of it embedding):
- questions decomposed: `names` 16 of 630 (multi-hop 10, single-hop 4, temporal 1,
  open-domain 1), `any` 51 (single-hop 31, multi-hop 12, temporal 6, open-domain 2);
- lexical, as it is 0.811: `names` 0.808–0.811, `any` 0.806–0.810; held out **0.811** (`names
  sum 0.5` chosen in every fold: the same questions hit as whole), every category the same;
  the prompts about none recall 747 memories in every setting (a part's terms are the
  question's, fewer: it matches nothing new);
- hybrid, as it is 0.860: `names` 0.859–0.860, `any` 0.856–0.859; held out **0.860** (`names rr`
  in every fold: conv-42 one question more, conv-43 one fewer), every category the same.
Why: of the 16 `names` questions the lexical ranker misses 10; no merge of their parts hits one
of those, and every merge but `sum 0.5` loses one or two it hit ("What movies have both Joanna
and Nate seen?"); of the 51 `any` questions (15 missed) no merge hits one the whole question
misses, and each loses one to three. The misses are not the coordination's: the evidence
paraphrases ("What subject have Caroline and Melanie both painted?" — "Melanie and her kids
enjoy nature-inspired painting projects"), the names are misspelt ("Jean and John" for Gina and
Jon), or the question asks what two people share, which no part asks. Most multi-hop questions
(123 of 135) hold no coordination this splits: they ask for a list about one person ("What
books has Tim read?"), which no split of the question's text reaches.
Not taken; the evaluation split was not run.
"""

from __future__ import annotations

import atexit
import itertools
import os
import re
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _late_interaction import LateScores, token_arrays
from bench_recall_locomo import ABOUT_NONE, CATEGORIES, DEV, Memory, Query, hits, load
from cv_recall_locomo import held_out_picks, hits_and_none, locomo_args, questions_hit

from memoryd.automem.recall.analysis import terms
from memoryd.automem.recall.dates import first_date
from memoryd.automem.recall.ranker import RecallIndex, Semantic

if TYPE_CHECKING:
    from memoryd.automem.embeddings.encoder import SentenceEncoder

FloatArray = npt.NDArray[np.float64]
Loaded = dict[str, tuple[list[Memory], list[Query]]]
S = TypeVar("S")  # a setting of an experiment
# A word, a number, or a comma / ampersand, with its place in the question.
TOKEN = re.compile(r"[^\W\d_][\w'’-]*|\d+|[,&]")
JOINS = {"and", "or", "&"}


def coordinations(question: str) -> list[list[re.Match[str]]]:
    """Each coordination of single words in `question`, as its conjuncts' tokens in order
    ("A, B and C": [A, B, C]); a conjunct that is not a word leaving a term ends it."""
    tokens = list(TOKEN.finditer(question))
    found: list[list[re.Match[str]]] = []
    for at, token in enumerate(tokens):
        if token.group().lower() not in JOINS or at == 0 or at + 1 >= len(tokens):
            continue
        right = tokens[at + 1]
        left = at - 1
        if tokens[left].group() == "," and left > 0:  # the serial comma: "A, B, and C"
            left -= 1
        conjuncts = [tokens[left]]
        while left >= 2 and tokens[left - 1].group() == ",":
            left -= 2
            conjuncts.insert(0, tokens[left])
        conjuncts.append(right)
        if all(c.group().isalpha() and len(terms(c.group())) == 1 for c in conjuncts):
            found.append(conjuncts)
    return found


def parts(question: str, index: RecallIndex, mode: str) -> list[str]:
    """The question's parts (none when it is not decomposed): the first coordination that
    `mode` takes, its span replaced by each conjunct in turn."""
    for conjuncts in coordinations(question):
        if mode == "names" and not all(
            index._name_df.get(terms(c.group())[0], 0) > 0 for c in conjuncts
        ):
            continue
        start, end = conjuncts[0].start(), conjuncts[-1].end()
        return [question[:start] + c.group() + question[end:] for c in conjuncts]
    return []


@dataclass(frozen=True)
class Setting:
    mode: str  # names | any
    merge: str  # rr | rr+whole | sum | max
    weight: float = 0.0

    def label(self) -> str:
        weight = f" {self.weight:g}" if self.merge in ("sum", "max") else ""
        return f"{self.mode} {self.merge}{weight}"


GRID = [
    Setting(mode, merge, weight)
    for mode in ("names", "any")
    for merge, weight in (
        ("rr", 0.0),
        ("rr+whole", 0.0),
        *itertools.product(("sum", "max"), (0.5, 1.0, 2.0)),
    )
]


def filled(index: RecallIndex, memories: list[Memory]) -> dict[str, set[str]]:
    """`index` with `memories` indexed as the daemon indexes them; each memory's dia_ids."""
    for m in memories:
        index.upsert(m.file, m.name, m.fact, m.body, first_date(m.body))
    return {m.file: set(m.dia_id.split(",")) for m in memories}


def late_scores(
    name: str, memories: list[Memory], questions: list[str], encoder: SentenceEncoder
) -> LateScores:
    """The hybrid's semantic side for `questions` (by their place in the list)."""
    arrays = token_arrays(
        name,
        encoder.encode_tokens([m.fact for m in memories]),
        encoder.encode_tokens(questions),
    )
    return LateScores(arrays, name, [m.file for m in memories])


class Conversation:
    """One development conversation: its index filled once, each question's and each part's
    lexical (and semantic) scores made once, so every setting only merges."""

    def __init__(
        self,
        name: str,
        memories: list[Memory],
        queries: list[Query],
        encoder: SentenceEncoder | None,
    ) -> None:
        self.index = RecallIndex()
        self.ids = filled(self.index, memories)
        self.queries = queries
        self.prompts = [q.question for q in queries] + list(ABOUT_NONE)
        self.parts = {
            mode: [parts(p, self.index, mode) for p in self.prompts] for mode in ("names", "any")
        }
        # the prompts first, in order (a question's place is its row in the semantic arrays)
        pieces = (t for by in self.parts.values() for ps in by for t in ps)
        texts = self.prompts + [t for t in dict.fromkeys(pieces) if t not in self.prompts]
        self.lexical = {t: self.index.lexical(t) for t in texts}
        self.semantic: dict[str, Semantic] = {}
        self.late: LateScores | None = None
        if encoder is not None:
            # every text embedded as a question of its own, as the daemon embeds a prompt
            late = self.late = late_scores(name, memories, texts, encoder)
            self.semantic = {
                t: late.semantic(self.index, self.lexical[t], i) for i, t in enumerate(texts)
            }

    def scores(self, text: str) -> FloatArray | None:
        return self.index._signalled(self.lexical[text], self.semantic.get(text), None)

    def five(self, text: str) -> list[str]:
        return [k for k, _ in self.index.rank(self.lexical[text], 5, self.semantic.get(text))]

    def merged(self, p: int, setting: Setting) -> list[str]:
        """The five for prompt `p` (a question, or a prompt about none past the questions)."""
        text, pieces = self.prompts[p], self.parts[setting.mode][p]
        if not pieces:
            return self.five(text)
        if setting.merge.startswith("rr"):
            lists = [self.five(t) for t in pieces]
            if setting.merge == "rr+whole":
                lists.insert(0, self.five(text))
            out: list[str] = []
            for round_ in itertools.zip_longest(*lists):
                out.extend(k for k in round_ if k is not None and k not in out)
            return out[:5]
        whole = self.scores(text)
        if whole is None:
            return []
        scaled = [scaled_to_best(s) for s in (self.scores(t) for t in pieces) if s is not None]
        fused = scaled_to_best(whole)
        if scaled:
            stacked = np.stack(scaled)
            added = stacked.sum(axis=0) if setting.merge == "sum" else stacked.max(axis=0)
            fused = fused + setting.weight * added
        return [k for k, _ in self.index._diverse(fused, 5)]

    def hit(self, q: int, five: list[str]) -> bool:
        return hits([self.ids[k] for k in five], self.queries[q].evidence)


def scaled_to_best(scores: FloatArray) -> FloatArray:
    best = float(scores.max())
    return scores / best if best > 0 else scores.copy()


def encoder_or_none(hybrid: bool) -> SentenceEncoder | None:
    """memoryd's default model (converted from the package that ships it into a scratch state
    folder, not the user's), for the hybrid."""
    if not hybrid:
        return None
    scratch = tempfile.mkdtemp(prefix="mdb-decompose-")
    atexit.register(shutil.rmtree, scratch, True)
    os.environ["XDG_STATE_HOME"] = scratch
    from memoryd.automem.embeddings.encoder import SentenceEncoder
    from memoryd.automem.embeddings.models import locate_model

    return SentenceEncoder(locate_model())


def setup(doc: str) -> tuple[bool, Loaded, SentenceEncoder | None] | None:
    """(--hybrid given, the conversations, the model for the hybrid) from the command line;
    None, having said why, when the data or the embeddings extra is missing."""
    ready = locomo_args(doc)
    if ready is None:
        return None
    hybrid, data_file = ready
    return hybrid, load(data_file), encoder_or_none(hybrid)


def report_held_out(
    ranker: str,
    queries: Mapping[str, list[Query]],
    base: Mapping[str, list[bool]],
    results: Mapping[S, Mapping[str, list[bool]]],
    label: Callable[[S], str],
) -> None:
    """Leave-one-conversation-out: each conversation scored with the setting best on the
    other four, beside the ranker as it is (`base`); then the same by LoCoMo category."""
    counts = {s: {n: sum(h) for n, h in by.items()} for s, by in results.items()}
    total = sum(len(q) for q in queries.values())
    held_base = held_variant = 0
    by_cat: dict[str, Counter[str]] = {"base": Counter(), "variant": Counter(), "n": Counter()}
    for held, chosen in held_out_picks(counts, list(results)).items():
        held_base += sum(base[held])
        held_variant += counts[chosen][held]
        for q, query in enumerate(queries[held]):
            cat = CATEGORIES[query.category]
            by_cat["n"][cat] += 1
            by_cat["base"][cat] += base[held][q]
            by_cat["variant"][cat] += results[chosen][held][q]
        size = len(queries[held])
        print(
            f"{held}: as it is {sum(base[held]) / size:.3f}, variant "
            f"{counts[chosen][held] / size:.3f} ({label(chosen)})"
        )
    print(
        f"{ranker}: as it is {held_base / total:.3f}; variant, held out {held_variant / total:.3f}"
    )
    for cat in CATEGORIES.values():
        n = by_cat["n"][cat]
        print(
            f"  {cat} ({n}): as it is {by_cat['base'][cat] / n:.3f}, "
            f"held out {by_cat['variant'][cat] / n:.3f}"
        )


def main() -> int:
    ready = setup(__doc__ or "")
    if ready is None:
        return 0
    hybrid, loaded, encoder = ready
    convs = {n: Conversation(n, *loaded[n], encoder) for n in DEV}
    sizes = {n: len(convs[n].queries) for n in DEV}
    total = sum(sizes.values())
    ranker = "hybrid" if hybrid else "lexical"

    def question_hits(conv: Conversation, setting: Setting | None) -> list[bool]:
        return [
            conv.hit(q, conv.five(conv.prompts[q]) if setting is None else conv.merged(q, setting))
            for q in range(len(conv.queries))
        ]

    def none_recalled(conv: Conversation, setting: Setting | None) -> int:
        n = len(conv.queries)
        return sum(
            len(conv.five(conv.prompts[p]) if setting is None else conv.merged(p, setting))
            for p in range(n, len(conv.prompts))
        )

    base = {n: question_hits(convs[n], None) for n in DEV}
    # this harness, undecomposed, must be the ranker as it is
    same = {n: questions_hit(RecallIndex(), *loaded[n], convs[n].late) for n in DEV}
    assert same == {n: sum(base[n]) for n in DEV}, (same, base)
    if not hybrid:
        assert sum(none_recalled(convs[n], None) for n in DEV) == sum(
            hits_and_none(RecallIndex(), *loaded[n])[1] for n in DEV
        )
    print(f"{ranker} as it is: {sum(map(sum, base.values())) / total:.3f} ({total} questions)")
    for mode in ("names", "any"):
        split = sum(1 for n in DEV for ps in convs[n].parts[mode][: sizes[n]] if ps)
        by_cat = Counter(
            CATEGORIES[convs[n].queries[q].category]
            for n in DEV
            for q, ps in enumerate(convs[n].parts[mode][: sizes[n]])
            if ps
        )
        print(f"  questions decomposed, {mode}: {split} ({dict(by_cat)})")

    results: dict[Setting, dict[str, list[bool]]] = {}
    for setting in GRID:
        results[setting] = {n: question_hits(convs[n], setting) for n in DEV}
        got = sum(map(sum, results[setting].values()))
        extra = "" if hybrid else f", none {sum(none_recalled(convs[n], setting) for n in DEV)}"
        print(f"  {setting.label()}: {got / total:.3f}{extra}", flush=True)
    queries = {n: convs[n].queries for n in DEV}
    report_held_out(ranker, queries, base, results, Setting.label)
    return 0


if __name__ == "__main__":
    sys.exit(main())
