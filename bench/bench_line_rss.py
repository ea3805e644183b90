"""What a long request line costs the daemon: its RSS before, at the peak while one `after_turn`
line of N MiB is read and handled, and after (each size in a daemon of its own, `--repeat`
lines in a row to show nothing grows), with the reply time beside it.

    .venv/bin/python bench/bench_line_rss.py [--sizes 7 30 60] [--repeat 3]

The request line cap is 64 MiB (PROTOCOL.md); the Claude Code hook sends at most 6 MiB.
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time
from pathlib import Path

from _harness import daemon_process, rss_mb, temp_home

TURN = "lorem ipsum dolor sit amet " * 40


def request_line(cwd: str, size_mib: int) -> bytes:
    pair = [
        {"role": "user", "content": TURN},
        {"role": "assistant", "content": [{"type": "text", "text": TURN}]},
    ]
    per_pair = len(json.dumps(pair))
    messages = pair * max(1, (size_mib * 1024 * 1024 - 200) // per_pair)
    params = {"cwd": cwd, "session_id": "s1", "messages": messages}
    body = {"jsonrpc": "2.0", "id": 1, "method": "after_turn", "params": params}
    return json.dumps(body).encode() + b"\n"


def daemon_pid(sock: Path) -> int:
    status = json.loads(Path(str(sock) + ".status.json").read_text())
    return int(status["pid"])


def measure(size_mib: int, repeat: int) -> str:
    with temp_home() as env:
        env["MEMORYD_EMBEDDINGS"] = "off"
        project = Path(env["HOME"]) / "proj"
        project.mkdir()
        line = request_line(str(project), size_mib)
        with daemon_process(env) as sock:
            pid = daemon_pid(sock)
            before = rss_mb(pid)
            peak = [before]
            done = threading.Event()

            def sample() -> None:
                while not done.is_set():
                    try:
                        peak[0] = max(peak[0], rss_mb(pid))
                    except (OSError, RuntimeError):
                        return
                    time.sleep(0.005)

            sampler = threading.Thread(target=sample)
            sampler.start()
            afters: list[float] = []
            took: list[float] = []
            with socket.socket(socket.AF_UNIX) as conn:
                conn.connect(str(sock))
                for _ in range(repeat):
                    started = time.monotonic()
                    conn.sendall(line)
                    reply = b""
                    while not reply.endswith(b"\n"):
                        reply += conn.recv(1 << 16)
                    took.append(time.monotonic() - started)
                    assert "result" in json.loads(reply), reply[:200]
                    time.sleep(0.3)
                    afters.append(rss_mb(pid))
            done.set()
            sampler.join()
    trail = " → ".join(f"{a:.0f}" for a in afters)
    return (
        f"{len(line) / 2**20:6.1f} MiB line: RSS {before:.0f} MB, peak {peak[0]:.0f} MB, "
        f"after each: {trail} MB; reply in {min(took):.2f}–{max(took):.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[7, 30, 60])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for size in args.sizes:
        print(measure(size, args.repeat), flush=True)


if __name__ == "__main__":
    main()
