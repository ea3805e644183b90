"""Experiment (session 24): a learned query-side adapter for the hybrid's semantic side, on
LoCoMo's development split, beside the hybrid as it is, in one run.

all-MiniLM-L6-v2 is a symmetric model, and LoCoMo asks questions of statements ("When did
Caroline go to the support group?" → "Caroline attended an LGBTQ support group"). A linear
map W = I + ΔW applied to the query's vectors only (its token vectors before late
interaction, and its pooled vector before the cosines that choose the candidates, or not)
could move a question towards the statements that answer it, with memories' vectors as
they are (no re-indexing). ΔW is diagonal (384 values), of low rank (A Bᵀ, rank 4–32) or
full, with L2 on it (on A and B for low rank) pulling W towards the identity.

Training (numpy, hand-written gradients, Adam, full batch, 60 steps): InfoNCE (temperature
0.05) over each question's candidates — its evidence memories as positives, the hybrid's own
fused best 30 and 20 other memories of the conversation as negatives — on the
late-interaction score the daemon computes (IDF-weighted MaxSim; the memory token that
answers each query token is fixed at its best under the identity, W staying near it), plus,
with the adapter on the pooled vector too, InfoNCE of the pooled cosines over all the
conversation's memories. Scoring is exact: the adapted query vectors go through the hybrid
as the daemon runs it (`_late_interaction.LateScores`, `RecallIndex.rank`).

Judged as earlier experiments were: each setting trained on four development conversations
and scored on the fifth, five ways; for each conversation, the setting with the most of those
held-out hits on the other four is its pick (`held_out_picks`), and the mean over the five
is the figure, beside the hybrid as it is in the same run. That choice sees models trained
with the held-out conversation in (on the other four's scores only), so it is optimistic;
`--nested` also chooses inside the four alone (trained on three, scored on the fourth, four
ways; the identity is a choice too), at five times the training. The evaluation split is
never read.

Measured (session 24; the hybrid as it is 0.860: conv-26 100, conv-30 59, conv-41 121,
conv-42 130, conv-43 132 of 120 / 64 / 133 / 162 / 151 questions), each setting held out
(trained on the other four):

    diag reg 0.001, tokens          0.863  (99 60 122 131 132)
    diag reg 0.001, both            0.860  (98 60 122 130 132)
    low r 4 / r 32 reg 0.1, tokens  0.860  (the identity: A and B shrink to nothing)
    low r 8 reg 0.03, tokens        0.870  (98 59 121 137 133)
    low r 16 reg 0.1, both          0.865  (99 59 121 134 132)
    full reg 0.3, tokens            0.863  (99 59 122 130 134)
    full reg 1, both                0.863  (99 59 122 131 133)
    full reg 3, tokens              0.865  (101 59 123 130 132)
    low r 4 reg 0.03, tokens        0.871  (98 59 121 137 134)
    low r 8 reg 0.01, tokens        0.859  (99 59 119 131 133)
    low r 16 / r 32 reg 0.03, tok.  0.870  (98 59 121 137 133)

The setting chosen on the other four (the whole grid): **0.859** (98 59 121 130 133; multi-hop
0.726, temporal 0.920, open-domain 0.564, single-hop 0.925) against 0.860. Low rank at 0.03
gains in conv-42 alone (+7; over the five, multi-hop +3 questions, open-domain +1, single-hop +2), loses 2 in conv-26 and
gains 1–2 in conv-43: with conv-42 held out, the other four prefer full rank at reg 3 (130,
no gain), so the gain does not carry to a conversation it was not chosen on. A grid of the
low-rank 0.03–0.01 rows alone, drawn up after the first run had shown low rank at 0.03,
picks low r 4 in every fold (0.871); that grid was chosen on held-out figures, and is not
the measure. Nested, with that grid's best (low r 4 at reg 0.03) or the identity as the only
choices: **0.857** (98 59 121 130 132): trained on three conversations and scored on the
fourth, four ways, the adapter loses 5 questions in all where conv-42 is held out and ties
where conv-43 is, so both keep the identity. Not taken; the evaluation split was not run. `--nested` over the whole grid
was not run (five times the training, hours on two shared cores).

    .venv/bin/python bench/experiment_query_adapter.py [--cache FILE.npz] [--nested]

`--cache` keeps the development split's vectors (embedded if the file is missing), so a
second run skips the model.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _late_interaction import Arrays, LateScores
from bench_recall_locomo import CATEGORIES, DEV, Memory, Query, hits, load
from cv_recall_locomo import embed, held_out_picks, locomo_file

from memoryd.automem.embeddings import late_interaction as li
from memoryd.automem.recall.dates import first_date
from memoryd.automem.recall.ranker import LexicalScores, RecallIndex

F = npt.NDArray[np.float32]
DIM = 384
TAU = 0.05  # InfoNCE temperature, on cosines and late-interaction scores alike
HARD = 30  # the hybrid's own best, as negatives
EASY = 20  # other memories of the conversation, as negatives
STEPS = 60
SEED = 24


@dataclass(frozen=True)
class Setting:
    kind: str  # "diag", "low" or "full"
    rank: int  # of ΔW, for "low"
    reg: float  # L2 on ΔW's parameters
    where: str  # "tokens" (late interaction only) or "both" (the pooled vector too)

    def label(self) -> str:
        rank = f" r {self.rank}" if self.kind == "low" else ""
        return f"{self.kind}{rank} reg {self.reg:g} {self.where}"


@dataclass
class Conv:
    """One conversation: its ranker (filled once), each question's lexical scores and hits
    under the hybrid as it is, and the tensors training reads."""

    name: str
    memories: list[Memory]
    queries: list[Query]
    arrays: Arrays
    index: RecallIndex = field(init=False)
    lexical: list[LexicalScores] = field(init=False)
    by_file: dict[str, set[str]] = field(init=False)

    def __post_init__(self) -> None:
        self.index = RecallIndex()
        for m in self.memories:
            self.index.upsert(m.file, m.name, m.fact, m.body, first_date(m.body))
        self.lexical = [self.index.lexical(q.question) for q in self.queries]
        self.by_file = {m.file: set(m.dia_id.split(",")) for m in self.memories}

    def late(self, w: F | None = None, pooled: bool = False) -> LateScores:
        """The semantic side, with the query's token vectors (and pooled vector, if
        `pooled`) mapped by `w` first; as it is without `w`."""
        a = dict(self.arrays)
        if w is not None:
            a[f"{self.name}_qvectors"] = unit(a[f"{self.name}_qvectors"] @ w.T)
            if pooled:
                a[f"{self.name}_q"] = unit(a[f"{self.name}_q"] @ w.T)
        return LateScores(a, self.name, [m.file for m in self.memories])

    def hit(self, late: LateScores) -> np.ndarray:
        """Per question: whether an evidence memory is in the five the hybrid ranks first."""
        out = np.zeros(len(self.queries), dtype=bool)
        for i, q in enumerate(self.queries):
            semantic = late.semantic(self.index, self.lexical[i], i)
            top = self.index.rank(self.lexical[i], 5, semantic)
            out[i] = hits([self.by_file[k] for k, _ in top], q.evidence)
        return out


def unit(x: np.ndarray) -> F:
    out: F = (x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)).astype(np.float32)
    return out


@dataclass(frozen=True)
class Question:
    """One question as training reads it: its word-like token vectors `x` (tokens × DIM) and
    their IDF weights `w` (summing to 1); for each candidate, each token's best memory token
    under the identity, `d` (tokens × candidates × DIM); which candidates are positives."""

    x: F
    w: F
    d: F
    pos: np.ndarray


@dataclass(frozen=True)
class Tensors:
    """A conversation's questions for training, and its pooled vectors: `qp` (questions ×
    DIM), `mp` (memories × DIM), `qpos` (questions × memories, the positives)."""

    questions: list[Question]
    qp: F
    mp: F
    qpos: np.ndarray


def training_tensors(conv: Conv, seed: int) -> Tensors:
    """Everything one conversation's questions bring to training, gathered once. Which
    memory token answers each query token is fixed at its best under the identity: W stays
    near it, and the score itself is measured exactly (`Conv.hit`)."""
    name, a = conv.name, conv.arrays
    rng = np.random.default_rng(seed)
    late = conv.late()
    mem_vectors = li.unpack(a[f"{name}_mrows"], DIM)  # memories × TOKENS × DIM
    mem_ids = a[f"{name}_mids"]
    freq = li.frequencies(mem_ids)
    ends = a[f"{name}_qends"]
    slot = {m.file: r for r, m in enumerate(conv.memories)}
    questions = []
    qpos = np.zeros((len(conv.queries), len(conv.memories)), dtype=bool)
    for i, q in enumerate(conv.queries):
        positives = [r for r, m in enumerate(conv.memories) if conv.by_file[m.file] & q.evidence]
        qpos[i, positives] = True
        semantic = late.semantic(conv.index, conv.lexical[i], i)
        hard = [slot[k] for k, _ in conv.index.rank(conv.lexical[i], HARD, semantic)]
        hard = [r for r in hard if r not in positives]
        rest = np.setdiff1d(np.arange(len(conv.memories)), [*positives, *hard])
        easy = rng.choice(rest, min(EASY, len(rest)), replace=False).tolist()
        cands = np.array([*positives, *hard, *easy])
        part = slice(ends[i - 1] if i else 0, ends[i])
        ids, vectors, wordlike = (
            a[f"{name}_qids"][part],
            a[f"{name}_qvectors"][part],
            a[f"{name}_qwordlike"][part],
        )
        keep = wordlike if wordlike.any() else np.ones(len(ids), dtype=bool)
        weights = li.idf(ids[keep], freq)
        x = np.asarray(vectors[keep], dtype=np.float32)
        tokens = mem_vectors[cands]  # candidates × TOKENS × DIM
        sims = np.einsum("td,cjd->tcj", x, tokens)
        sims[:, mem_ids[cands] < 0] = -np.inf
        best = sims.argmax(axis=2)  # tokens × candidates
        d = tokens[np.arange(len(cands))[None, :], best]  # tokens × candidates × DIM
        questions.append(
            Question(
                x,
                (weights / (weights.sum() or 1.0)).astype(np.float32),
                np.ascontiguousarray(d, dtype=np.float32),
                np.isin(cands, positives),
            )
        )
    return Tensors(
        questions,
        np.asarray(a[f"{name}_q"], dtype=np.float32),
        np.asarray(a[f"{name}_m"], dtype=np.float32),
        qpos,
    )


def unit_grad(u: np.ndarray, norm: np.ndarray, g_u: np.ndarray) -> np.ndarray:
    """The gradient in v of a loss whose gradient in u = v / |v| is `g_u`."""
    out: np.ndarray = (g_u - u * np.sum(g_u * u, axis=-1, keepdims=True)) / norm
    return out


def loss_and_grad(delta: F, data: list[Tensors], where: str) -> tuple[float, F]:
    """Mean InfoNCE loss over the questions of `data` for W = I + `delta`, and its gradient
    in `delta` (the regulariser is the caller's)."""
    w = np.eye(DIM, dtype=np.float32) + delta
    total, grad, questions = 0.0, np.zeros_like(delta), 0
    for t in data:
        questions += len(t.questions)
        for q in t.questions:  # late interaction over the question's candidates
            v = q.x @ w.T
            norm = np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
            u = v / norm
            sims = np.matmul(q.d, u[:, :, None])[:, :, 0]  # tokens × candidates
            logits = (q.w @ sims) / TAU
            e = np.exp(logits - logits.max())
            p_all, p_pos = e / e.sum(), np.where(q.pos, e, 0.0) / e[q.pos].sum()
            total += float(np.log(e.sum()) - np.log(e[q.pos].sum()))
            g_c = (p_all - p_pos) / TAU  # in each candidate's score
            g_u = np.matmul((q.w[:, None] * g_c[None, :])[:, None, :], q.d)[:, 0, :]
            grad += unit_grad(u, norm, g_u).T @ q.x
        if where == "both":  # the pooled cosines, over all the conversation's memories
            vp = t.qp @ w.T
            normp = np.maximum(np.linalg.norm(vp, axis=1, keepdims=True), 1e-12)
            up = vp / normp
            cos = up @ t.mp.T / TAU  # questions × memories
            cos -= cos.max(axis=1, keepdims=True)
            e = np.exp(cos)
            pe = e * t.qpos
            total += float(np.sum(np.log(e.sum(axis=1)) - np.log(pe.sum(axis=1))))
            g_up = (
                (e / e.sum(axis=1, keepdims=True) - pe / pe.sum(axis=1, keepdims=True)) / TAU
            ) @ t.mp
            grad += unit_grad(up, normp, g_up).T @ t.qp
    return total / questions, (grad / questions).astype(np.float32)


def train(setting: Setting, data: list[Tensors], seed: int = SEED) -> F:
    """W = I + ΔW for `setting`, fitted on `data` (Adam, full batch, `STEPS` steps)."""
    rng = np.random.default_rng(seed)
    if setting.kind == "diag":
        params = [np.zeros(DIM, dtype=np.float32)]
        lr = 0.01
    elif setting.kind == "low":
        params = [
            (rng.standard_normal((DIM, setting.rank)) * 0.01).astype(np.float32),
            np.zeros((DIM, setting.rank), dtype=np.float32),
        ]
        lr = 0.01
    else:
        params = [np.zeros((DIM, DIM), dtype=np.float32)]
        lr = 0.002
    m: list[np.ndarray] = [np.zeros_like(p) for p in params]
    s: list[np.ndarray] = [np.zeros_like(p) for p in params]

    def delta() -> F:
        if setting.kind == "diag":
            return np.diag(params[0]).astype(np.float32)
        if setting.kind == "low":
            return (params[0] @ params[1].T).astype(np.float32)
        return params[0]

    for step in range(1, STEPS + 1):
        _, g = loss_and_grad(delta(), data, setting.where)
        if setting.kind == "diag":
            grads = [np.diag(g).copy()]
        elif setting.kind == "low":
            grads = [g @ params[1], g.T @ params[0]]
        else:
            grads = [g]
        for j, p in enumerate(params):
            gj = grads[j] + 2 * setting.reg * p
            m[j] = 0.9 * m[j] + 0.1 * gj
            s[j] = 0.999 * s[j] + 0.001 * gj * gj
            p -= lr * (m[j] / (1 - 0.9**step)) / (np.sqrt(s[j] / (1 - 0.999**step)) + 1e-8)
    return np.eye(DIM, dtype=np.float32) + delta()


def score(conv: Conv, setting: Setting, w: F) -> np.ndarray:
    return conv.hit(conv.late(w, pooled=setting.where == "both"))


def categories(convs: dict[str, Conv], hit: dict[str, np.ndarray]) -> str:
    out = []
    for c, label in CATEGORIES.items():
        got = sum(int(hit[n][[q.category == c for q in convs[n].queries]].sum()) for n in DEV)
        of = sum(sum(q.category == c for q in convs[n].queries) for n in DEV)
        out.append(f"{label} {got / of:.3f}")
    return ", ".join(out)


# Low rank at reg 0.1 stays at the identity (A and B shrink to nothing from their small
# start), hence the second low-rank row at 0.01–0.03.
GRID = [
    Setting("diag", 0, 0.001, "tokens"),
    Setting("diag", 0, 0.001, "both"),
    Setting("low", 4, 0.1, "tokens"),
    Setting("low", 8, 0.03, "tokens"),
    Setting("low", 32, 0.1, "tokens"),
    Setting("low", 16, 0.1, "both"),
    Setting("full", 0, 0.3, "tokens"),
    Setting("full", 0, 1.0, "both"),
    Setting("full", 0, 3.0, "tokens"),
    Setting("low", 4, 0.03, "tokens"),
    Setting("low", 8, 0.01, "tokens"),
    Setting("low", 16, 0.03, "tokens"),
    Setting("low", 32, 0.03, "tokens"),
]


def nested(
    convs: dict[str, Conv], tensors: dict[str, Tensors], base: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """Each conversation's hits with the setting chosen inside the other four (trained on
    three, scored on the fourth, four ways; the identity is a choice too), trained again on
    the four."""
    held: dict[str, np.ndarray] = {}
    for out in DEV:
        four = [n for n in DEV if n != out]
        inner = {
            s: sum(
                int(score(convs[v], s, train(s, [tensors[n] for n in four if n != v])).sum())
                for v in four
            )
            for s in GRID
        }
        as_is = sum(int(base[n].sum()) for n in four)
        pick = max(GRID, key=lambda s: inner[s])
        if inner[pick] <= as_is:
            held[out] = base[out]
        else:
            held[out] = score(convs[out], pick, train(pick, [tensors[n] for n in four]))
        print(f"  nested, {out}: {pick.label()} inner {inner[pick]} against {as_is}")
    return held


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cache", type=Path, help="the development split's vectors (.npz)")
    parser.add_argument(
        "--nested", action="store_true", help="also choose settings by nested cross-validation"
    )
    args = parser.parse_args()
    data_file = locomo_file(hybrid=True)
    if data_file is None:
        return 0
    pairs = {name: pair for name, pair in load(data_file).items() if name in DEV}
    if args.cache is not None and args.cache.is_file():
        with np.load(args.cache) as z:
            arrays = {k: z[k] for k in z.files}
    else:
        arrays = {}
        for late in embed(pairs).values():
            arrays.update(late.arrays)
        if args.cache is not None:
            np.savez(args.cache, **arrays)
    convs = {n: Conv(n, *pairs[n], arrays) for n in DEV}
    total = sum(len(c.queries) for c in convs.values())
    base = {n: convs[n].hit(convs[n].late()) for n in DEV}
    same = {n: score(convs[n], GRID[1], np.eye(DIM, dtype=np.float32)) for n in DEV}
    assert all((same[n] == base[n]).all() for n in DEV), "W = I differs from the hybrid"

    def line(hit: dict[str, np.ndarray]) -> str:
        per = " ".join(f"{n[5:]} {int(hit[n].sum())}" for n in DEV)
        got = sum(int(h.sum()) for h in hit.values())
        return f"{got / total:.3f} ({per}); {categories(convs, hit)}"

    print(f"hybrid as it is: {line(base)}")
    tensors = {n: training_tensors(convs[n], SEED) for n in DEV}
    # Each setting trained on four conversations and scored on the fifth, five ways.
    results: dict[Setting, dict[str, np.ndarray]] = {}
    for setting in GRID:
        start = time.monotonic()
        results[setting] = {
            out: score(convs[out], setting, train(setting, [tensors[n] for n in DEV if n != out]))
            for out in DEV
        }
        took = time.monotonic() - start
        print(f"  {setting.label()}: held out {line(results[setting])} [{took:.0f} s]")
    counts = {s: {n: int(h.sum()) for n, h in r.items()} for s, r in results.items()}
    picks = held_out_picks(counts, GRID)
    chosen = {out: results[pick][out] for out, pick in picks.items()}
    print(f"setting chosen on the other four's held-out hits: {line(chosen)}")
    print("  " + ", ".join(f"{out[5:]}: {pick.label()}" for out, pick in picks.items()))
    if args.nested:
        print(f"nested: {line(nested(convs, tensors, base))}")
    print(f"hybrid as it is: {line(base)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
