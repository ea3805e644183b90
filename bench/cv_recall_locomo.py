"""Leave-one-conversation-out cross-validation of the local ranker on LoCoMo's development split.

For each of the five development conversations: tune the ranker's parameters on the other
four (coordinate ascent over a small grid, two rounds), score the held-out one. The mean of
the held-out scores estimates how the ranker does on conversations it was not tuned on; the
parameters chosen per fold show how stable the tuning is. The evaluation split is never read.
In process (RecallIndex directly, no daemon), on the memories of bench_recall_locomo.py.

With --hybrid (needs the embeddings extra), the hybrid instead: memories and questions are
embedded once with memoryd's default model, its semantic scores fused as the daemon fuses
them (late interaction over the candidates, bench/_late_interaction.py), and the fusion
weight is tuned with the ranker's other parameters.

    .venv/bin/python bench/cv_recall_locomo.py [--hybrid]
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from importlib.util import find_spec
from pathlib import Path
from typing import Protocol, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _late_interaction import Arrays, LateScores, token_arrays
from bench_recall_locomo import ABOUT_NONE, DEV, Memory, Query, eval_dir, hits, load

from memoryd.automem.recall.dates import first_date
from memoryd.automem.recall.ranker import LexicalScores, RankerParams, RecallIndex, Semantic

T = TypeVar("T")  # a setting of an experiment (held_out_picks)
GRID: dict[str, list[float]] = {
    "k1": [0.6, 0.9, 1.2],
    "prf_weight": [0.0, 0.15, 0.3],
    "coord": [0.5, 1.0, 2.0],
    "group_weight": [0.15, 0.3, 0.5],
    "date_boost": [0.0, 0.5, 1.0],
    "name_miss": [1.0, 0.8, 0.5],
    "bigram_weight": [0.0, 0.1, 0.2],
    "prefix_weight": [0.0, 0.3],
    "when_boost": [0.0, 0.4, 0.8],
    "diversity": [0.0, 0.15, 0.3],
}
HYBRID_GRID: dict[str, list[float]] = {"semantic_weight": [1.0, 1.5, 2.0, 2.5], **GRID}


class SemanticSide(Protocol):
    """What gives a question's semantic scores (`LateScores`, or an experiment's variant)."""

    def semantic(self, index: RecallIndex, lexical: LexicalScores, question: int) -> Semantic: ...


def questions_hit(
    index: RecallIndex,
    memories: list[Memory],
    queries: list[Query],
    late: SemanticSide | None = None,
) -> int:
    """How many of `queries` have evidence in the five `index` ranks first; `index` is filled
    with `memories` here."""
    for m in memories:
        index.upsert(m.file, m.name, m.fact, m.body, first_date(m.body))
    by_file = {m.file: set(m.dia_id.split(",")) for m in memories}
    got = 0
    for i, q in enumerate(queries):
        lexical = index.lexical(q.question)
        semantic = late.semantic(index, lexical, i) if late is not None else None
        got += hits([by_file[k] for k, _ in index.rank(lexical, 5, semantic)], q.evidence)
    return got


def hits_and_none(
    index: RecallIndex,
    memories: list[Memory],
    queries: list[Query],
    late: SemanticSide | None = None,
) -> tuple[int, int]:
    """`questions_hit`, and (without `late`) how many memories the 80 coding prompts about
    none of them recall (`ABOUT_NONE`, five at most each)."""
    got = questions_hit(index, memories, queries, late)
    return got, 0 if late is not None else sum(len(index.search(p, 5)) for p in ABOUT_NONE)


def held_out_picks(results: Mapping[T, Mapping[str, int]], candidates: Sequence[T]) -> dict[str, T]:
    """Leave-one-conversation-out choice: for each development conversation, the candidate
    (a setting of an experiment) with the most hits on the other four (the first of equals)."""
    return {
        out: max(candidates, key=lambda c: sum(results[c][n] for n in DEV if n != out))
        for out in DEV
    }


def conversation_score(
    memories: list[Memory],
    queries: list[Query],
    params: RankerParams,
    late: LateScores | None = None,
) -> int:
    return questions_hit(RecallIndex(params), memories, queries, late)


def embed(convs: dict[str, tuple[list[Memory], list[Query]]]) -> dict[str, LateScores]:
    """Each conversation's semantic scorer, from memoryd's default model (converted from the
    package that ships it into a scratch state folder, not the user's)."""
    scratch = tempfile.mkdtemp(prefix="mdb-cv-")
    atexit.register(shutil.rmtree, scratch, True)
    os.environ["XDG_STATE_HOME"] = scratch
    from memoryd.automem.embeddings.encoder import SentenceEncoder
    from memoryd.automem.embeddings.models import locate_model

    encoder = SentenceEncoder(locate_model())
    print(f"embedding with {encoder.name}")
    scorers = {}
    for name, (memories, queries) in convs.items():
        arrays: Arrays = token_arrays(
            name,
            encoder.encode_tokens([m.fact for m in memories]),
            encoder.encode_tokens([q.question for q in queries]),
        )
        scorers[name] = LateScores(arrays, name, [m.file for m in memories])
    return scorers


def locomo_args(doc: str) -> tuple[bool, Path] | None:
    """(--hybrid given, LoCoMo's file) from the command line; None, having said why, when the
    data or the embeddings extra is missing."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--hybrid", action="store_true", help="the hybrid (embeddings extra)")
    args = parser.parse_args()
    data_file = locomo_file(hybrid=args.hybrid)
    return None if data_file is None else (args.hybrid, data_file)


def locomo_file(*, hybrid: bool) -> Path | None:
    """LoCoMo's file; None, having said why, when it or (for the hybrid) the embeddings extra
    is missing."""
    data_file = eval_dir() / "locomo10.json"
    if not data_file.is_file():
        print(f"skipped: {data_file} not found (set MEMORYD_EVAL_DIR)")
        return None
    if hybrid and (find_spec("onnxruntime") is None or find_spec("tokenizers") is None):
        print("skipped: the hybrid needs the embeddings extra (pip install -e '.[embeddings]')")
        return None
    return data_file


def main() -> int:
    ready = locomo_args(__doc__ or "")
    if ready is None:
        return 0
    hybrid, data_file = ready
    convs = {name: pair for name, pair in load(data_file).items() if name in DEV}
    late = embed(convs) if hybrid else {}
    grid = HYBRID_GRID if hybrid else GRID
    cache: dict[RankerParams, dict[str, int]] = {}

    def per_conv(params: RankerParams) -> dict[str, int]:
        if params not in cache:
            cache[params] = {n: conversation_score(*convs[n], params, late.get(n)) for n in DEV}
        return cache[params]

    def rate(params: RankerParams, names: list[str]) -> float:
        got = per_conv(params)
        return sum(got[n] for n in names) / sum(len(convs[n][1]) for n in names)

    held_hits = 0
    for held in DEV:
        train = [n for n in DEV if n != held]
        params = RankerParams()
        for _ in range(2):
            for field, values in grid.items():
                candidates = [replace(params, **{field: v}) for v in values]
                params = max(candidates, key=lambda c: rate(c, train))
        held_hits += per_conv(params)[held]
        chosen = ", ".join(f"{f}={getattr(params, f)}" for f in grid)
        print(
            f"{held}: held-out {rate(params, [held]):.3f} "
            f"(defaults {rate(RankerParams(), [held]):.3f}); tuned on the other four: {chosen}"
        )
    total = sum(len(q) for _, q in convs.values())
    print(
        f"LOCO-CV hit@5 {held_hits / total:.3f}; defaults on all five {rate(RankerParams(), list(DEV)):.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
