"""How long one large request line holds every other client of a real daemon, old code against
new: another client's `status` round trips are timed while the line arrives and is handled.

    .venv/bin/python bench/bench_line_stall.py [--old REV] [--mib 50] [--rounds 3]

`bench_line_parse.py` times `parse_line` alone; this one times what a client sees, on a real
socket: the reading loop joining the line's chunks, the parse, the dispatch and the reply, all
on the event loop unless moved off it. Each kind of line (a plain string, 10^6 short paths,
one holding half a surrogate pair) is sent `--rounds` times to a daemon of each checkout (the
old one a `git worktree` of `--old`; both up at once, taking turns); the figure is the longest
`status` round trip seen while it was in flight, the median of the rounds, beside the idle
round trip.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import threading
import time
from pathlib import Path

from _harness import daemon_process, old_worktree, temp_home

# The commit before the reading loop stopped copying a long line twice (`bytes(partial) + …`).
DEFAULT_OLD = "3a0ff15"

HEAD = b'{"jsonrpc":"2.0","id":1,"method":"status","params":{"a":'
STATUS = b'{"jsonrpc":"2.0","id":2,"method":"status"}\n'


def lines(mib: int) -> dict[str, bytes]:
    size = mib * 2**20
    paths = b",".join(b'"src/d%04d/f%d.py"' % (i // 100, i) for i in range(10**6))
    return {
        "plain string": HEAD + b'"' + b"x" * size + b'"}}\n',
        "10^6 paths": HEAD + b"[" + paths + b"]}}\n",
        "half a surrogate pair": HEAD + b'"\\ud83d' + b"x" * size + b'"}}\n',
    }


def round_trip(conn: socket.socket, reader: socket.SocketIO) -> float:
    start = time.perf_counter()
    conn.sendall(STATUS)
    reader.readline()  # type: ignore[attr-defined]
    return time.perf_counter() - start


def stall(sock: Path, line: bytes) -> tuple[float, float]:
    """(the longest `status` round trip while `line` was sent and answered, the idle median)."""
    with socket.socket(socket.AF_UNIX) as poller, socket.socket(socket.AF_UNIX) as sender:
        poller.connect(str(sock))
        sender.connect(str(sock))
        reader = poller.makefile("rb")
        idle = statistics.median(round_trip(poller, reader) for _ in range(50))  # type: ignore[arg-type]
        done = threading.Event()
        worst = [0.0]

        def poll() -> None:
            while not done.is_set():
                worst[0] = max(worst[0], round_trip(poller, reader))  # type: ignore[arg-type]

        thread = threading.Thread(target=poll)
        thread.start()
        sender.sendall(line)
        sender.makefile("rb").readline()
        time.sleep(0.05)  # what the daemon frees after the reply counts too
        done.set()
        thread.join()
        return worst[0], idle


def measure(old_tree: Path, mib: int, rounds: int) -> dict[str, dict[str, list[float]]]:
    """Per kind of line, the worst round trips and the idle ones of each checkout's daemon,
    both up at once and taking turns, so a busy machine weighs on both alike."""
    found: dict[str, dict[str, list[float]]] = {}
    with (
        temp_home() as old_env,
        temp_home() as new_env,
        daemon_process(old_env, tree=old_tree) as old_sock,
        daemon_process(new_env) as new_sock,
    ):
        for name, line in lines(mib).items():
            runs: dict[str, list[float]] = {"old": [], "new": [], "idle": []}
            for _ in range(rounds):
                for which, sock in (("old", old_sock), ("new", new_sock)):
                    worst, idle = stall(sock, line)
                    runs[which].append(worst)
                    runs["idle"].append(idle)
            found[name] = runs
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default=DEFAULT_OLD)
    parser.add_argument("--mib", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with old_worktree(args.old) as old_tree:
        found = measure(old_tree, args.mib, args.rounds)
    print(f"longest `status` round trip while a ~{args.mib} MiB line is handled, ms")
    print(f"(median of {args.rounds} rounds, old and new taking turns; old = {args.old})")
    print(f"{'line':<24} {'idle':>6} {'old':>8} {'new':>8}")
    for name, runs in found.items():
        idle, old, new = (statistics.median(runs[k]) * 1000 for k in ("idle", "old", "new"))
        print(f"{name:<24} {idle:>6.2f} {old:>8.1f} {new:>8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
