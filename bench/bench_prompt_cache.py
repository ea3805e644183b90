"""What the background agents' runs pay for their prompts under the API's prompt-cache rules.

    .venv/bin/python bench/bench_prompt_cache.py

A real daemon (subprocess, temp HOME) runs its agents against the scripted fake Messages API,
which bills every request by the API's cache rules (`tests/agent/prompt_cache_rules.py`:
breakpoints, the 20-block lookback, 1,024 tokens at least, at most four breakpoints) and
answers with that `usage`. Each scenario is one run with a scripted model:

- extraction, standalone prompt: Read a 60 KB source file, Grep, Write a memory, Write
  MEMORY.md, done (5 turns);
- extraction reusing the main conversation's prefix (its system prompt with a breakpoint, 15
  tools, 30 messages): the same turns;
- MagicDocs: Read the 24 KB doc, Edit it, Edit it again, done (4 turns);
- extraction that Reads the 60 KB file, then makes 24 Read calls in one reply, then Write,
  done (4 turns): the 48 blocks of that turn are past the API's 20-block lookback.

Per scenario: the tokens of each kind over the run and their cost in uncached-input tokens
(write 1.25, read 0.1, the API's prices relative to input). `status.model.usage` is checked to
be the sum of what the replies said.

Measured (the cost depends on the bytes sent, not on the machine), in uncached-input tokens
per run:

    scenario            before (caller's mark only)   after (own marks: 2)   own marks: 1
    extraction          75,856                        36,727                 36,727
    extraction reuse    86,222                        44,572                 44,572
    magicdocs           40,710                        29,261                 29,261
    24 reads at once    90,464                        55,555                 73,848

Before, every turn after a Read paid the Read again as uncached input. With one own mark that
moves on (none left on the turn before), the turn of 24 calls puts the previous entry 48
blocks back, out of the lookback, and the whole run so far is written to the cache again.
The price: the last request's new part is written (1.25) and never read, as the run ends.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from _harness import daemon_process, temp_home

from memoryd.core.project import sanitize_key
from memoryd.magicdocs import WORKER
from memoryd_client import Client
from tests.agent.prompt_cache_rules import PromptCache
from tests.fakes.messages_api import FakeMessagesAPI, Reply, message

KINDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
PRICE = {"input_tokens": 1.0, "cache_creation_input_tokens": 1.25, "cache_read_input_tokens": 0.1}
MAIN_SYSTEM = [
    {
        "type": "text",
        "text": "You are a coding agent. " * 400,
        "cache_control": {"type": "ephemeral"},
    }
]
MAIN_TOOLS = [
    {
        "name": name,
        "description": f"{name} does a thing. " * 30,
        "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}},
    }
    for name in ("Read", "Grep", "Glob", "Bash", "Edit", "MultiEdit", "Write", *map(str, range(8)))
]
MEMORY = "---\nname: Deploys\ndescription: deploy days\ntype: project\n---\n\nFridays only.\n**Why:** ops.\n**How to apply:** plan.\n"


def conversation(turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(turns):
        out.append(
            {
                "role": "user",
                "content": f"Step {i}: we deploy on Fridays only; refactor module {i}. " * 12,
            }
        )
        out.append(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": f"Done with step {i}. " * 40}],
            }
        )
    return out


def call(name: str, tool_input: dict[str, Any], n: int) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_bench_{n}", "name": name, "input": tool_input}


class Billing:
    """The fake's handler: each agent run's scripted turns, each reply billed by the rules."""

    def __init__(self) -> None:
        self.cache = PromptCache()
        self.lock = threading.Lock()
        self.turns: list[list[dict[str, Any]]] = []
        self.billed: list[dict[str, int]] = []
        self.calls = 0

    def __call__(self, body: Any) -> Reply:
        with self.lock:
            usage = self.cache.usage(body)
            if "living document" not in json.dumps(body.get("system", "")) and self.magic:
                # The extraction the same turn schedules: it finds nothing, and is not counted.
                return message([{"type": "text", "text": "NOTHING_TO_SAVE"}], **usage)
            self.billed.append(usage)
            step = self.turns.pop(0) if self.turns else [{"type": "text", "text": "done"}]
            self.calls += 1
            kind = "tool_use" if any(b["type"] == "tool_use" for b in step) else "end_turn"
            return message(step, stop_reason=kind, **usage)

    magic = False


def run(fake: FakeMessagesAPI, scenario: str) -> tuple[dict[str, int], dict[str, int], int]:
    billing = Billing()
    billing.magic = scenario == "magicdocs"
    fake.handler = billing
    with temp_home() as env:
        env.update(ANTHROPIC_API_KEY="sk-bench", ANTHROPIC_BASE_URL=fake.base_url)
        cwd = Path(env["HOME"]) / "work" / "proj"
        cwd.mkdir(parents=True)
        memory = Path(env["HOME"]) / ".claude" / "projects" / sanitize_key(cwd.resolve()) / "memory"
        source = cwd / "service.py"
        source.write_text(
            "".join(
                f"def handler_{i}(request):\n    return route(request, {i})\n" for i in range(1300)
            )
        )
        messages = conversation(15)
        extra: dict[str, Any] = {}
        n = iter(range(1, 1000))
        if scenario in ("extraction", "extraction reuse"):
            billing.turns = [
                [call("Read", {"file_path": str(source)}, next(n))],
                [call("Grep", {"pattern": "handler_12", "path": str(cwd)}, next(n))],
                [
                    call(
                        "Write",
                        {"file_path": str(memory / "project_deploys.md"), "content": MEMORY},
                        next(n),
                    )
                ],
                [
                    call(
                        "Write",
                        {
                            "file_path": str(memory / "MEMORY.md"),
                            "content": "- [Deploys](project_deploys.md) — Fridays\n",
                        },
                        next(n),
                    )
                ],
            ]
            if scenario == "extraction reuse":
                extra = {"system": MAIN_SYSTEM, "tools": MAIN_TOOLS, "model": "claude-main"}
        elif scenario == "24 reads at once":
            files = []
            for i in range(24):
                path = cwd / f"module_{i}.py"
                path.write_text(
                    f"# module {i}\n" + "".join(f"x_{j} = {i * j}\n" for j in range(120))
                )
                files.append(path)
            billing.turns = [
                [call("Read", {"file_path": str(source)}, next(n))],
                [call("Read", {"file_path": str(p)}, next(n)) for p in files],
                [
                    call(
                        "Write",
                        {"file_path": str(memory / "project_deploys.md"), "content": MEMORY},
                        next(n),
                    )
                ],
            ]
        else:
            doc = cwd / "deploy.md"
            doc.write_text(
                "# MAGIC DOC: Deployment notes\n_Keep the environments listed._\n\n"
                + "".join(f"- env {i}: `make deploy-{i}` on Fridays\n" for i in range(600))
            )
            billing.turns = [
                [call("Read", {"file_path": str(doc)}, next(n))],
                [
                    call(
                        "Edit",
                        {"file_path": str(doc), "old_string": "env 1:", "new_string": "env one:"},
                        next(n),
                    )
                ],
                [
                    call(
                        "Edit",
                        {"file_path": str(doc), "old_string": "env 2:", "new_string": "env two:"},
                        next(n),
                    )
                ],
            ]
            extra = {"read_paths": [str(doc)]}
        turns = len(billing.turns) + 1
        with daemon_process(env) as sock, Client(sock, timeout=30) as conn:
            conn.call(
                "after_turn",
                {"session_id": "bench", "cwd": str(cwd), "messages": messages, **extra},
            )
            deadline = time.monotonic() + 60
            while billing.calls < turns and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(0.3)
            feature = WORKER if scenario == "magicdocs" else "extraction"
            status = conn.call("status")["model"]["usage"].get(feature, {})
    billed = {k: sum(u[k] for u in billing.billed) for k in KINDS}
    return billed, {k: status.get(k, 0) for k in KINDS}, billing.calls


def main() -> None:
    fake = FakeMessagesAPI().start()
    try:
        print(
            f"{'scenario':<18} {'turns':>5} {'input':>8} {'cache write':>12} {'cache read':>11} {'cost':>9}"
        )
        for scenario in ("extraction", "extraction reuse", "magicdocs", "24 reads at once"):
            billed, status, calls = run(fake, scenario)
            cost = sum(PRICE[k] * billed[k] for k in KINDS)
            print(
                f"{scenario:<18} {calls:>5} {billed['input_tokens']:>8,} "
                f"{billed['cache_creation_input_tokens']:>12,} {billed['cache_read_input_tokens']:>11,} {cost:>9,.0f}"
            )
            if status != billed:
                raise SystemExit(
                    f"status.model.usage {status} is not what the replies said {billed}"
                )
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
