"""Recall quality on LoCoMo, as defined in ../shared/eval/README.md.

One memory directory per conversation, one memory file per observation (`name: <speaker> —
<session key> #<n>`, `description: <fact>`, `type: user`, body: the fact and `Session date:`),
each with its MEMORY.md line. Every QA item of category 1–4 whose evidence matches a memory
is a query (the question alone), sent through the real `recall` method of a real daemon on a
Unix socket, with no model configured (so the local selector). hit@5: at least one evidence
memory among the 5 returned. The BM25 baseline (rank_bm25 over the observation text alone)
is computed in the same run.

    .venv/bin/python bench/bench_recall_locomo.py [--split dev|eval|both] [--ranker lexical|hybrid]

`--ranker hybrid` (the default when the embeddings extra is installed) adds the sentence
embedding model (docs/auto-memory.md, "Hybrid recall"); `lexical` turns it off.

Data: $MEMORYD_EVAL_DIR or ../shared/eval (never copied into the repository).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

DEV = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")
EVAL = ("conv-44", "conv-47", "conv-48", "conv-49", "conv-50")
REPO = Path(__file__).resolve().parent.parent
# LoCoMo's category numbers (category 5, adversarial, is left out).
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


@dataclass(frozen=True)
class Memory:
    file: str
    name: str
    fact: str
    body: str
    dia_id: str


@dataclass(frozen=True)
class Query:
    question: str
    evidence: frozenset[str]
    category: int


def eval_dir() -> Path:
    configured = os.environ.get("MEMORYD_EVAL_DIR")
    return Path(configured) if configured else REPO.parent / "shared" / "eval"


def load(path: Path) -> dict[str, tuple[list[Memory], list[Query]]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    out = {}
    for conv in data:
        memories: list[Memory] = []
        observations = conv["observation"]
        conversation = conv["conversation"]
        for obs_key in sorted(observations, key=lambda k: int(re.findall(r"\d+", k)[0])):
            session = obs_key.removesuffix("_observation")
            date = conversation.get(f"{session}_date_time", "")
            n = 0
            for speaker, facts in observations[obs_key].items():
                for fact, dia_id in facts:
                    n += 1
                    dia = dia_id if isinstance(dia_id, str) else ",".join(dia_id)
                    memories.append(
                        Memory(
                            file=f"obs_{len(memories):05d}.md",
                            name=f"{speaker} — {session} #{n}",
                            fact=fact,
                            body=f"{fact}\nSession date: {date}",
                            dia_id=dia,
                        )
                    )
        ids = {d for m in memories for d in m.dia_id.split(",")}
        queries = [
            Query(q["question"], frozenset(q.get("evidence", [])), int(q["category"]))
            for q in conv["qa"]
            if int(q["category"]) in (1, 2, 3, 4) and set(q.get("evidence", [])) & ids
        ]
        out[conv["sample_id"]] = (memories, queries)
    return out


def hits(returned_ids: list[set[str]], evidence: frozenset[str]) -> bool:
    return any(ids & evidence for ids in returned_ids)


def conversation_interval(
    per_conversation: list[tuple[int, int]], rounds: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """95% interval of hit@5 over the conversations (a cluster bootstrap: draw as many
    conversations with replacement, pool their hits and queries). Questions of one
    conversation share its memories, so they are not independent draws: this interval,
    not a binomial one over the questions, says how far another five conversations could
    move the figure."""
    draw = random.Random(seed)
    rates = []
    for _ in range(rounds):
        sample = draw.choices(per_conversation, k=len(per_conversation))
        rates.append(sum(h for h, _ in sample) / sum(t for _, t in sample))
    rates.sort()
    return rates[int(0.025 * rounds)], rates[int(0.975 * rounds) - 1]


def bm25_baseline(memories: list[Memory], queries: list[Query]) -> int:
    from rank_bm25 import BM25Okapi

    def tok(text: str) -> list[str]:
        return re.findall(r"\w+", text.lower())

    bm25 = BM25Okapi([tok(m.fact) for m in memories])
    n = 0
    for q in queries:
        scores = bm25.get_scores(tok(q.question))
        top = sorted(range(len(memories)), key=lambda i: -scores[i])[:5]
        n += hits([set(memories[i].dia_id.split(",")) for i in top], q.evidence)
    return n


def write_memory_dir(folder: Path, memories: list[Memory]) -> None:
    from memoryd.automem.index import index_line
    from memoryd.automem.memfile import render_memory

    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for m in memories:
        (folder / m.file).write_text(
            render_memory("user", m.name, m.fact, m.body), encoding="utf-8"
        )
        lines.append(index_line(m.name, m.file, m.fact))
    (folder / "MEMORY.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


async def run_recall(
    convs: dict[str, tuple[list[Memory], list[Query]]], names: tuple[str, ...], work: Path
) -> dict[str, tuple[int, int, dict[int, list[int]]]]:
    from memoryd.core.model_config import ModelConfig
    from memoryd.core.project import sanitize_key
    from memoryd.core.team_config import TeamConfig
    from memoryd.daemon.app import Daemon
    from memoryd.daemon.config import DaemonConfig
    from memoryd.daemon.server import Server
    from memoryd_client import AsyncClient

    config_dir = Path(os.environ["CLAUDE_CONFIG_DIR"])
    daemon = Daemon(
        DaemonConfig(
            socket_path=work / "d.sock", model=ModelConfig(), team=TeamConfig(), watch_files=False
        )
    )

    am = daemon.services.automem
    server = Server(daemon)
    await server.start()
    client = await AsyncClient(work / "d.sock").connect()
    results = {}
    try:
        for name in names:
            memories, queries = convs[name]
            project = (work / "projects" / name).resolve()
            project.mkdir(parents=True)
            write_memory_dir(config_dir / "projects" / sanitize_key(project) / "memory", memories)
            by_file = {m.file: set(m.dia_id.split(",")) for m in memories}
            if am.semantic.wanted:  # let every memory get its vector before measuring
                await client.call("recall", {"cwd": str(project), "query": "warm up", "limit": 1})
                await asyncio.to_thread(am.semantic.wait_idle)
            n_hit = 0
            per_cat: dict[int, list[int]] = defaultdict(lambda: [0, 0])
            for q in queries:
                reply = await client.call(
                    "recall", {"cwd": str(project), "query": q.question, "limit": 5}
                )
                assert reply["selector"] == "local", reply["selector"]
                got = [by_file.get(Path(m["path"]).name, set()) for m in reply["memories"]]
                ok = hits(got, q.evidence)
                n_hit += ok
                per_cat[q.category][0] += ok
                per_cat[q.category][1] += 1
            results[name] = (n_hit, len(queries), dict(per_cat))
    finally:
        await client.close()
        await server.stop()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=("dev", "eval", "both"), default="both")
    parser.add_argument("--ranker", choices=("lexical", "hybrid"), default="hybrid")
    args = parser.parse_args()
    data_file = eval_dir() / "locomo10.json"
    if not data_file.is_file():
        print(
            f"skipped: {data_file} not found (set MEMORYD_EVAL_DIR to the folder holding locomo10.json)"
        )
        return 0
    sys.path.insert(0, str(REPO))
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    convs = load(data_file)
    splits = {"dev": DEV, "eval": EVAL}
    chosen = ("dev", "eval") if args.split == "both" else (args.split,)
    work = Path(tempfile.mkdtemp(prefix="mdb-", dir="/tmp"))
    os.environ["HOME"] = str(work / "home")
    os.environ["CLAUDE_CONFIG_DIR"] = str(work / "config")
    os.environ["XDG_STATE_HOME"] = str(work / "state")
    os.environ["MEMORYD_EMBEDDINGS"] = "on" if args.ranker == "hybrid" else "off"
    for key in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "MEMORYD_AUTO_MEMORY_DIR",
        "CLAUDE_CODE_DISABLE_AUTO_MEMORY",
    ):
        os.environ.pop(key, None)
    try:
        print(f"LoCoMo recall hit@5 ({data_file})")
        from memoryd.automem.embeddings.semantic import SemanticRecall

        probe = SemanticRecall()
        if probe.wanted:
            probe.start()
            probe.wait_idle()
        print(f"ranker: {probe.status()}")
        print(f"{'split':<6} {'queries':>7} {'BM25':>7} {'memoryd':>8} {'ratio':>6} {'q/s':>7}")
        for split in chosen:
            names = splits[split]
            base = sum(bm25_baseline(*convs[n]) for n in names)
            started = time.perf_counter()
            got = asyncio.run(run_recall(convs, names, work / split))
            elapsed = time.perf_counter() - started
            total = sum(t for _, t, _ in got.values())
            ours = sum(h for h, _, _ in got.values())
            cats: dict[int, list[int]] = defaultdict(lambda: [0, 0])
            for _, _, per in got.values():
                for c, (h, t) in per.items():
                    cats[c][0] += h
                    cats[c][1] += t
            print(
                f"{split:<6} {total:>7} {base / total:>7.3f} {ours / total:>8.3f} {ours / base:>6.2f} {total / elapsed:>7.0f}"
            )
            low, high = conversation_interval([(h, t) for h, t, _ in got.values()])
            print(
                "       by conversation: "
                + ", ".join(
                    f"{n.removeprefix('conv-')} {h / t:.3f}" for n, (h, t, _) in got.items()
                )
                + f"; 95% interval over conversations {low:.3f}–{high:.3f}"
            )
            print(
                "       by category: "
                + ", ".join(
                    f"{CATEGORIES[c]} {h / t:.3f} ({t})" for c, (h, t) in sorted(cats.items())
                )
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
