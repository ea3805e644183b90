"""How long other clients wait while a daemon reads 10,000 memory files that appeared at once.

    .venv/bin/python bench/bench_catch_up_stall.py [--files 10000] [--rounds 3]

A daemon (embeddings off) serves a project whose memory folder it has loaded (20 memories);
then `--files` new memory files and their MEMORY.md are moved in (a team pull, a copy by hand)
and a `recall` in the project sets off the catch-up (`DirStates._catch_up`: the files read in
slices on the event loop, `DirState.load_pending_steps`) and waits for it. Meanwhile a probe
client on its own connection sends `status` every 10 ms; its worst and 99th-percentile round
trips are what the catch-up cost the other clients ("quiet": its worst in the 3 s before, the
machine's own noise). The daemon runs with CPython's garbage collector as is, then off (a
`sitecustomize` calls `gc.disable()`), and the daemon's full (generation 2) collections during
the catch-up are counted and timed, to tell the collector's share from the slices': "worst
outside GC" leaves out the probes whose round trip overlapped a full collection.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import threading
import time
from pathlib import Path

from _harness import daemon_process, percentile, temp_home
from bench_recall_latency import vocabulary, write_memories

from memoryd_client import Client

# On the daemon's PYTHONPATH: turns the collector off, and logs each full collection's
# duration (monotonic start, seconds) to a file the bench reads after the daemon stopped.
_SITECUSTOMIZE = """
import atexit, gc, json, os, time
if os.environ.get("BENCH_GC_OFF"):
    gc.disable()
_log = os.environ.get("BENCH_GC_LOG")
if _log:
    _fulls, _at = [], [0.0]
    def _timed(phase, info):
        if info["generation"] == 2:
            if phase == "start":
                _at[0] = time.monotonic()
            else:
                _fulls.append((_at[0], time.monotonic() - _at[0]))
    gc.callbacks.append(_timed)
    atexit.register(lambda: open(_log, "w").write(json.dumps(_fulls)))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{args.files} new memory files; `status` round trips of a probe client, ms")
    print(
        f"{'gc':<4} {'quiet':>6} {'worst':>8} {'p99':>8} {'outside GC':>11} {'probes':>7} "
        f"{'catch-up s':>11} {'full GCs':>9} {'longest GC':>11}"
    )
    for _ in range(args.rounds):
        for gc_off in (False, True):
            row = one_run(args.files, gc_off=gc_off)
            print(
                f"{'off' if gc_off else 'on':<4} {row['quiet']:6.1f} {row['worst']:8.1f} "
                f"{row['p99']:8.1f} {row['outside_gc']:11.1f} {row['probes']:7.0f} "
                f"{row['catch_up']:11.2f} {row['fulls']:9.0f} {row['longest_gc']:11.1f}",
                flush=True,
            )
    return 0


def one_run(files: int, *, gc_off: bool) -> dict[str, float]:
    from memoryd.core.project import sanitize_key

    with temp_home() as env, tempfile.TemporaryDirectory(prefix="mdbench-site-") as site:
        work = Path(env["HOME"]).parent
        project = work / "project"
        project.mkdir()
        memory_dir = Path(env["HOME"]) / ".claude" / "projects"
        memory_dir = memory_dir / sanitize_key(project.resolve()) / "memory"
        vocab = vocabulary(random.Random(7))
        write_memories(memory_dir, 20, random.Random(1), vocab)
        staging = work / "staging"
        write_memories(staging, files + 20, random.Random(2), vocab)
        (Path(site) / "sitecustomize.py").write_text(_SITECUSTOMIZE)
        gc_log = work / "gc.json"
        env["MEMORYD_EMBEDDINGS"] = "off"
        env["PYTHONPATH"] = site  # the daemon's memoryd: this checkout's (cwd)
        env["BENCH_GC_LOG"] = str(gc_log)
        if gc_off:
            env["BENCH_GC_OFF"] = "1"
        asked = {"cwd": str(project), "query": "which deploy window did we agree on?"}
        probes: list[tuple[float, float]] = []  # (monotonic start, round trip)
        with daemon_process(env) as sock, Client(sock, timeout=600) as conn:
            conn.call("recall", asked)  # the folder loaded, as a warm daemon has it
            time.sleep(2.5)  # past the periodic sweep's interval: this is the only reader
            for path in sorted(staging.iterdir()):
                if path.name == "MEMORY.md" or int(path.stem.split("_")[1]) >= 20:
                    os.replace(path, memory_dir / path.name)
            stop = threading.Event()
            probe = threading.Thread(target=probe_status, args=(sock, stop, probes))
            probe.start()
            time.sleep(3)  # the probe's round trips on a quiet daemon, for scale
            started = time.monotonic()
            conn.call("recall", asked)
            catch_up = time.monotonic() - started
            stop.set()
            probe.join()
        collections = json.loads(gc_log.read_text()) if gc_log.exists() else []
    fulls = [d for at, d in collections if started <= at <= started + catch_up]
    quiet = [wait for at, wait in probes if at < started]
    loading = [(at, wait) for at, wait in probes if at >= started]
    outside = [
        wait
        for at, wait in loading
        if not any(gc_at < at + wait and at < gc_at + d for gc_at, d in collections)
    ]
    waits = [wait for _, wait in loading]
    return {
        "quiet": max(quiet) * 1e3,
        "worst": max(waits) * 1e3,
        "outside_gc": max(outside, default=0.0) * 1e3,
        "p99": percentile(waits, 99) * 1e3,
        "probes": len(waits),
        "catch_up": catch_up,
        "fulls": len(fulls),
        "longest_gc": max(fulls, default=0.0) * 1e3,
    }


def probe_status(sock: Path, stop: threading.Event, probes: list[tuple[float, float]]) -> None:
    with Client(sock, timeout=60) as conn:
        while not stop.is_set():
            started = time.monotonic()
            conn.call("status")
            probes.append((started, time.monotonic() - started))
            time.sleep(0.01)


if __name__ == "__main__":
    raise SystemExit(main())
