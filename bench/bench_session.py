"""Session memory: `compact` planning and `after_turn` bookkeeping on very long transcripts.

    .venv/bin/python bench/bench_session.py [--sizes 100000,1000000,5000000] [--turns 30] [--no-rpc]

Synthetic transcripts shaped like a coding session (a user request, assistant text with
thinking, tool calls with results of every size, an occasional image, long file reads) are
built at each size. Measured side by side in one run:

- compact, everything except waiting for the model: `SessionMemory.compact` in process
  (per-message estimates, window planning, section cuts, summary read, state write, cache
  drop), cold (the daemon never saw the transcript) and warm (after_turn saw it first);
- the pure planning part alone (`plan_compaction` on cached estimates);
- after_turn bookkeeping per call on the 1M transcript growing by one exchange per call:
  token counting (cached) + usage correction + the thresholds decision, against a full
  re-estimate of the transcript (what it costs without the cache);
- the same calls through a real daemon subprocess (JSON encode, socket, parse, pydantic
  validation, every feature's hook), to show transport against bookkeeping.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from _harness import daemon_process, median, temp_home

from memoryd_client import Client

# fmt: off
WORDS = [
    "the", "function", "returns", "a", "value", "when", "config", "file", "is", "missing",
    "so", "we", "fall", "back", "to", "default", "path", "and", "log", "warning", "before",
    "retrying", "request", "with", "backoff",
]
# fmt: on


def _text(rnd: random.Random, tokens: int) -> str:
    out: list[str] = []
    size = 0
    while size < tokens * 4:
        word = rnd.choice(WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


def transcript(target_tokens: int, seed: int = 7) -> list[dict[str, Any]]:
    from memoryd.llm.tokens import estimate_message

    rnd = random.Random(seed)
    messages: list[dict[str, Any]] = []
    total = 0
    n = 0
    while total < target_tokens:
        batch: list[dict[str, Any]] = [
            {"role": "user", "content": _text(rnd, rnd.randint(20, 300))}
        ]
        for _ in range(rnd.randint(1, 6)):
            n += 1
            tool_id = f"toolu_{n:08d}"
            name = rnd.choice(["Read", "Grep", "Bash", "Edit"])
            batch.append(
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "thinking",
                            "thinking": _text(rnd, rnd.randint(10, 200)),
                            "signature": "sig",
                        },
                        {"type": "text", "text": _text(rnd, rnd.randint(5, 60))},
                        {
                            "type": "tool_use",
                            "id": tool_id,
                            "name": name,
                            "input": {"file_path": f"/repo/src/m{n}.py", "pattern": "def "},
                        },
                    ],
                }
            )
            size = rnd.choice([20, 80, 300, 1_200, 6_000])
            result: list[dict[str, Any]] = [{"type": "text", "text": _text(rnd, size)}]
            if rnd.random() < 0.02:
                result.append(
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": "image/png",
                            "data": "iVBORw0KGgo=",
                        },
                    }
                )
            batch.append(
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": result}],
                }
            )
        batch.append(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": _text(rnd, rnd.randint(30, 400))}],
            }
        )
        messages += batch
        total += sum(estimate_message(m) for m in batch)
    return messages


SUMMARY = (
    """# Session Title
_A short, specific title for this session (5-10 words)._
Migrate the config loader to the new settings sources

# Current State
_What is being worked on right now, what is unfinished, the next steps._
Loader rewritten; tests for precedence still failing on the flag source.

# Worklog
_Terse step-by-step log of what was done, oldest first._
"""
    + "\n".join(f"- step {i}: edited src/m{i}.py and re-ran the tests" for i in range(600))
    + "\n"
)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


async def bench_in_process(sizes: list[int], turns: int) -> None:
    from memoryd.core.model_config import ModelConfig
    from memoryd.core.team_config import TeamConfig
    from memoryd.daemon.app import Daemon
    from memoryd.daemon.config import DaemonConfig
    from memoryd.llm.tokens import TokenCounter, estimate_messages
    from memoryd.session import compaction, thresholds

    cwd = Path(os.environ["HOME"]) / "repo"
    cwd.mkdir(parents=True, exist_ok=True)
    daemon = Daemon(
        DaemonConfig(
            socket_path=cwd / "unused.sock",
            model=ModelConfig(),
            team=TeamConfig(),
            watch_files=False,
        )
    )
    service = daemon.services.session_memory
    project = daemon.services.projects.resolve(cwd)

    print("compact (everything but the model wait), in process")
    print(
        f"{'size':>10} {'messages':>9} {'cold':>12} {'warm':>12} {'plan only':>12} {'kept tok':>9}"
    )
    transcripts: dict[int, list[dict[str, Any]]] = {}
    for size in sizes:
        messages = transcripts[size] = transcript(size)
        cold: list[float] = []
        warm: list[float] = []
        plan: list[float] = []
        for rep in range(5):
            sid = f"bench-{size}-{rep}"
            path = service.summary_path(project, sid)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(SUMMARY)
            start = time.perf_counter()
            await service.compact(project, sid, messages)
            cold.append(time.perf_counter() - start)
            # A session of its own: compact again of `sid`'s transcript answers from the last
            # compaction. after_turn leaves its counts behind, which warm compact's.
            warm_sid = f"{sid}-warm"
            service.summary_path(project, warm_sid).parent.mkdir(parents=True, exist_ok=True)
            service.summary_path(project, warm_sid).write_text(SUMMARY)
            await service.count_tokens(project, warm_sid, messages, None)
            start = time.perf_counter()
            result = await service.compact(project, warm_sid, messages)
            warm.append(time.perf_counter() - start)
            per = service.session(project, sid).counter.per_message(messages)
            start = time.perf_counter()
            compaction.plan_compaction(messages, per, SUMMARY, str(path))
            plan.append(time.perf_counter() - start)
        kept = estimate_messages(result["messages"][2:])
        print(
            f"{size:>10,} {len(messages):>9,} {_ms(median(cold))} {_ms(median(warm))} "
            f"{_ms(median(plan))} {kept:>9,}"
        )

    size = 1_000_000 if 1_000_000 in transcripts else sizes[-1]
    base = transcripts[size]
    extra = transcript(turns * 12_000, seed=99)
    # One exchange (user .. closing assistant) per call, appended to the big transcript.
    cuts = [
        i + 1
        for i, m in enumerate(extra)
        if m["role"] == "assistant"
        and isinstance(m["content"], list)
        and m["content"][-1]["type"] == "text"
    ]
    counter = TokenCounter()
    counter.count(base)
    state = thresholds.ThresholdState(True, 10**9, len(base))  # never due: bookkeeping only
    booked: list[float] = []
    full: list[float] = []
    for cut in cuts[:turns]:
        messages = base + extra[:cut]
        usage = {"input_tokens": estimate_messages(messages) + 2_000, "output_tokens": 50}
        start = time.perf_counter()
        tokens, _ = counter.count(messages, usage)
        thresholds.decide(state, messages, tokens)
        booked.append(time.perf_counter() - start)
        start = time.perf_counter()
        estimate_messages(messages)
        full.append(time.perf_counter() - start)
    # The transport side of one call, for comparison: parsing the request line and
    # validating the params model (both happen before any bookkeeping).
    from memoryd.daemon.methods.turns import AfterTurnParams

    line = json.dumps({"session_id": "s", "cwd": str(cwd), "messages": messages})
    start = time.perf_counter()
    raw = json.loads(line)
    parsed = time.perf_counter() - start
    start = time.perf_counter()
    AfterTurnParams.model_validate(raw)
    validated = time.perf_counter() - start
    print(f"\nafter_turn bookkeeping per call on a {size:,}-token transcript ({len(booked)} calls)")
    print(
        f"  cached count + usage + thresholds  median {_ms(median(booked))}   max {_ms(max(booked))}"
    )
    print(f"  full re-estimate (no cache)        median {_ms(median(full))}")
    print(f"  ratio full / cached                {median(full) / median(booked):8.1f}x")
    print(
        f"  for comparison, per call: json.loads of the request {_ms(parsed)}, params validation {_ms(validated)}"
    )
    await daemon.close_services()


def bench_rpc(sizes: list[int]) -> None:
    from memoryd.core.project import sanitize_key

    with temp_home() as env, daemon_process(env) as sock:
        cwd = Path(env["HOME"]) / "repo"
        cwd.mkdir(parents=True, exist_ok=True)
        print("\nthrough a daemon subprocess (JSON + socket + validation + every hook)")
        print(f"{'size':>10} {'MB':>6} {'after_turn':>12} {'compact':>12}")
        with Client(sock, timeout=300) as client:
            for size in sizes:
                messages = transcript(size)
                mb = len(json.dumps(messages)) / 1e6
                sid = f"rpc-{size}"
                summary = Path(env["HOME"]) / ".claude" / "projects"
                after: list[float] = []
                for i in range(3):
                    grown = [*messages, {"role": "user", "content": f"next {i}"}]
                    start = time.perf_counter()
                    client.call(
                        "after_turn", {"session_id": sid, "cwd": str(cwd), "messages": grown}
                    )
                    after.append(time.perf_counter() - start)
                target = summary / sanitize_key(cwd.resolve()) / sid / "session-memory"
                target.mkdir(parents=True, exist_ok=True)
                (target / "summary.md").write_text(SUMMARY)
                comp: list[float] = []
                for _ in range(3):
                    start = time.perf_counter()
                    result = client.call(
                        "compact", {"session_id": sid, "cwd": str(cwd), "messages": messages}
                    )
                    comp.append(time.perf_counter() - start)
                assert result["used_session_memory"], result.get("reason")
                print(f"{size:>10,} {mb:6.1f} {_ms(median(after))} {_ms(median(comp))}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000,5000000")
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--no-rpc", action="store_true", help="skip the daemon subprocess part")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with temp_home() as env:
        os.environ.update(env)
        for key in [k for k in os.environ if k.startswith(("ANTHROPIC_", "CLAUDE_"))]:
            del os.environ[key]
        asyncio.run(bench_in_process(sizes, args.turns))
    if not args.no_rpc:
        bench_rpc(sizes)
    print(f"\npython {sys.version.split()[0]}, {os.cpu_count()} cpu(s); medians of repeated runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
