"""Experiment (session 19): hubness reduction for the hybrid's semantic side, on LoCoMo's
development split, beside the hybrid as it is, in one run.

In a space of sentence embeddings some memories are near almost everything ("hubs": a
general remark on how someone feels sits close to any question about that person), and they
take places in the five that a memory about the question's own topic should have. The usual
correction (CSLS, Conneau et al. 2018; hubness: Radovanović et al. 2010) takes from each
memory's similarity its mean cosine to its `k` nearest memories in the same directory, r(m):
a memory close to all its neighbours is worth less for being close to the query too. Nothing
here is fitted to questions: r is a property of the directory alone.

Variants: late interaction's score of each candidate − `beta` × r (`scores`), and also the
pooled cosines that choose the candidates (`both`). The fusion weight stays 1.5 for both
sides. `beta`, `k` and where are chosen by leave-one-conversation-out over the development
split (best on four conversations, scored on the fifth; the held-out mean is the figure). The
evaluation split is never read.

    .venv/bin/python bench/experiment_hubness.py
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _late_interaction import LateScores
from bench_recall_locomo import DEV, load
from cv_recall_locomo import embed, held_out_picks, locomo_file, questions_hit

from memoryd.automem.recall.ranker import LexicalScores, RecallIndex, Semantic


@dataclass(frozen=True)
class Hub:
    k: int
    beta: float
    where: str  # "scores" or "both"

    def label(self) -> str:
        return f"k {self.k} beta {self.beta} {self.where}"


def hubness(pooled: np.ndarray, k: int) -> np.ndarray:
    """Each memory's mean cosine to its `k` nearest other memories."""
    sims = pooled @ pooled.T
    np.fill_diagonal(sims, -np.inf)
    k = min(k, len(pooled) - 1)
    top = -np.partition(-sims, k - 1, axis=1)[:, :k]
    return np.asarray(top.mean(axis=1))


class HubScores:
    """`LateScores` with each memory's hubness taken from its semantic score (and from its
    pooled cosine when choosing candidates, for `both`)."""

    def __init__(self, late: LateScores, hub: Hub) -> None:
        self.late, self.hub = late, hub
        self.r = hubness(np.asarray(late.arrays[f"{late.name}_m"], dtype=np.float64), hub.k)

    def semantic(self, index: RecallIndex, lexical: LexicalScores, question: int) -> Semantic:
        late, hub = self.late, self.hub
        cosines = late.cosines(question)
        if hub.where == "both":
            cosines = cosines - hub.beta * self.r
        keys, values = late.semantic(index, lexical, question, cosines)
        rows = np.array([late.slot[k] for k in keys], dtype=np.int64)
        return keys, np.asarray(values, dtype=np.float64) - hub.beta * self.r[rows]


def main() -> int:
    data_file = locomo_file(hybrid=True)
    if data_file is None:
        return 0
    convs = {name: pair for name, pair in load(data_file).items() if name in DEV}
    late = embed(convs)
    sizes = {n: len(convs[n][1]) for n in DEV}
    total = sum(sizes.values())
    base = {n: questions_hit(RecallIndex(), *convs[n], late[n]) for n in DEV}
    print(f"hybrid as it is: {sum(base.values()) / total:.3f}")
    same = {
        n: questions_hit(RecallIndex(), *convs[n], HubScores(late[n], Hub(5, 0.0, "both")))
        for n in DEV
    }
    assert same == base, "beta 0 differs from the hybrid as it is"
    r = hubness(np.asarray(late[DEV[0]].arrays[f"{DEV[0]}_m"], dtype=np.float64), 10)
    print(
        f"r (k 10) in {DEV[0]}: median {np.median(r):.3f}, 5–95% {np.percentile(r, 5):.3f}–", end=""
    )
    print(f"{np.percentile(r, 95):.3f}")
    grid = [
        Hub(k, beta, where)
        for k, beta, where in itertools.product(
            (5, 10, 20), (0.1, 0.25, 0.5, 1.0), ("scores", "both")
        )
    ]
    results: dict[Hub, dict[str, int]] = {}
    for hub in grid:
        results[hub] = {
            n: questions_hit(RecallIndex(), *convs[n], HubScores(late[n], hub)) for n in DEV
        }
        print(f"  {hub.label()}: {sum(results[hub].values()) / total:.3f}")
    held = 0
    picks = held_out_picks(results, grid)
    for out, pick in picks.items():
        held += results[pick][out]
        print(
            f"{out}: as it is {base[out] / sizes[out]:.3f}, variant "
            f"{results[pick][out] / sizes[out]:.3f} ({pick.label()})"
        )
    print(
        f"hybrid: as it is {sum(base.values()) / total:.3f}; variant, held out {held / total:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
