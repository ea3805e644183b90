"""What saving costs while a directory is embedded in bulk, and what deferring compaction
would save.

The background embedder (memoryd/automem/embeddings/semantic.py) makes each chunk of
`EMBED_CHUNK` memories durable before the next: token vectors, then pooled vectors. Each save
appends to the stores' logs, or folds a log grown past its share of the base into a new base
(memoryd/automem/embeddings/vectors.py). Indexing N new memories from nothing therefore
rewrites the base several times. This bench measures, in one run and alternating, the saves
of a bulk index of N memories (random unit vectors, 32 tokens each, as the embedder writes
them; no model runs):

- as memoryd does it (compaction when due);
- compaction deferred: appends only while the bulk index runs, then one compaction at the end.

The difference is what deferring would save; compare it with the embedding time of the same
N (`bench_recall_latency.py`: ~90–110 memories/s on the development machine).

    .venv/bin/python bench/bench_bulk_index_saves.py [--memories 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memoryd.automem.embeddings import late_interaction, vectors  # noqa: E402
from memoryd.automem.embeddings.semantic import EMBED_CHUNK  # noqa: E402
from memoryd.automem.embeddings.token_store import TokenStore  # noqa: E402
from memoryd.automem.embeddings.vectors import VectorStore  # noqa: E402

DIM = 384


def unit_rows(rng: np.random.Generator, rows: int) -> np.ndarray:
    x = rng.standard_normal((rows, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def bulk_index(folder: Path, memories: int, defer: bool) -> float:
    """Seconds spent in saves while `memories` new memories are stored chunk by chunk."""
    rng = np.random.default_rng(0)
    store = VectorStore(folder, "bench", DIM)
    tokens = TokenStore(folder, "bench", DIM)
    store.load()
    tokens.load()
    share, floor = vectors.COMPACT_SHARE, vectors.COMPACT_MIN_BYTES
    spent = 0.0
    try:
        if defer:  # never due while the bulk index runs
            vectors.COMPACT_SHARE, vectors.COMPACT_MIN_BYTES = float("inf"), 1 << 62
        for start in range(0, memories, EMBED_CHUNK):
            keys = [(f"m{i}.md", f"h{i}") for i in range(start, min(memories, start + EMBED_CHUNK))]
            token_lists = [
                late_interaction.TokenVectors(
                    rng.integers(1000, 30000, 32).astype(np.int32),
                    unit_rows(rng, 32),
                    np.ones(32, dtype=bool),
                )
                for _ in keys
            ]
            tokens.put(keys, token_lists, [1] * len(keys))
            pooled = unit_rows(rng, len(keys))
            began = time.perf_counter()
            tokens.save()
            store.put(keys, pooled)
            store.save()
            spent += time.perf_counter() - began
    finally:
        vectors.COMPACT_SHARE, vectors.COMPACT_MIN_BYTES = share, floor
    if defer:  # the one compaction at the end: folding the logs now costs what was saved
        began = time.perf_counter()
        for opened in (tokens.vectors, tokens.ids, store):
            opened._compact()
        spent += time.perf_counter() - began
    return spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mdb-bulk-", dir="/tmp"))
    times: dict[bool, list[float]] = {False: [], True: []}
    try:
        for round_ in range(args.rounds):
            for defer in (False, True) if round_ % 2 == 0 else (True, False):
                folder = work / f"{round_}-{defer}"
                times[defer].append(bulk_index(folder, args.memories, defer))
                shutil.rmtree(folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    now, deferred = statistics.median(times[False]), statistics.median(times[True])
    print(f"bulk index of {args.memories} memories, chunks of {EMBED_CHUNK}, saves only")
    print(f"compaction when due (memoryd) : {now:6.2f} s  (rounds: {_list(times[False])})")
    print(f"compaction deferred to the end: {deferred:6.2f} s  (rounds: {_list(times[True])})")
    print(f"ratio deferred / when due     : {deferred / now:6.2f}")
    print(f"saved by deferring            : {now - deferred:6.2f} s")
    return 0


def _list(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


if __name__ == "__main__":
    sys.exit(main())
