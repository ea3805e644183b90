"""A session's first prompt, with embeddings on: does its recall use the model?

With socket activation and an idle timeout, the daemon often starts with a session: the
SessionStart hook's `get_context` is its first request, and the first prompt's `recall`
comes seconds later. This bench runs, for each of `bench_recall_precision.py`'s 20 prompts
about one memory, in a temp HOME whose memories already have their vectors on disk (as a
daily user's do):

- a fresh daemon, `get_context` (the session starts), `status` polled until recall is
  hybrid, then the prompt's `recall`: the time from `get_context` to hybrid, and whether
  the memory is found;
- a fresh daemon and the prompt's `recall` with no `get_context` before it: what every
  session's first prompt got before `get_context` loaded the model (it loaded on the first
  recall, which was then ranked lexically).

    .venv/bin/python bench/bench_first_prompt.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from _harness import daemon_process, median, percentile, temp_home
from bench_recall_precision import ABOUT_ONE, MEMORIES

from memoryd_client import Client


def ranker(conn: Client) -> str:
    return str(conn.call("status")["features"]["auto_memory"]["ranker"])


def until_hybrid(conn: Client, timeout_s: float = 60.0) -> float:
    """Seconds until `status` says hybrid with every memory embedded."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        now = ranker(conn)
        if now.startswith("hybrid") and "; indexing:" not in now:
            return time.perf_counter() - started
        time.sleep(0.02)
    raise RuntimeError(f"recall never became hybrid: {ranker(conn)}")


def found(conn: Client, project: Path, prompt: str, memory: int, files: list[str]) -> bool:
    reply = conn.call("recall", {"cwd": str(project), "query": prompt, "limit": 5})
    return files[memory] in [Path(m["path"]).name for m in reply["memories"]]


def main() -> int:
    with temp_home() as env:
        env["MEMORYD_EMBEDDINGS"] = "on"
        project = Path(env["HOME"]) / "project"
        (project / ".git").mkdir(parents=True)
        with daemon_process(env) as sock, Client(sock, timeout=120) as conn:
            if not ranker(conn).startswith("lexical: embedding model not loaded yet"):
                print(f"skipped: {ranker(conn)}")
                return 0
            files = [
                Path(
                    conn.call(
                        "memory.write",
                        {
                            "cwd": str(project),
                            "type": "project",
                            "name": f"memory {i}",
                            "description": text,
                            "body": text,
                        },
                    )["path"]
                ).name
                for i, text in enumerate(MEMORIES)
            ]
            conn.call("get_context", {"cwd": str(project)})
            until_hybrid(conn)  # the model converted once and every vector on disk
        ready: list[float] = []
        after = before = 0
        for prompt, memory in ABOUT_ONE:
            with daemon_process(env) as sock, Client(sock, timeout=120) as conn:
                conn.call("get_context", {"cwd": str(project), "session_id": "s"})
                ready.append(until_hybrid(conn))
                after += found(conn, project, prompt, memory, files)
            with daemon_process(env) as sock, Client(sock, timeout=120) as conn:
                before += found(conn, project, prompt, memory, files)
        print(
            f"{len(ABOUT_ONE)} first prompts, each in a fresh daemon, memories with vectors on disk"
        )
        print(
            f"get_context -> hybrid: median {median(ready):.2f} s,"
            f" p95 {percentile(ready, 95):.2f} s, max {max(ready):.2f} s"
        )
        print(f"{'first prompt':<44} {'found':>9}")
        print(f"{'after get_context, once hybrid (now)':<44} {after:>3} of {len(ABOUT_ONE)}")
        print(f"{'with the model not loaded (before)':<44} {before:>3} of {len(ABOUT_ONE)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
