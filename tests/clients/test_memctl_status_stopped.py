"""`memctl status` of a daemon held by a tracer (state `t`) says so and names the tracer: it
knew state `T` only (a signal's stop, tests/clients/test_memctl_stop.py), and `kill -CONT`
does not end a tracing stop."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.clients.conftest import memctl_env, run_memctl
from tests.clients.test_memctl_stop import _real_daemon

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="/proc tells a process's state"
)

# PTRACE_ATTACH stops the tracee in a tracing stop (state `t`) and holds it until detached.
_TRACER = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
pid = int(sys.argv[1])
if libc.ptrace(16, pid, None, None) != 0:  # PTRACE_ATTACH
    print("refused", ctypes.get_errno(), flush=True)
    sys.exit(1)
os.waitpid(pid, 0)
print("ready", flush=True)
time.sleep(60)
"""


def test_a_daemon_held_by_a_tracer_names_the_tracer(short_tmp: Path) -> None:
    sock = short_tmp / "run" / "m.sock"
    with _real_daemon(sock) as pid:
        tracer = subprocess.Popen(
            [sys.executable, "-c", _TRACER, str(pid)], stdout=subprocess.PIPE, text=True
        )
        with tracer:
            try:
                assert tracer.stdout is not None
                line = tracer.stdout.readline()
                if line != "ready\n":
                    pytest.skip(f"ptrace is not allowed here ({line.strip()})")
                done = run_memctl(  # the default wait for an answer is 5 s
                    "--socket", str(sock), "status", env=memctl_env(MEMORYD_ANSWER_TIMEOUT="0.5")
                )
            finally:
                tracer.kill()  # its tracee is detached as it exits
        assert done.returncode == 4
        # SIGCONT does not end a tracing stop: the hint names who does.
        assert (
            f"its process (pid {pid}) is held by a debugger or tracer (pid {tracer.pid})"
        ) in done.stderr
