"""Local recall latency at 100, 1,000 and 10,000 memories, and the cost of one changed file.

Synthetic memories (Zipf-distributed words, one short fact each, some dated) are written to
a memory directory; then, side by side per size:
  - `search`: AutoMemory.ranking in process (freshness check + ranking), warm;
  - `rpc`: the real `recall` method over the Unix socket (adds JSON, reading the 5 files);
  - `update`: one file rewritten atomically, then the next search (re-analysis of that file);
  - `cold`: the first search on a directory never seen (parse + index every file).
Then, at the largest size, in the same run: `bm25s` (BM25 on sparse matrices) over the same
memories and queries; and, with the embeddings extra installed, hybrid recall: embedding every
memory (memories/s, the process's RSS before and after) and the query latency with the query's
embedding included.

    .venv/bin/python bench/bench_recall_latency.py [--sizes 100,1000,10000] [--queries 300]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import rss_mb

REPO = Path(__file__).resolve().parent.parent
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def vocabulary(rng: random.Random, size: int = 6000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 10))))
    return sorted(words)


def zipf_words(rng: random.Random, vocab: list[str], n: int) -> list[str]:
    # rank r drawn with probability ∝ 1/r (via a log-uniform draw), like natural text.
    return [vocab[min(int(len(vocab) ** rng.random()) - 1, len(vocab) - 1)] for _ in range(n)]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bm25s_p95(memdir: Path, queries: list[str]) -> tuple[float, float]:
    """(p50, p95) ms of bm25s retrieving 5 of the directory's memories, tokenising included."""
    import bm25s

    texts = [p.read_text(encoding="utf-8") for p in sorted(memdir.glob("mem_*.md"))]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    times = []
    for q in queries:
        t0 = time.perf_counter()
        retriever.retrieve(
            bm25s.tokenize([q], stopwords="en", show_progress=False), k=5, show_progress=False
        )
        times.append((time.perf_counter() - t0) * 1000)
    return pct(times, 0.5), pct(times, 0.95)


def write_memories(folder: Path, n: int, rng: random.Random, vocab: list[str]) -> None:
    from memoryd.automem.index import index_line
    from memoryd.automem.memfile import render_memory

    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(n):
        name = " ".join(zipf_words(rng, vocab, 4))
        fact = " ".join(zipf_words(rng, vocab, 16))
        body = fact
        if rng.random() < 0.5:
            body += f"\nSession date: {rng.randint(1, 28)} {rng.choice(MONTHS)}, {rng.randint(2022, 2024)}"
        file = f"mem_{i:05d}.md"
        (folder / file).write_text(render_memory("user", name, fact, body), encoding="utf-8")
        lines.append(index_line(name, file, fact))
    (folder / "MEMORY.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


async def measure(sizes: list[int], n_queries: int, work: Path) -> None:
    from memoryd.core.model_config import ModelConfig
    from memoryd.core.project import sanitize_key
    from memoryd.core.team_config import TeamConfig
    from memoryd.daemon.app import Daemon
    from memoryd.daemon.config import DaemonConfig
    from memoryd.daemon.server import Server
    from memoryd_client import AsyncClient

    rng = random.Random(42)
    vocab = vocabulary(rng)
    daemon = Daemon(
        DaemonConfig(
            socket_path=work / "d.sock", model=ModelConfig(), team=TeamConfig(), watch_files=False
        )
    )
    server = Server(daemon)
    await server.start()
    client = await AsyncClient(work / "d.sock").connect()
    am = daemon.services.automem
    config_dir = Path(os.environ["CLAUDE_CONFIG_DIR"])
    print(
        f"{'memories':>8} | {'search p50':>10} {'p95':>7} | {'rpc p50':>8} {'p95':>7} | {'update/file':>11} | {'cold build':>10}"
    )
    try:
        for n in sizes:
            cwd = (work / f"p{n}").resolve()
            cwd.mkdir()
            memdir = config_dir / "projects" / sanitize_key(cwd) / "memory"
            write_memories(memdir, n, rng, vocab)
            project = daemon.services.projects.resolve(cwd)
            queries = [
                " ".join(["what", "did", *zipf_words(rng, vocab, 6)]) + "?"
                for _ in range(n_queries)
            ]
            started = time.perf_counter()
            await am.ranking(project, "warm up", 5, set())
            cold = time.perf_counter() - started
            search_ms = []
            for q in queries:
                t0 = time.perf_counter()
                await am.ranking(project, q, 5, set())
                search_ms.append((time.perf_counter() - t0) * 1000)
            rpc_ms = []
            for q in queries:
                t0 = time.perf_counter()
                await client.call("recall", {"cwd": str(cwd), "query": q})
                rpc_ms.append((time.perf_counter() - t0) * 1000)
            update_ms = []
            state = am.state(am.memory_dir(project))
            for i in range(50):
                path = memdir / f"mem_{rng.randrange(n):05d}.md"
                text = (
                    path.read_text(encoding="utf-8")
                    + f"\nedit {i} {' '.join(zipf_words(rng, vocab, 5))}\n"
                )
                tmp = path.with_suffix(".tmp")
                tmp.write_text(text, encoding="utf-8")
                tmp.replace(path)  # atomic, as every writer does: the dir mtime changes
                before = state.updates
                t0 = time.perf_counter()
                state.refresh()
                elapsed = time.perf_counter() - t0
                assert state.updates == before + 1, "exactly the changed file is re-analysed"
                update_ms.append(elapsed * 1000)
            print(
                f"{n:>8} | {pct(search_ms, 0.5):>8.2f}ms {pct(search_ms, 0.95):>5.2f}ms | "
                f"{pct(rpc_ms, 0.5):>6.2f}ms {pct(rpc_ms, 0.95):>5.2f}ms | {statistics.median(update_ms):>9.2f}ms | {cold * 1000:>8.0f}ms"
            )
        await side_by_side(am, project, memdir, queries, search_ms)
    finally:
        await client.close()
        await server.stop()


async def side_by_side(
    am: Any, project: Any, memdir: Path, queries: list[str], lexical_ms: list[float]
) -> None:
    """bm25s and hybrid recall on the largest directory, beside the lexical figures above."""
    from memoryd.automem.embeddings.semantic import SemanticRecall, extra_installed

    b50, b95 = bm25s_p95(memdir, queries)
    n = len(am.state(am.memory_dir(project)).entries)
    print(f"\nat {n} memories, same queries:")
    print(f"  bm25s               p50 {b50:6.2f} ms  p95 {b95:6.2f} ms")
    print(
        f"  memoryd lexical     p50 {pct(lexical_ms, 0.5):6.2f} ms  p95 {pct(lexical_ms, 0.95):6.2f} ms"
    )
    heavy = [m for m in ("onnxruntime", "tokenizers", "onnx") if m in sys.modules]
    print(f"  RSS, embeddings off: {rss_mb():.0f} MB (model modules imported: {heavy or 'none'})")
    if not extra_installed():
        print("  hybrid: skipped (embeddings extra not installed)")
        return
    os.environ["MEMORYD_EMBEDDINGS"] = "on"
    # Fetch/convert the model in another process first, so the RSS below is the daemon's
    # with a model that is already on disk (as for a user after the first start).
    fetch = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from memoryd.automem.embeddings.models import locate_model as l; l()",
        cwd=REPO,
    )
    await fetch.wait()
    before = rss_mb()
    am.semantic = SemanticRecall()
    am.semantic.start()
    await asyncio.to_thread(am.semantic.wait_idle)
    if not am.semantic.active:
        print(f"  hybrid: skipped ({am.semantic.status()})")
        return
    loaded = rss_mb()
    t0 = time.perf_counter()
    await am.ranking(project, "start embedding", 5, set())
    await asyncio.to_thread(am.semantic.wait_idle)
    took = time.perf_counter() - t0
    print(
        f"  embedding {n} memories: {n / took:.0f} memories/s ({took:.1f} s); "
        f"RSS {before:.0f} MB → {loaded:.0f} MB with the model loaded → {rss_mb():.0f} MB after"
    )
    hybrid_ms = []
    for q in queries:
        t0 = time.perf_counter()
        # As `recall` does: the query is embedded in a thread while its lexical scores are made.
        await am.ranking(project, q, 5, set(), am.semantic.start_query_embedding(q))
        hybrid_ms.append((time.perf_counter() - t0) * 1000)
    print(
        f"  memoryd hybrid      p50 {pct(hybrid_ms, 0.5):6.2f} ms  p95 {pct(hybrid_ms, 0.95):6.2f} ms"
        " (query embedding included)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    work = Path(tempfile.mkdtemp(prefix="mdl-", dir="/tmp"))
    os.environ["HOME"] = str(work / "home")
    os.environ["CLAUDE_CONFIG_DIR"] = str(work / "config")
    os.environ["XDG_STATE_HOME"] = str(work / "state")
    os.environ["MEMORYD_EMBEDDINGS"] = "off"  # lexical first; side_by_side turns it on
    for key in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "MEMORYD_AUTO_MEMORY_DIR",
        "CLAUDE_CODE_DISABLE_AUTO_MEMORY",
    ):
        os.environ.pop(key, None)
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    try:
        asyncio.run(measure([int(s) for s in args.sizes.split(",")], args.queries, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
