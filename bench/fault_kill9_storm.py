"""Fault script: a write storm against the real daemon, killed with SIGKILL, N rounds.

Each round starts `memoryd` (a subprocess, one temp HOME for all rounds), has several
clients write and rewrite memories as fast as they can, kills the daemon with SIGKILL at a
random moment, and checks what is on disk:

- lost: a write the daemon acknowledged whose file is gone, or holds an older text than the
  acknowledged one (a later, unacknowledged text of the same memory is fine);
- torn: a memory file that is not a whole memory (no closing frontmatter, no final newline,
  not valid UTF-8);
- orphans left unindexed: after the next start (and its first look at the memory dir), memory
  files with no line in `MEMORY.md`.

    .venv/bin/python bench/fault_kill9_storm.py [--rounds 20] [--writers 4] [--seed 1]

Prints one line per round and a summary; exits 1 when anything was lost, torn or left
unindexed. `tests/test_fault_kill9_storm.py` runs it with 2 rounds.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent)]

from _harness import start_daemon, temp_home  # noqa: E402

from memoryd_client import Client, DaemonUnavailable, RpcError  # noqa: E402

INDEX = "MEMORY.md"


@dataclass
class Ledger:
    """What each memory name was sent as, in order, and how far the daemon acknowledged."""

    sent: dict[str, list[str]] = field(default_factory=dict)  # name -> bodies, in order
    acked: dict[str, tuple[str, int]] = field(default_factory=dict)  # name -> (path, index)
    acked_writes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def writer(sock: Path, cwd: Path, ledger: Ledger, tag: str, stop: threading.Event) -> None:
    """Write new memories and rewrite earlier ones until the daemon dies."""
    rng = random.Random(tag)
    names: list[str] = []
    try:
        with Client(sock, timeout=10) as conn:
            for i in range(100_000):
                if stop.is_set():
                    return
                rewrite = names and rng.random() < 0.3
                name = rng.choice(names) if rewrite else f"storm {tag} {i}"
                body = f"marker {tag}-{i}: " + " ".join(
                    f"w{rng.randrange(10**6)}" for _ in range(40)
                )
                with ledger.lock:
                    ledger.sent.setdefault(name, []).append(body)
                    index = len(ledger.sent[name]) - 1
                result = conn.call(
                    "memory.write",
                    {
                        "cwd": str(cwd),
                        "type": "project",
                        "name": name,
                        "description": f"storm memory {name}",
                        "body": body,
                    },
                )
                with ledger.lock:
                    ledger.acked[name] = (result["path"], index)
                    ledger.acked_writes += 1
                if not rewrite:
                    names.append(name)
    except (DaemonUnavailable, RpcError, OSError, ConnectionError, ValueError):
        return  # the daemon was killed mid-call: that write is not acknowledged


def body_of(text: str) -> str:
    return text.split("\n---\n", 1)[1].strip() if "\n---\n" in text else ""


def memory_files(memory_dir: Path) -> list[Path]:
    return [p for p in memory_dir.rglob("*.md") if p.name != INDEX and not p.name.startswith(".")]


def is_torn(path: Path) -> bool:
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return not (text.startswith("---\n") and "\n---\n" in text and text.endswith("\n"))


def lost_writes(ledger: Ledger) -> int:
    lost = 0
    with ledger.lock:
        for name, (path, index) in ledger.acked.items():
            try:
                on_disk = body_of(Path(path).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                lost += 1
                continue
            if on_disk not in ledger.sent[name][index:]:
                lost += 1
    return lost


def orphans_after_start(sock: Path, cwd: Path) -> tuple[Path, int, int]:
    """Let the fresh daemon look at the memory dir: (the dir, orphans `memory.list` showed on
    the first look, files still without an index line once the daemon had its look)."""
    found = -1
    with Client(sock, timeout=30) as conn:
        deadline = time.monotonic() + 10
        while True:
            listed = conn.call("memory.list", {"cwd": str(cwd)})
            orphans = listed["index"].get("orphans", [])
            found = len(orphans) if found < 0 else found
            if not orphans or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    memory_dir = Path(listed["memory_dir"])
    index = (
        (memory_dir / INDEX).read_text(encoding="utf-8") if (memory_dir / INDEX).exists() else ""
    )
    listed_files = {
        line.split("](", 1)[1].split(")", 1)[0] for line in index.splitlines() if "](" in line
    }
    left = sum(
        1
        for p in memory_files(memory_dir)
        if p.relative_to(memory_dir).as_posix() not in listed_files
    )
    return memory_dir, found, left


def run(rounds: int, writers: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    totals = dict.fromkeys(
        ("acknowledged", "lost", "torn", "orphans", "orphans_found", "temp_files"), 0
    )
    with temp_home() as env:
        cwd = Path(env["HOME"]) / "project"
        cwd.mkdir()
        ledger = Ledger()
        sock = Path(env["MEMORYD_SOCKET"])
        for round_no in range(1, rounds + 2):
            proc = start_daemon(env)
            memory_dir, found, orphans = orphans_after_start(sock, cwd)
            totals["orphans"] += orphans
            totals["orphans_found"] += found
            if round_no > rounds:  # the last start only checks the previous round's orphans
                print(f"final start: orphans found {found}, left unindexed {orphans}")
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
                break
            stop = threading.Event()
            threads = [
                threading.Thread(target=writer, args=(sock, cwd, ledger, f"r{round_no}w{w}", stop))
                for w in range(writers)
            ]
            acked_before = ledger.acked_writes
            for thread in threads:
                thread.start()
            time.sleep(rng.uniform(0.5, 1.5))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)
            stop.set()
            for thread in threads:
                thread.join(30)
            files = memory_files(memory_dir)
            torn = sum(1 for p in files if is_torn(p))
            lost = lost_writes(ledger)
            temp = sum(1 for p in memory_dir.rglob(".*.tmp"))
            totals["torn"] += torn
            totals["lost"] = lost  # cumulative by nature: every acknowledged write so far
            totals["temp_files"] = temp
            print(
                f"round {round_no:2}: acknowledged writes {ledger.acked_writes - acked_before:4}, "
                f"files {len(files):5}, lost {lost}, torn {torn}, "
                f"orphans at this start {found} -> unindexed {orphans}, temp files {temp}"
            )
        totals["acknowledged"] = ledger.acked_writes
    return totals


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    totals = run(args.rounds, args.writers, args.seed)
    print(
        f"{args.rounds} rounds, {totals['acknowledged']} writes acknowledged: "
        f"acknowledged writes lost {totals['lost']}, torn files {totals['torn']}, "
        f"orphans left unindexed after restart {totals['orphans']} "
        f"(orphans found and indexed at start: {totals['orphans_found']})"
    )
    return 1 if totals["lost"] or totals["torn"] or totals["orphans"] else 0


if __name__ == "__main__":
    sys.exit(main())
