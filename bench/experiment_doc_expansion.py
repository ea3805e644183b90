"""Experiment (session 19): document-side expansion for the local ranker, on LoCoMo's
development split, beside the ranker as it is, in one run.

The idea: a memory is indexed with its own terms and, at a low weight, with the nearest terms
of a thesaurus made once from the shipped embedding model (all-MiniLM-L6-v2 over wordfreq's
30,000 commonest English words, each word embedded alone; neighbours by cosine, as stems).
A question saying "hurt" then meets a memory saying "injury" through the memory's expansion,
with no model at query time. Session 11 tried the same thesaurus on the query side (each
query term joined by its neighbours: 0.805–0.818 against 0.811); this is the other side:
the expansion is chosen from the memory's whole set of terms (each neighbour weighted by its
closest cosine to any of them), and it scores like a weak extra field of the memory.

Parameters of the variant (the ranker's own stay at their defaults):
- `threshold`: a neighbour joins only at this cosine or above;
- `per_term`: at most this many neighbours per memory term;
- `weight`: an expansion's term frequency (× its cosine), against 1 for a word written;
- `credit`: the share of a query term's weight that an expansion match counts in the
  coordination factor (1: as a written match);
- `idf_all`: a term's document frequency counts the memories it expands too (else only those
  that hold it).

Each is chosen by leave-one-conversation-out over the development split: the best setting on
four conversations, scored on the fifth; the held-out mean is the figure. With --hybrid, the
same for the hybrid (the semantic side as the daemon computes it, bench/_late_interaction.py).
Also printed: memories recalled by the 80 coding prompts about none in each directory
(bench_recall_locomo.ABOUT_NONE), lexical.

Needs wordfreq (only to list the words; a throwaway target dir is fine: PYTHONPATH) and the
embeddings extra. The thesaurus is cached in --cache. The evaluation split is never read.

    PYTHONPATH=/tmp/wf .venv/bin/python bench/experiment_doc_expansion.py [--hybrid]
"""

from __future__ import annotations

import argparse
import atexit
import itertools
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_recall_locomo import DEV, eval_dir, load
from cv_recall_locomo import embed, held_out_picks, hits_and_none

from memoryd.automem.recall.analysis import terms
from memoryd.automem.recall.dates import without_date_label
from memoryd.automem.recall.ranker import RankerParams, RecallIndex

Thesaurus = dict[str, list[tuple[str, float]]]  # stem → (neighbour stem, cosine), best first


def build_thesaurus(cache: Path, words: int = 30_000, keep: int = 10) -> Thesaurus:
    """Stem → its nearest stems (cosine ≥ 0.5, at most `keep`), from single-word embeddings."""
    if cache.is_file():
        data = np.load(cache, allow_pickle=False)
        stems, nbr, cos = list(data["stems"]), data["nbr"], data["cos"]
        return {
            str(s): [
                (str(stems[j]), float(c)) for j, c in zip(nbr[i], cos[i], strict=True) if j >= 0
            ]
            for i, s in enumerate(stems)
        }
    import wordfreq  # type: ignore[import-untyped]

    from memoryd.automem.embeddings.encoder import SentenceEncoder
    from memoryd.automem.embeddings.models import locate_model

    listed = [w for w in wordfreq.top_n_list("en", words) if w.isascii() and w.isalpha()]
    kept_words, word_stems = [], []
    for w in listed:
        t = terms(w)
        if len(t) == 1 and len(w) >= 3:
            kept_words.append(w)
            word_stems.append(t[0])
    encoder = SentenceEncoder(locate_model())
    started = time.perf_counter()
    vectors = np.vstack(
        [encoder.encode(kept_words[i : i + 256]) for i in range(0, len(kept_words), 256)]
    ).astype(np.float32)
    print(f"thesaurus: {len(kept_words)} words embedded in {time.perf_counter() - started:.0f} s")
    stems = sorted(set(word_stems))
    at = {s: i for i, s in enumerate(stems)}
    best: list[dict[int, float]] = [{} for _ in stems]
    for lo in range(0, len(kept_words), 2048):
        block = vectors[lo : lo + 2048] @ vectors.T
        top = np.argpartition(-block, keep * 3, axis=1)[:, : keep * 3]
        for r, row in enumerate(top):
            own = at[word_stems[lo + r]]
            for j in row:
                other = at[word_stems[j]]
                c = float(block[r, j])
                if other != own and c >= 0.5 and c > best[own].get(other, 0.0):
                    best[own][other] = c
    nbr = np.full((len(stems), keep), -1, dtype=np.int64)
    cos = np.zeros((len(stems), keep), dtype=np.float32)
    for i, found in enumerate(best):
        ranked = sorted(found.items(), key=lambda kv: -kv[1])[:keep]
        for k, (j, c) in enumerate(ranked):
            nbr[i, k], cos[i, k] = j, c
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, stems=np.array(stems), nbr=nbr, cos=cos)
    return build_thesaurus(cache, words, keep)


@dataclass(frozen=True)
class Expansion:
    threshold: float
    per_term: int
    weight: float
    credit: float
    idf_all: bool

    def label(self) -> str:
        return (
            f"thr {self.threshold} k {self.per_term} w {self.weight} "
            f"credit {self.credit} idf_all {int(self.idf_all)}"
        )


class ExpandedIndex(RecallIndex):
    """The ranker as it is, each memory also indexed with its thesaurus neighbours."""

    def __init__(self, thesaurus: Thesaurus, expansion: Expansion) -> None:
        super().__init__(RankerParams())
        self.thesaurus, self.expansion = thesaurus, expansion
        self._exp_postings: dict[str, dict[int, float]] = {}  # term → slot → cosine
        self._exp_of: dict[str, dict[str, float]] = {}  # key → its expansion terms

    def upsert(self, key: str, name: str, description: str, body: str, when=None, **kw):  # type: ignore[no-untyped-def]
        super().upsert(key, name, description, body, when, **kw)
        e = self.expansion
        own = set(terms(without_date_label(description))) | set(terms(without_date_label(body)))
        held = self._docs[key].tfs
        added: dict[str, float] = {}
        for term in own:
            for other, c in self.thesaurus.get(term, [])[: e.per_term]:
                if c >= e.threshold and other not in held and c > added.get(other, 0.0):
                    added[other] = c
        slot = self._docs[key].slot
        for term, c in added.items():
            self._exp_postings.setdefault(term, {})[slot] = c
            self._arrays.pop(term, None)
        self._exp_of[key] = added

    def _remove(self, key: str) -> None:
        doc = self._docs.get(key)
        for term in self._exp_of.pop(key, {}):
            if doc is not None:
                self._exp_postings.get(term, {}).pop(doc.slot, None)
            self._arrays.pop(term, None)
        super()._remove(key)

    def _idf(self, term: str) -> float:
        if not self.expansion.idf_all:
            return super()._idf(term)
        self._drop_stale_caches()
        idf = self._idf_cache.get(term)
        if idf is None:
            n = len(self._docs)
            df = len(self._postings.get(term, ())) + len(self._exp_postings.get(term, ()))
            idf = self._idf_cache[term] = float(np.log(1.0 + (n - df + 0.5) / (df + 0.5)))
        return idf

    def _exp_arrays(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        posting = self._exp_postings.get(term)
        if not posting:
            return None
        slots = np.fromiter(posting, dtype=np.int64, count=len(posting))
        tf = self.expansion.weight * np.fromiter(posting.values(), dtype=np.float64)
        return slots, tf / (self.params.k1 + tf)

    def _score(self, query: dict[str, float]) -> np.ndarray:
        # RecallIndex._score, with each term's expansion holders scored and credited too.
        scores = np.zeros(len(self._keys), dtype=np.float64)
        matched = np.zeros(len(self._keys), dtype=np.float64)
        p = self.params
        name_hits = None
        naming = 0
        for term, qweight in query.items():
            arrays = self._term_arrays(term)
            extra = self._exp_arrays(term)
            if arrays is None and extra is None:
                continue
            idf = self._idf(term)
            if arrays is not None:
                slots, impact = arrays
                scores[slots] += (qweight * idf) * impact
                matched[slots] += qweight
            if extra is not None:
                slots_e, impact_e = extra
                scores[slots_e] += (qweight * idf) * impact_e
                matched[slots_e] += qweight * self.expansion.credit
            if arrays is not None and p.name_miss != 1.0 and self._name_df.get(term, 0) > 0:
                if name_hits is None:
                    name_hits = np.zeros(len(self._keys), dtype=np.int64)
                name_hits[arrays[0]] += 1
                naming += 1
        total = sum(query.values())
        if p.coord and total > 0:
            scores *= (matched / total) ** p.coord
        if name_hits is not None:
            factors = p.name_miss ** np.arange(naming + 1, dtype=np.float64)
            scores *= factors[naming - name_hits]
        return scores


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hybrid", action="store_true")
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "memoryd-thesaurus.npz"
    )
    args = parser.parse_args()
    data_file = eval_dir() / "locomo10.json"
    if not data_file.is_file():
        print(f"skipped: {data_file} not found (set MEMORYD_EVAL_DIR)")
        return 0
    if find_spec("onnxruntime") is None or (
        not args.cache.is_file() and find_spec("wordfreq") is None
    ):
        print("skipped: needs the embeddings extra, and wordfreq to build the thesaurus")
        return 0
    scratch = tempfile.mkdtemp(prefix="mdb-exp-")
    atexit.register(shutil.rmtree, scratch, True)
    os.environ["XDG_STATE_HOME"] = scratch
    os.environ["HF_HOME"] = scratch
    os.environ["HF_HUB_OFFLINE"] = "1"
    thesaurus = build_thesaurus(args.cache)
    for probe in ("hurt", "pet", "destress", "paint", "job"):
        print(f"  {probe} → {thesaurus.get(terms(probe)[0], [])[:6]}")
    convs = {name: pair for name, pair in load(data_file).items() if name in DEV}
    late = embed(convs) if args.hybrid else {}
    # The hybrid's grid leaves out what lost on the lexical side everywhere (idf over the
    # expansions too, full credit): each hybrid setting embeds nothing again, but ranks 630
    # questions with late interaction.
    grid = [
        Expansion(t, k, w, c, a)
        for t, k, w, c, a in itertools.product(
            (0.6, 0.7),
            (3, 6),
            (0.1, 0.25, 0.5),
            (0.5,) if args.hybrid else (0.5, 1.0),
            (False,) if args.hybrid else (False, True),
        )
    ]
    kind = "hybrid" if args.hybrid else "lexical"
    started = time.perf_counter()
    base = {n: hits_and_none(RecallIndex(), *convs[n], late.get(n)) for n in DEV}
    print(f"{kind} as it is: {sum(h for h, _ in base.values()) / 630:.3f} ", end="")
    print(f"({time.perf_counter() - started:.0f} s)")
    # The variant's code with no expansion (no neighbour that close) must be the ranker as it is.
    off = Expansion(1.01, 0, 0.0, 0.5, False)
    same = {n: hits_and_none(ExpandedIndex(thesaurus, off), *convs[n], late.get(n)) for n in DEV}
    assert same == base, "the variant without expansions differs from the ranker as it is"
    results: dict[Expansion, dict[str, tuple[int, int]]] = {}
    for e in grid:
        results[e] = {
            n: hits_and_none(ExpandedIndex(thesaurus, e), *convs[n], late.get(n)) for n in DEV
        }
        total = sum(h for h, _ in results[e].values())
        none = sum(x for _, x in results[e].values())
        print(f"  {e.label()}: {total / 630:.3f}" + ("" if args.hybrid else f", none {none}"))
    sizes = {n: len(convs[n][1]) for n in DEV}
    held_base = held_variant = 0
    hits_only = {e: {n: h for n, (h, _) in by_conv.items()} for e, by_conv in results.items()}
    for held, chosen in held_out_picks(hits_only, grid).items():
        held_variant += results[chosen][held][0]
        held_base += base[held][0]
        print(
            f"{held}: as it is {base[held][0] / sizes[held]:.3f}, variant "
            f"{results[chosen][held][0] / sizes[held]:.3f} ({chosen.label()})"
        )
    total = sum(sizes.values())
    print(f"{kind}: as it is {held_base / total:.3f}; variant, held out {held_variant / total:.3f}")
    if not args.hybrid:
        print(f"prompts about none, as it is: {sum(x for _, x in base.values())} memories")
    return 0


if __name__ == "__main__":
    sys.exit(main())
