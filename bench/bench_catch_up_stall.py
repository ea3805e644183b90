"""How long other clients wait while a daemon reads 10,000 memory files that appeared at once.

    .venv/bin/python bench/bench_catch_up_stall.py [--files 10000] [--rounds 3]

A daemon (embeddings off) serves a project whose memory folder it has loaded (20 memories);
then `--files` new memory files and their MEMORY.md are moved in (a team pull, a copy by hand)
and a `recall` in the project sets off the catch-up (`DirStates._catch_up`: the files read in
slices on the event loop, `DirState.load_pending_steps`) and waits for it. Meanwhile a probe
client on its own connection sends `status` every 10 ms; its worst and 99th-percentile round
trips are what the catch-up cost the other clients ("quiet": its worst in the 3 s before, the
machine's own noise). The daemon's collector settings, side by side in each round
(`--settings`, through a `sitecustomize` on its PYTHONPATH): "as is"; "freeze", `gc.collect()`
and `gc.freeze()` once the first recall is answered; "threshold", generation 0's threshold
raised to `--threshold`; "both"; "off", `gc.disable()`. The daemon's full (generation 2)
collections during the catch-up are counted and timed, to tell the collector's share from the
slices': "worst outside GC" leaves out the probes whose round trip overlapped a full
collection; "RSS MB" is the daemon's after the catch-up. Since session 22 the daemon freezes
its start-up heap itself (`Daemon.on_start`), so "as is" includes that freeze.
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

from _harness import daemon_process, percentile, rss_mb, temp_home
from bench_recall_latency import vocabulary, write_memories

from memoryd_client import Client

# On the daemon's PYTHONPATH: turns the collector off, and logs each full collection's
# duration (monotonic start, seconds) to a file the bench reads after the daemon stopped.
_SITECUSTOMIZE = """
import atexit, gc, json, os, threading, time
if os.environ.get("BENCH_GC_OFF"):
    gc.disable()
if os.environ.get("BENCH_GC_THRESHOLD"):
    gc.set_threshold(int(os.environ["BENCH_GC_THRESHOLD"]), 10, 10)
_flag = os.environ.get("BENCH_GC_FREEZE")
if _flag:
    # Freezes once the bench says start-up and the first load are done (it creates the file).
    def _freeze_when_told():
        while not os.path.exists(_flag):
            time.sleep(0.05)
        gc.collect()
        gc.freeze()
    threading.Thread(target=_freeze_when_told, daemon=True).start()
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


# The collector settings compared, side by side in each round: as is, frozen after start-up
# and the first load, gen0's threshold raised, both, and off.
SETTINGS = ("as is", "freeze", "threshold", "both", "off")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threshold", type=int, default=50_000, help="gen0's, for 'threshold'")
    parser.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated")
    args = parser.parse_args()
    settings = [name.strip() for name in args.settings.split(",")]
    print(f"{args.files} new memory files; `status` round trips of a probe client, ms")
    print(
        f"{'gc':<10} {'quiet':>6} {'worst':>8} {'p99':>8} {'outside GC':>11} {'probes':>7} "
        f"{'catch-up s':>11} {'full GCs':>9} {'longest GC':>11} {'RSS MB':>7}"
    )
    for _ in range(args.rounds):
        for setting in settings:
            row = one_run(args.files, setting=setting, threshold=args.threshold)
            print(
                f"{setting:<10} {row['quiet']:6.1f} {row['worst']:8.1f} "
                f"{row['p99']:8.1f} {row['outside_gc']:11.1f} {row['probes']:7.0f} "
                f"{row['catch_up']:11.2f} {row['fulls']:9.0f} {row['longest_gc']:11.1f} "
                f"{row['rss']:7.1f}",
                flush=True,
            )
    return 0


def one_run(files: int, *, setting: str, threshold: int) -> dict[str, float]:
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
        if setting not in SETTINGS:
            raise SystemExit(f"unknown setting {setting!r}: one of {', '.join(SETTINGS)}")
        freeze_flag = work / "freeze-now"
        if setting == "off":
            env["BENCH_GC_OFF"] = "1"
        if setting in ("threshold", "both"):
            env["BENCH_GC_THRESHOLD"] = str(threshold)
        if setting in ("freeze", "both"):
            env["BENCH_GC_FREEZE"] = str(freeze_flag)
        asked = {"cwd": str(project), "query": "which deploy window did we agree on?"}
        probes: list[tuple[float, float]] = []  # (monotonic start, round trip)
        with daemon_process(env) as sock, Client(sock, timeout=600) as conn:
            conn.call("recall", asked)  # the folder loaded, as a warm daemon has it
            freeze_flag.touch()  # start-up and the first load done ("freeze", "both")
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
            rss = rss_mb(conn.call("status")["pid"])
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
        "rss": rss,
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
