"""Experiment (session 19): other retrieval models for the local ranker's term weights, on
LoCoMo's development split, beside BM25F as it is, in one run.

Each variant changes only how a query term scores a memory; everything built on top (fields,
prefix matches, pseudo-relevance feedback, coordination, the name penalty, adjacent pairs,
the date signals, diversity) stays as it is:
- **BM25+** (Lv & Zhai 2011): each matched term adds `delta` × idf beyond its saturated
  frequency, so a memory matching a term is never worth as little as a long one that nearly
  does not (the lower bound BM25 lacks);
- **BM25L** (same authors): the length-normalised frequency shifted by `delta` before
  saturation, which lifts long memories' matches less than BM25+ does;
- **query likelihood with Dirichlet smoothing** (Zhai & Lafferty 2001), as the log-likelihood
  ratio to the collection: Σ over matched terms of log(1 + tf / (μ P(t|C))) + |q| log(μ /
  (|d| + μ)), floored at a small positive value for memories that match (tf and |d| are the
  fields' weighted sums as BM25F makes them). Its idf comes from the collection frequency,
  not the document frequency, and its length prior is a different shape;
- **BM25F and query likelihood fused**: each scaled to its best, mixed (`mix` of query
  likelihood), rescaled to BM25F's best (the adjacent-pair bonus is absolute).

Every parameter (delta, μ, mix) is chosen by leave-one-conversation-out over the development
split, within each family and across all of them: best on four conversations, scored on the
fifth; the held-out mean is the figure. With --hybrid, the same for the hybrid (the semantic
side as the daemon computes it, bench/_late_interaction.py). The evaluation split is never read.

    .venv/bin/python bench/experiment_lexical_models.py [--hybrid]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_recall_locomo import DEV, eval_dir, load
from cv_recall_locomo import embed, held_out_picks, hits_and_none

from memoryd.automem.recall.ranker import RankerParams, RecallIndex


@dataclass(frozen=True)
class Model:
    family: str  # "bm25+", "bm25l", "ql", "fused"
    delta: float = 0.0
    mu: float = 0.0
    mix: float = 0.0

    def label(self) -> str:
        if self.family in ("bm25+", "bm25l"):
            return f"{self.family} delta {self.delta}"
        if self.family == "ql":
            return f"ql mu {self.mu}"
        return f"fused mu {self.mu} mix {self.mix}"


class ModelIndex(RecallIndex):
    """The ranker as it is, its per-term score given by `model`."""

    def __init__(self, model: Model) -> None:
        super().__init__(RankerParams())
        self.model = model

    def _term_arrays(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        arrays = super()._term_arrays(term)
        if arrays is None or self.model.family not in ("bm25+", "bm25l"):
            return arrays
        slots, impact = arrays
        k1, delta = self.params.k1, self.model.delta
        if self.model.family == "bm25+":
            return slots, impact + delta
        tf = impact * k1 / (1.0 - impact)  # the normalised frequency saturation was given
        return slots, (tf + delta) / (k1 + tf + delta)

    def _ql(self, query: dict[str, float]) -> np.ndarray:
        """Query likelihood (Dirichlet) as a log-likelihood ratio, for memories that match."""
        w = self.params.weights
        assert self._lengths is not None
        lengths = self._lengths[: len(self._keys)] @ np.asarray(w)
        total_length = float(lengths.sum()) or 1.0
        mu = self.model.mu
        out = np.zeros(len(self._keys), dtype=np.float64)
        matched = np.zeros(len(self._keys), dtype=bool)
        weight_sum = 0.0
        for term, qweight in query.items():
            posting = self._postings.get(term)
            if not posting:
                continue
            slots = np.fromiter(posting, dtype=np.int64, count=len(posting))
            tfs = np.array(list(posting.values()), dtype=np.float64) @ np.asarray(w)
            p_c = float(tfs.sum()) / total_length
            out[slots] += qweight * np.log1p(tfs / (mu * p_c))
            matched[slots] = True
            weight_sum += qweight
        out += weight_sum * np.log(mu / (lengths + mu))
        return np.where(matched, np.maximum(out, 1e-3), 0.0)

    def _score(self, query: dict[str, float]) -> np.ndarray:
        base = super()._score(query)
        if self.model.family not in ("ql", "fused"):
            return base
        ql = self._ql(query)
        # The coordination factor and the name penalty, as BM25F's scores got them: the ratio
        # of its scores to their raw sums is exactly those factors.
        factors = self._factors(query)
        ql = ql * factors
        top_ql, top_base = float(ql.max()), float(base.max())
        if top_ql <= 0 or top_base <= 0:
            return base
        if self.model.family == "ql":
            return ql * (top_base / top_ql)
        mix = self.model.mix
        return top_base * ((1 - mix) * base / top_base + mix * ql / top_ql)

    def _factors(self, query: dict[str, float]) -> np.ndarray:
        """Per memory: the coordination factor × the name penalty, as `_score` applies them."""
        p = self.params
        matched = np.zeros(len(self._keys), dtype=np.float64)
        name_hits = np.zeros(len(self._keys), dtype=np.int64)
        naming = 0
        for term, qweight in query.items():
            arrays = RecallIndex._term_arrays(self, term)
            if arrays is None:
                continue
            matched[arrays[0]] += qweight
            if p.name_miss != 1.0 and self._name_df.get(term, 0) > 0:
                name_hits[arrays[0]] += 1
                naming += 1
        total = sum(query.values())
        factors = (matched / total) ** p.coord if p.coord and total > 0 else np.ones_like(matched)
        return factors * p.name_miss ** (naming - name_hits).astype(np.float64)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hybrid", action="store_true")
    args = parser.parse_args()
    data_file = eval_dir() / "locomo10.json"
    if not data_file.is_file():
        print(f"skipped: {data_file} not found (set MEMORYD_EVAL_DIR)")
        return 0
    if args.hybrid and find_spec("onnxruntime") is None:
        print("skipped: --hybrid needs the embeddings extra")
        return 0
    convs = {name: pair for name, pair in load(data_file).items() if name in DEV}
    late: dict[str, object] = {}
    if args.hybrid:
        late = dict(embed(convs))
    kind = "hybrid" if args.hybrid else "lexical"
    started = time.perf_counter()
    base = {n: hits_and_none(RecallIndex(), *convs[n], late.get(n)) for n in DEV}
    print(f"{kind} as it is (BM25F): {sum(h for h, _ in base.values()) / 630:.3f} ", end="")
    print(f"({time.perf_counter() - started:.0f} s)")
    # The subclass with nothing changed must be the ranker as it is.
    same = {n: hits_and_none(ModelIndex(Model("bm25+")), *convs[n], late.get(n)) for n in DEV}
    assert same == base, "BM25+ with delta 0 differs from the ranker as it is"
    grid = (
        [Model("bm25+", delta=d) for d in (0.05, 0.1, 0.25, 0.5)]
        + [Model("bm25l", delta=d) for d in (0.25, 0.5, 1.0)]
        + [Model("ql", mu=m) for m in (2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 1000.0)]
        + [Model("fused", mu=m, mix=x) for m in (5.0, 50.0, 250.0) for x in (0.1, 0.25, 0.5)]
    )
    results: dict[Model, dict[str, tuple[int, int]]] = {}
    for model in grid:
        results[model] = {n: hits_and_none(ModelIndex(model), *convs[n], late.get(n)) for n in DEV}
        got = sum(h for h, _ in results[model].values())
        none = sum(x for _, x in results[model].values())
        print(f"  {model.label()}: {got / 630:.3f}" + ("" if args.hybrid else f", none {none}"))
    sizes = {n: len(convs[n][1]) for n in DEV}
    total = sum(sizes.values())
    families = {"all": grid} | {
        f: [m for m in grid if m.family == f] for f in ("bm25+", "bm25l", "ql", "fused")
    }
    hits_only = {m: {n: h for n, (h, _) in by_conv.items()} for m, by_conv in results.items()}
    for family, members in families.items():
        picks = held_out_picks(hits_only, members)
        held_hits = sum(hits_only[pick][held] for held, pick in picks.items())
        chosen = "; ".join(pick.label() for pick in picks.values())
        print(f"{family}: held out {held_hits / total:.3f} (chosen: {chosen})")
    print(f"{kind} as it is: {sum(h for h, _ in base.values()) / total:.3f}")
    if not args.hybrid:
        print(f"prompts about none, as it is: {sum(x for _, x in base.values())} memories")
    return 0


if __name__ == "__main__":
    sys.exit(main())
