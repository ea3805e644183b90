"""`memctl recall "query" [--limit N] [--local] [--why] [--cwd DIR]`: what memoryd recalls for
a query.

The same `recall` an agent's prompt gets (the model picks when one is configured, else the
local ranker; `--local` asks for the local ranker alone), printed one memory a block: type,
title, description, file, and the staleness note when there is one. `--why` adds what the
local ranker saw in each: the query's words it holds, the words of a paste apart, its lexical
score as a share of the best, and with embeddings the model's score and cosine. `memctl
status` says which local ranker is active and why.
"""

from __future__ import annotations

import argparse
from typing import Any

from memctl.output import EXIT_USAGE, client, emit, fail, one_line
from memctl.project_dir import add_cwd_argument, project_cwd
from memctl.text_input import required_text

SELECTORS = {"model": "chosen by the model", "local": "ranked locally"}


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "recall", help="show the memories memoryd recalls for a query, as an agent gets them"
    )
    parser.add_argument("query", help="what to recall ('-' reads standard input)")
    parser.add_argument(
        "--limit",
        type=int,
        choices=range(1, 6),
        default=5,
        metavar="{1..5}",
        help="at most this many memories (default 5)",
    )
    parser.add_argument(
        "--local", action="store_true", help="the local ranker, even when a model is configured"
    )
    parser.add_argument(
        "--why",
        action="store_true",
        help="say what the local ranker saw in each memory: words matched, scores",
    )
    add_cwd_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    query, problem = required_text(args.query, "the query", "recall")
    if problem:
        return fail(args, problem, EXIT_USAGE)
    params: dict[str, Any] = {
        "cwd": project_cwd(args),
        "query": query,
        "limit": args.limit,
    }
    if args.local:
        params["selector"] = "local"
    if args.why:
        params["explain"] = True
    with client(args, timeout=60.0) as conn:
        result = conn.call("recall", params)
    emit(args, result, render(result))
    return 0


def render(result: dict[str, Any]) -> str:
    memories = result.get("memories") or []
    how = SELECTORS.get(result.get("selector", ""), result.get("selector", ""))
    if not memories:
        why = result.get("not_ranked")
        return f"no memory recalled: {why}" if why else f"no memory recalled ({how})"
    lines = [f"{len(memories)} {'memory' if len(memories) == 1 else 'memories'} ({how}):"]
    for number, memory in enumerate(memories, 1):
        team = " team" if memory.get("team") else ""
        # Names, descriptions and paths come from files anyone with the folder (a teammate, a
        # cloned repository) may have written: each stays on its line, so none poses as
        # another recalled memory.
        kind = memory.get("type") or "?"  # a file whose frontmatter has no valid type
        lines.append(f"{number}. [{kind}{team}] {one_line(str(memory['name']))}")
        if memory.get("description") and memory["description"] != memory["name"]:
            lines.append(f"   {one_line(str(memory['description']))}")
        lines.append(f"   {one_line(str(memory['path']))}")
        if memory.get("note"):
            lines.append(f"   note: {one_line(str(memory['note']))}")
        if isinstance(memory.get("why"), dict):
            lines.append(f"   why: {why_line(memory['why'])}")
    return "\n".join(lines)


def why_line(why: dict[str, Any]) -> str:
    """`words deploy, canary · near grandma · pasted decoder · feedback rollout · date
    2023-08-20 (dated as asked) · lexical 1.00 · semantic 0.71 · cosine 0.42`; a date read
    off the file's last write says so: `date 2026-12-03 (file time, dated as asked)`"""
    parts = [f"words {', '.join(why.get('words') or []) or 'none'}"]
    for field, label in (
        ("near_words", "near"),
        ("pasted_words", "pasted"),
        ("feedback_terms", "feedback"),
    ):
        if why.get(field):
            parts.append(f"{label} {', '.join(why[field])}")
    if why.get("date"):
        notes = ["file time"] if why.get("date_from") == "file" else []
        notes += why.get("date_signals") or []
        parts.append(f"date {why['date']}" + (f" ({', '.join(notes)})" if notes else ""))
    parts += [
        f"{name} {why[name]:.2f}" for name in ("lexical", "semantic", "cosine") if name in why
    ]
    return " · ".join(parts)
