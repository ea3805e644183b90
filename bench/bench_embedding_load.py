"""How long the embedding model's loading holds the event loop: the longest wait for the
interpreter lock of a thread that stands for the loop, while another loads the model.

For each checkout (`--root`, this one by default; a `git worktree` of an older commit to
compare), in a process of its own with a fresh state folder, each step of the embedding
thread's start runs in a worker thread while the main thread sleeps 1 ms at a time:
  - `locate`: the first start's conversion to ONNX (the packaged all-MiniLM-L6-v2);
  - `import onnxruntime`, `SentenceEncoder()`: every start's;
then `locate` again (converted already). Needs the embeddings extra and the model package.

    .venv/bin/python bench/bench_embedding_load.py [--root DIR ...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _harness import REPO

_CHILD = """
import threading, time

def longest_wait(step):
    stop, worst, out = threading.Event(), [0.0], {}
    def loop():
        while not stop.is_set():
            start = time.perf_counter()
            time.sleep(0.001)
            worst[0] = max(worst[0], time.perf_counter() - start - 0.001)
    ticker = threading.Thread(target=loop)
    worker = threading.Thread(target=lambda: out.setdefault("r", step()))
    ticker.start()
    started = time.perf_counter()
    worker.start()
    worker.join()
    took = time.perf_counter() - started
    stop.set()
    ticker.join()
    return out.get("r"), took, worst[0]

def show(name, step):
    result, took, worst = longest_wait(step)
    print(f"  {name:28} {took * 1e3:7.0f} ms, the loop's longest wait {worst * 1e3:6.1f} ms")
    return result

from memoryd.automem.embeddings import models
longest_wait(lambda: time.sleep(0.2))
files = show("locate (first: converts)", lambda: models.locate_model(None))
show("import onnxruntime", lambda: __import__("onnxruntime"))
from memoryd.automem.embeddings.encoder import SentenceEncoder
show("SentenceEncoder()", lambda: SentenceEncoder(files))
show("locate (converted)", lambda: models.locate_model(None))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, action="append", help="a checkout (repeatable)")
    args = parser.parse_args()
    for root in [r.resolve() for r in args.root or [REPO]]:
        state = Path(tempfile.mkdtemp(prefix="bench-embedding-load-"))
        try:
            env = {
                **os.environ,
                "PYTHONPATH": str(root),
                "XDG_STATE_HOME": str(state / "state"),
                "HOME": str(state / "home"),
                "HF_HOME": str(state / "hf"),
                "HF_HUB_OFFLINE": "1",
                "MEMORYD_EMBEDDINGS": "on",
            }
            env.pop("MEMORYD_EMBEDDING_MODEL", None)
            print(root)
            sys.stdout.flush()
            subprocess.run([sys.executable, "-c", _CHILD], check=True, cwd=root, env=env)
        finally:
            shutil.rmtree(state, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
