"""Recall quality on LoCoMo, as defined in ../shared/eval/README.md.

One memory directory per conversation, one memory file per observation (`name: <speaker> —
<session key> #<n>`, `description: <fact>`, `type: user`, body: the fact and `Session date:`),
each with its MEMORY.md line. Every QA item of category 1–4 whose evidence matches a memory
is a query (the question alone), sent through the real `recall` method of a real daemon on a
Unix socket, with no model configured (so the local selector). hit@5: at least one evidence
memory among the 5 returned. The BM25 baseline (rank_bm25 over the observation text alone)
is computed in the same run.

Every question there has an answer in memory, so hit@5 never counts a memory recalled for a
prompt about nothing in it. After each conversation's questions, the same daemon is sent
`ABOUT_NONE`, 80 coding-agent prompts about nothing in these conversations ("fix the
failing unit test in the parser module"), and the bench prints how many memories they
recall: each is context an agent's prompt would spend on noise. Then the 40 replies of
`bench_recall_precision.py` that name no topic ("keep going", "looks good"), likewise.

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

from reply_sets import REPLIES

DEV = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")
EVAL = ("conv-44", "conv-47", "conv-48", "conv-49", "conv-50")
REPO = Path(__file__).resolve().parent.parent
# LoCoMo's category numbers (category 5, adversarial, is left out).
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
# Prompts about nothing in any conversation: the first 40 were written with the relevance
# floors' first values, the last 40 later, to check a change chosen on the first 40.
ABOUT_NONE = (
    "fix the failing unit test in the parser module",
    "rename the variable config_path to settings_path everywhere",
    "why does the build fail on CI?",
    "add type hints to the utils module",
    "run the linter and fix the warnings",
    "update the README installation section",
    "what does this regular expression match?",
    "optimize the SQL query in the reports endpoint",
    "bump the dependency versions in pyproject.toml",
    "write a docstring for the parse_args function",
    "the docker image is too large, can you slim it down?",
    "set up a GitHub Actions workflow for releases",
    "refactor the HTTP client to use async",
    "there is a memory leak in the worker process",
    "migrate the database schema to add an index on user_id",
    "explain the difference between a mutex and a semaphore",
    "convert this callback code to promises",
    "the tests are flaky on Windows",
    "add logging to the payment service",
    "how do I squash my last three commits?",
    "implement pagination for the list endpoint",
    "the frontend build takes five minutes",
    "profile the slow startup of the CLI",
    "make the config loader accept YAML",
    "what is the time complexity of this function?",
    "delete the unused imports",
    "the API returns 500 when the body is empty",
    "add a retry with exponential backoff",
    "write integration tests for the auth flow",
    "generate a changelog from the git history",
    "zzzqqq",
    "asdf qwerty",
    "the quarterly tax report is due",
    "configure nginx as a reverse proxy",
    "translate this error message into Spanish",
    "kubernetes pod keeps restarting",
    "compile the project with optimizations",
    "what port does the dev server use?",
    "set the locale to UTF-8",
    "vendor the protobuf definitions",
    "add a unit test for the date parser",
    "why is the response time so high on the search page?",
    "bump the Node version in the Dockerfile",
    "split this function into smaller helpers",
    "the login form does not validate email addresses",
    "make the table sortable by column",
    "remove the deprecated API calls",
    "write a migration that renames the orders table",
    "add caching to the product lookup",
    "the cron job did not run last night",
    "fix the typo in the error message",
    "what does the --force flag do here?",
    "set up pre-commit hooks",
    "replace print statements with proper logging",
    "why does mypy complain about this line?",
    "add an index to speed up this query",
    "the build output is missing the static assets",
    "upgrade the ORM to the latest major version",
    "write a README section about configuration",
    "the app crashes when the network is offline",
    "add a health check endpoint",
    "serialize this object to JSON",
    "rewrite this loop with a list comprehension",
    "the container runs out of memory",
    "add rate limiting to the public API",
    "where is the entry point of this program?",
    "stream the file instead of reading it all",
    "the progress bar freezes at 99%",
    "add a command line flag for verbose output",
    "handle the timeout error gracefully",
    "make the colors accessible for color-blind users",
    "sort the imports",
    "this regex is too slow on long inputs",
    "check the license of our dependencies",
    "reduce the bundle size",
    "add a websocket reconnect",
    "what encoding does this file use?",
    "mock the HTTP server in this test",
    "generate API docs from the docstrings",
    "the date shows in the wrong timezone",
)


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


@dataclass(frozen=True)
class Result:
    """One conversation's figures: questions hit, questions, (hit, questions) per category,
    and the number of memories each `ABOUT_NONE` prompt and each reply recalled."""

    hit: int
    queries: int
    per_category: dict[int, list[int]]
    about_none: list[int]
    replies: list[int]


async def run_recall(
    convs: dict[str, tuple[list[Memory], list[Query]]], names: tuple[str, ...], work: Path
) -> dict[str, Result]:
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
            about_none = []
            for prompt in ABOUT_NONE:
                reply = await client.call(
                    "recall", {"cwd": str(project), "query": prompt, "limit": 5}
                )
                about_none.append(len(reply["memories"]))
            replies = []
            for prompt in REPLIES:
                reply = await client.call(
                    "recall", {"cwd": str(project), "query": prompt, "limit": 5}
                )
                replies.append(len(reply["memories"]))
            results[name] = Result(n_hit, len(queries), dict(per_cat), about_none, replies)
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
            total = sum(r.queries for r in got.values())
            ours = sum(r.hit for r in got.values())
            cats: dict[int, list[int]] = defaultdict(lambda: [0, 0])
            for r in got.values():
                for c, (h, t) in r.per_category.items():
                    cats[c][0] += h
                    cats[c][1] += t
            print(
                f"{split:<6} {total:>7} {base / total:>7.3f} {ours / total:>8.3f} {ours / base:>6.2f} {total / elapsed:>7.0f}"
            )
            low, high = conversation_interval([(r.hit, r.queries) for r in got.values()])
            print(
                "       by conversation: "
                + ", ".join(
                    f"{n.removeprefix('conv-')} {r.hit / r.queries:.3f}" for n, r in got.items()
                )
                + f"; 95% interval over conversations {low:.3f}–{high:.3f}"
            )
            print(
                "       by category: "
                + ", ".join(
                    f"{CATEGORIES[c]} {h / t:.3f} ({t})" for c, (h, t) in sorted(cats.items())
                )
            )
            none = [n for r in got.values() for n in r.about_none]
            first = [n for r in got.values() for n in r.about_none[:40]]
            print(
                f"       prompts about none ({len(ABOUT_NONE)} a conversation):"
                f" {sum(none) / len(none):.2f} memories recalled each"
                f" (first 40: {sum(first) / len(first):.2f}, last 40:"
                f" {(sum(none) - sum(first)) / (len(none) - len(first)):.2f}),"
                f" none for {sum(not n for n in none)} of {len(none)}"
            )
            replies = [n for r in got.values() for n in r.replies]
            print(
                f"       replies that name no topic ({len(REPLIES)} a conversation):"
                f" {sum(replies) / len(replies):.2f} memories recalled each,"
                f" none for {sum(not n for n in replies)} of {len(replies)}"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
