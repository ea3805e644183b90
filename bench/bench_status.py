"""Protocol overhead: `status` round trips through the real daemon versus a bare NDJSON echo
server over a Unix socket (the ceiling for Python), and `memctl status` versus `python3 -c pass`.

    .venv/bin/python bench/bench_status.py [--seconds 3]

Both servers run as subprocesses on this machine in the same run, measured alternately, so
the ratio holds on a noisy shared machine. Goals: ≥ 0.5 of the ceiling; memctl ≤ 2×.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import REPO, daemon_process, median, temp_home

ECHO_SERVER = r"""
import asyncio, sys, uvloop
async def handle(reader, writer):
    while line := await reader.readline():
        writer.write(line)
async def main():
    server = await asyncio.start_unix_server(handle, sys.argv[1])
    print("ready", flush=True)
    await server.serve_forever()
uvloop.run(main())
"""


def round_trips(sock_path: Path, seconds: float) -> float:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(sock_path))
    reader = sock.makefile("rb")
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "status"}).encode() + b"\n"
    count = 0
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < deadline:
        for _ in range(100):
            sock.sendall(line)
            reader.readline()
        count += 100
    elapsed = time.perf_counter() - start
    sock.close()
    return count / elapsed


def wall_times(argv: list[str], runs: int, env: dict[str, str]) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
        )
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with (
        temp_home() as env,
        daemon_process(env) as daemon_sock,
        tempfile.TemporaryDirectory() as tmp,
    ):
        echo_sock = Path(tmp) / "echo.sock"
        echo = subprocess.Popen(
            [sys.executable, "-c", ECHO_SERVER, str(echo_sock)], stdout=subprocess.PIPE, text=True
        )
        assert echo.stdout is not None
        echo.stdout.readline()
        try:
            ceiling, daemon = [], []
            for _ in range(args.rounds):  # alternate so drift hits both
                ceiling.append(round_trips(echo_sock, args.seconds))
                daemon.append(round_trips(daemon_sock, args.seconds))
        finally:
            echo.terminate()
            echo.wait()
        # Each round measures both back to back; the ratio of a round is what noise spares.
        ratios = sorted(d / c for c, d in zip(ceiling, daemon, strict=True))
        print(f"echo ceiling        : {median(ceiling):10.0f} round trips/s (median of rounds)")
        print(f"daemon `status`     : {median(daemon):10.0f} round trips/s (median of rounds)")
        print("ratio per round     : " + " ".join(f"{r:.2f}" for r in ratios))
        print(f"ratio daemon/ceiling: {median(ratios):10.2f}   (median; goal >= 0.5)")

        memctl = [
            str(Path(sys.executable).parent / "memctl"),
            "--socket",
            str(daemon_sock),
            "status",
        ]
        bare = [sys.executable, "-c", "pass"]
        py, ctl = [], []
        for _ in range(5):
            py += wall_times(bare, 4, env)
            ctl += wall_times(memctl, 4, env)
        print(f"python3 -c pass     : {median(py) * 1000:8.1f} ms (median of {len(py)})")
        print(f"memctl status       : {median(ctl) * 1000:8.1f} ms (median of {len(ctl)})")
        print(f"ratio memctl/python : {median(ctl) / median(py):8.2f}   (goal <= 2)")
        _ = REPO


if __name__ == "__main__":
    main()
