"""Socket activation with a socket on another path than `--socket`: what a socket unit
rewritten (another path) but not restarted hands over. The daemon serves it, and its status,
status file and log name it, with a warning saying how to make them agree."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from tests.daemon.test_lifecycle import wait_healthy


def test_an_activated_socket_on_another_path_is_named_as_served(short_tmp: Path) -> None:
    served = short_tmp / "old" / "memoryd.sock"
    configured = short_tmp / "new" / "memoryd.sock"
    for folder in (served.parent, configured.parent):
        folder.mkdir(mode=0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(served))
    listener.listen(16)
    fd = listener.fileno()
    log_file = short_tmp / "memoryd.log"
    script = (
        f"import os, sys; os.dup2({fd}, 3); "
        "os.environ['LISTEN_PID'] = str(os.getpid()); os.environ['LISTEN_FDS'] = '1'; "
        "os.execv(sys.executable, [sys.executable, '-m', 'memoryd', '--socket', "
        f"{str(configured)!r}, '--log-file', {str(log_file)!r}])"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], pass_fds=(fd,))
    listener.close()
    try:
        status = wait_healthy(served)
        assert status["socket"] == str(served)
        info = json.loads(served.with_name(served.name + ".status.json").read_text())
        assert info["socket"] == str(served)
        assert not configured.with_name(configured.name + ".status.json").exists()
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
    events = [json.loads(line) for line in log_file.read_text().splitlines()]
    warning = next(e for e in events if e["event"].startswith("systemd handed over a socket"))
    assert (warning["socket"], warning["configured_socket"]) == (str(served), str(configured))
    listening = next(e for e in events if e["event"] == "memoryd listening")
    assert listening["socket"] == str(served)
    assert served.exists()  # still systemd's: the daemon leaves it
