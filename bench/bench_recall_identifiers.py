"""Recall of memories that name code identifiers, asked in other words or another style.

A coding agent's memories name identifiers (`refreshSessionToken()`, `JSONDecodeError`,
`load_settings`, `MAX_RETRIES`) and products written in mixed case (GitHub, PostgreSQL);
prompts name them in plain words ("how do we refresh the session token?"), in another style
(`refresh_session_token`, "SessionToken") or as written. The ranker reads snake_case, kebab-case
and dotted names by their parts (the marks part words) and a camelCase or PascalCase word whole.

The sets (`identifier_sets.py`) were written by a helper session that had not read the ranker:
36 memories of one project, 48 prompts each about one of them (16 in plain words, 16 naming
the identifier in another style, 16 as written), and 30 prompts about none that share a part
of an identifier or product name ("git rebase onto main" beside GitHub Actions, "Java's
garbage collector" beside JavaScript). Each prompt is ranked by the lexical ranker alone, then
by the hybrid as the daemon runs it (all-MiniLM-L6-v2, late interaction, relevance floors),
when the embeddings extra is installed.

Session 14 measured, with this bench, camelCase and PascalCase words read by their parts as
well as whole (`sessionToken` → sessiontoken, session, token; GitHub → github, git, hub), in
memories and queries: found 48 of 48 both ways (lexical; 47 of 48 hybrid), hit@1 47 both
ways, while prompts about none recalled 111 memories instead of 101 (lexical; hybrid 37
instead of 35: "git rebase" now matched GitHub). The memories' own words name what their
identifiers do, so the parts added only noise; it was left out (LoCoMo's development split:
0.814 against 0.811).

    .venv/bin/python bench/bench_recall_identifiers.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from _harness import process_home  # also puts the repository on sys.path
from bench_recall_precision import rank
from identifier_sets import ABOUT_NONE, ABOUT_ONE, MEMORIES

if TYPE_CHECKING:
    from memoryd.automem.embeddings.semantic import SemanticRecall

# ABOUT_ONE comes in three runs of 16, as its comments say
STYLES = ("in words", "restyled", "as written")


def main() -> int:
    with process_home("mdb-identifiers-") as work:
        from memoryd.automem.recall.ranker import RankerParams, RecallIndex

        keys = [f"memory_{i:02}.md" for i in range(len(MEMORIES))]
        memory_dir = work / "memory"
        semantic = hybrid_side(memory_dir, keys)
        index = RecallIndex(RankerParams())
        for key, memory in zip(keys, MEMORIES, strict=True):
            index.upsert(key, memory["name"], memory["description"], memory["body"])
        style_of = [STYLES[i * len(STYLES) // len(ABOUT_ONE)] for i in range(len(ABOUT_ONE))]
        print(
            f"{'':<8} {'about one: found':>16} {'first':>9}"
            + "".join(f" {s:>12}" for s in STYLES)
            + f" {'recalled each':>13} {'about none: recalled':>20} {'none recalled':>13}"
        )
        for label, hybrid in [("lexical", False), ("hybrid", True)]:
            if hybrid and semantic is None:
                continue

            def recalled(prompt: str, hybrid: bool = hybrid) -> list[str]:
                return rank(index, semantic, memory_dir, prompt, hybrid)  # type: ignore[arg-type]

            got = [recalled(p) for p, _ in ABOUT_ONE]
            found = [keys[m] in r for (_, m), r in zip(ABOUT_ONE, got, strict=True)]
            first = sum(r[:1] == [keys[m]] for (_, m), r in zip(ABOUT_ONE, got, strict=True))
            by_style = [
                sum(f for f, s in zip(found, style_of, strict=True) if s == style)
                for style in STYLES
            ]
            none = [recalled(p) for p in ABOUT_NONE]
            print(
                f"{label:<8} {sum(found):>9} of {len(ABOUT_ONE):<3} {first:>2} of {len(ABOUT_ONE):<3}"
                + "".join(
                    f" {f:>6} of {style_of.count(s):<2}"
                    for f, s in zip(by_style, STYLES, strict=True)
                )
                + f" {sum(map(len, got)) / len(got):>13.2f}"
                f" {sum(map(len, none)):>11} of {5 * len(ABOUT_NONE):<5}"
                f" {sum(not r for r in none):>6} of {len(ABOUT_NONE):<3}"
            )
        if semantic is not None:
            semantic.close()
    return 0


def hybrid_side(memory_dir: Path, keys: list[str]) -> SemanticRecall | None:
    """The model's side, every memory embedded by its description as the daemon does; None
    without the embeddings extra (the lexical row is still printed)."""
    from memoryd.automem.embeddings.semantic import SemanticRecall

    semantic = SemanticRecall()
    if not semantic.wanted:
        print(f"hybrid left out: {semantic.status()}")
        return None
    texts = {k: m["description"] for k, m in zip(keys, MEMORIES, strict=True)}
    semantic.sync(memory_dir, 1, texts)
    semantic.wait_idle()
    if not semantic.active:
        print(f"hybrid left out: {semantic.status()}")
        return None
    return semantic


if __name__ == "__main__":
    sys.exit(main())
