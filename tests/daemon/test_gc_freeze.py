"""The `memoryd` process moves its start-up heap out of the garbage collector's reach
(`gc.freeze()` once its services started), so each full collection, which runs on the event
loop, walks only what came after (bench/bench_catch_up_stall.py has the figures). An
in-process daemon, as the tests start, freezes nothing: the test runner's heap is not its own."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

from tests.clients.conftest import REPO
from tests.conftest import DaemonHandle

# A fresh interpreter runs `memoryd`'s main with `serve` standing in: the daemon built and
# started as `serve` does, the number of frozen objects printed, then stopped.
SCRIPT = r"""
import asyncio, gc, sys
import memoryd.daemon.server as server
from memoryd.daemon.app import Daemon

async def serve(config):
    daemon = Daemon(config)
    await daemon.on_start()
    print(gc.get_freeze_count(), flush=True)
    await daemon.close_services()
    return 0

server.serve = serve
from memoryd.daemon.main import main
sys.exit(main(["--socket", sys.argv[1], "--no-watch"]))
"""


def test_the_daemon_process_freezes_its_start_up_heap(short_tmp: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(short_tmp / "d.sock")],
        cwd=REPO,
        env={**os.environ, "MEMORYD_EMBEDDINGS": "off"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # Start-up leaves ~44,000 tracked objects; the interpreter's own before `import memoryd`
    # are ~8,000.
    assert int(done.stdout.split()[-1]) > 20_000, done.stdout


def test_an_in_process_daemon_freezes_nothing(daemon: DaemonHandle) -> None:
    assert gc.get_freeze_count() == 0
