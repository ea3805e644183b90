"""The bookkeeping cost around one memory extraction, not the model.

    .venv/bin/python bench/bench_extraction.py [--runs 40] [--memories 1000]

A real daemon (subprocess) talks to the scripted fake Messages API (a thread in this process)
that answers every request at once with "nothing to save". For each `after_turn` we measure
the time from sending the call to the fake receiving the extraction's first model request
(both clocks are CLOCK_MONOTONIC), and the daemon's CPU time per extraction (utime + stime
from /proc). Two projects share the daemon, one with no memories and one with `--memories`
memory files, measured alternately in the same run, in both request shapes (standalone, and
reusing the main conversation's system/tools prefix). Goal: < 20 ms to the first request with
1,000 existing memories.

The first `after_turn` of each project is cold (the store parses every memory file) and is
reported apart; so is the usual session start: a third project with `--memories` files gets a
`get_context` first (which loads its store in the background), then its first `after_turn`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from _harness import REPO, cpu_seconds, daemon_process, median, percentile, temp_home

from memoryd.core.project import sanitize_key
from memoryd_client import Client
from tests.fakes.messages_api import FakeMessagesAPI, text_reply


def make_memories(memory_dir: Path, count: int) -> None:
    memory_dir.mkdir(parents=True, exist_ok=True)
    index = []
    for i in range(count):
        name = f"project_fact_{i:04d}.md"
        (memory_dir / name).write_text(
            f"---\nname: Fact {i}\ndescription: a decision about subsystem {i % 37} made in week {i % 52}\n"
            f"type: project\n---\n\nDecision {i}: use approach {i % 7}.\n"
            "**Why:** measured.\n**How to apply:** follow it.\n"
        )
        index.append(f"- [Fact {i}]({name}) — subsystem {i % 37}")
    (memory_dir / "MEMORY.md").write_text("\n".join(index) + "\n")


def transcript(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i in range(turns):
        messages.append({"role": "user", "content": f"Step {i}: please refactor module {i}. " * 20})
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": f"Done with step {i}. " * 60}],
            }
        )
    return messages


MAIN_SYSTEM = [
    {
        "type": "text",
        "text": "You are a coding agent. " * 400,
        "cache_control": {"type": "ephemeral"},
    }
]
MAIN_TOOLS = [
    {
        "name": f"Tool{i}",
        "description": "does a thing " * 30,
        "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}},
    }
    for i in range(15)
]


def wait_idle(conn: Client, deadline_s: float = 10.0) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if conn.call("status")["features"]["extraction"]["running"] == 0:
            return
        time.sleep(0.002)
    raise RuntimeError("extraction did not finish")


def session_start(
    conn: Client, fake: FakeMessagesAPI, cwd: Path, messages: list[dict[str, Any]], total: int
) -> tuple[float, float, float]:
    """`get_context` for a project never seen, until the daemon holds `total` memories, then
    its first `after_turn`: (get_context s, background load s, after_turn to 1st request s)."""
    start = time.monotonic()
    conn.call("get_context", {"cwd": str(cwd)})
    context = time.monotonic() - start
    deadline = start + 60
    while conn.call("status")["features"]["auto_memory"]["memories"] < total:
        if time.monotonic() > deadline:
            raise RuntimeError("the store was not loaded in the background")
        time.sleep(0.005)
    loaded = time.monotonic() - start
    seen = len(fake.requests)
    start = time.monotonic()
    conn.call("after_turn", {"session_id": "bench-warm", "cwd": str(cwd), "messages": messages})
    while len(fake.requests) <= seen:
        time.sleep(0.0005)
    first = fake.requests[seen].received_at - start
    wait_idle(conn)
    return context, loaded, first


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--memories", type=int, default=1000)
    args = parser.parse_args()

    fake = FakeMessagesAPI().start()
    fake.handler = lambda _body: text_reply("NOTHING_TO_SAVE")
    try:
        with temp_home() as env:
            env.update(ANTHROPIC_API_KEY="sk-bench", ANTHROPIC_BASE_URL=fake.base_url)
            root = Path(env["HOME"]) / "work"
            projects = {"0 memories": root / "empty", f"{args.memories} memories": root / "full"}
            for cwd in projects.values():
                cwd.mkdir(parents=True)
            config = Path(env["HOME"]) / ".claude" / "projects"
            full_cwd = projects[f"{args.memories} memories"]
            make_memories(config / sanitize_key(full_cwd.resolve()) / "memory", args.memories)
            warm_cwd = root / "warm"
            warm_cwd.mkdir(parents=True)
            make_memories(config / sanitize_key(warm_cwd.resolve()) / "memory", args.memories)
            with daemon_process(env) as sock, Client(sock, timeout=30) as conn:
                pid = conn.call("status")["pid"]
                messages = transcript(15)
                results: dict[tuple[str, str], list[float]] = {}
                cpu: dict[tuple[str, str], list[float]] = {}
                cold: dict[str, float] = {}
                for shape in ("standalone", "reuse"):
                    extra: dict[str, Any] = (
                        {"system": MAIN_SYSTEM, "tools": MAIN_TOOLS, "model": "claude-main"}
                        if shape == "reuse"
                        else {}
                    )
                    for i in range(args.runs + 1):
                        for label, cwd in projects.items():
                            seen = len(fake.requests)
                            cpu_before = cpu_seconds(pid)
                            start = time.monotonic()
                            conn.call(
                                "after_turn",
                                {
                                    "session_id": f"bench-{shape}",
                                    "cwd": str(cwd),
                                    "messages": messages,
                                    **extra,
                                },
                            )
                            while len(fake.requests) <= seen:
                                time.sleep(0.0005)
                            latency = fake.requests[seen].received_at - start
                            wait_idle(conn)
                            used = cpu_seconds(pid) - cpu_before
                            if i == 0:  # the first call per project builds the manifest cache
                                cold.setdefault(label, latency)
                                continue
                            results.setdefault((shape, label), []).append(latency)
                            cpu.setdefault((shape, label), []).append(used)
                warmed = session_start(conn, fake, warm_cwd, messages, 2 * args.memories)
    finally:
        fake.stop()

    print(f"extraction bookkeeping, {args.runs} runs per cell, fake model answering at once")
    print(f"transcript: {len(messages)} messages; repo {REPO.name}")
    print(
        f"{'shape':<11} {'project':<15} {'to 1st request median':>22} {'p95':>9} {'daemon CPU/extraction':>22}"
    )
    for (shape, label), values in results.items():
        print(
            f"{shape:<11} {label:<15} {median(values) * 1000:>19.2f} ms {percentile(values, 95) * 1000:>6.2f} ms"
            f" {sum(cpu[(shape, label)]) / len(cpu[(shape, label)]) * 1000:>19.2f} ms"
        )
    for label, value in cold.items():
        print(f"first call (cold manifest), {label}: {value * 1000:.2f} ms")
    context_s, loaded_s, first_s = warmed
    print(
        f"first call after get_context, {args.memories} memories: {first_s * 1000:.2f} ms "
        f"(get_context {context_s * 1000:.1f} ms; store loaded in the background "
        f"{loaded_s * 1000:.0f} ms after it)"
    )
    full = f"{args.memories} memories"
    for shape in ("standalone", "reuse"):
        ratio = median(results[(shape, full)]) / median(results[(shape, "0 memories")])
        print(f"{shape}: {full} / 0 memories latency ratio = {ratio:.2f}x")
    worst = max(median(results[(s, full)]) for s in ("standalone", "reuse")) * 1000
    worst_p95 = max(percentile(results[(s, full)], 95) for s in ("standalone", "reuse")) * 1000
    print(
        f"goal < 20 ms to the first request with {full}: {'met' if worst < 20 else 'NOT met'} "
        f"at the median ({worst:.2f} ms), {'met' if worst_p95 < 20 else 'NOT met'} at p95 "
        f"({worst_p95:.2f} ms)"
    )


if __name__ == "__main__":
    main()
