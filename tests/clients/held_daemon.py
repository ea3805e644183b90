"""A process that stands for the daemon's own in `memctl stop` tests.

`stop` signals only a pid that serves the socket (`lifecycle.serving_pid`): on Linux a process
holding the listening socket, as a socket-activated daemon holds the one systemd made. The fake
daemon listens in the test's process, so this child is handed its listening socket and is, to
`stop`, the daemon; the status file next to the socket names it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from memctl import lifecycle
from tests.clients.fake_daemon import FakeDaemon

# What the process does on SIGTERM: the default (it exits), nothing (a hung daemon), or drain
# for a while first, as memoryd finishes its requests.
ON_TERM = {
    "exit": "",
    "ignore": "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n",
    "drain": "signal.signal(signal.SIGTERM, lambda *_: (time.sleep({drain_s}), sys.exit(0)))\n",
}


@contextmanager
def held_daemon(
    fake: FakeDaemon, on_term: str = "exit", drain_s: float = 0.0
) -> Iterator[subprocess.Popen[str]]:
    listening = fake._server.fileno()  # the fake's listening socket, held by the child too
    script = (
        "import signal, sys, time\n"
        + ON_TERM[on_term].format(drain_s=drain_s)
        + "print('ready', flush=True)\ntime.sleep(120)\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, pass_fds=(listening,)
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "ready\n"
        lifecycle.status_file(fake.socket_path).write_text(
            json.dumps({"pid": process.pid, "socket": str(fake.socket_path)})
        )
        yield process
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()
