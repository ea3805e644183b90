"""The daemon under a low open-files limit (`ulimit -n 64`, a login session's soft 1,024): the
soft limit is raised to the hard one at start, so a burst of clients does not use up the
descriptors the daemon needs for its own files (every accepted client got -32603 `OSError`
then: its `status` could not even import a module); a hard limit that stays low is said at
start-up."""

from __future__ import annotations

import json
import resource
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.daemon.test_lifecycle import wait_healthy

CLIENTS = 100


def _limit(soft: int, hard: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return apply


def _spawn(sock: Path, soft: int, hard: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "memoryd", "--socket", str(sock), "--log-level", "warning"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_limit(soft, hard),
    )


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.terminate()
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err


def _status_line(conn: socket.socket, request_id: int) -> dict[str, object]:
    conn.sendall(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "status"}).encode())
    conn.sendall(b"\n")
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(1 << 16)
        assert chunk, f"connection {request_id} closed without a reply"
        data += chunk
    reply: dict[str, object] = json.loads(data)
    return reply


@pytest.fixture
def clients() -> Iterator[list[socket.socket]]:
    held: list[socket.socket] = []
    yield held
    for conn in held:
        conn.close()


def test_a_hundred_clients_under_a_soft_limit_of_64_are_all_answered(
    short_tmp: Path, clients: list[socket.socket]
) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 4 * CLIENTS:
        pytest.skip(f"the hard open-files limit here is {hard}")
    sock = short_tmp / "d.sock"
    proc = _spawn(sock, 64, hard)
    try:
        wait_healthy(sock)
        for _ in range(CLIENTS):  # all open at once, then each asks
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.settimeout(20)
            conn.connect(str(sock))
            clients.append(conn)
        replies = [_status_line(conn, i) for i, conn in enumerate(clients)]
    finally:
        log = _stop(proc)
    errors = [r["error"] for r in replies if "error" in r]
    assert errors == [], errors[:3]
    assert "open files limit is low" not in log


def test_a_low_hard_limit_is_said_at_start(short_tmp: Path) -> None:
    sock = short_tmp / "d.sock"
    proc = _spawn(sock, 64, 64)
    try:
        wait_healthy(sock)
    finally:
        log = _stop(proc)
    assert "open files limit is low" in log
    assert '"open_files": 64' in log
    assert "Traceback" not in log


def test_the_soft_limit_is_raised_to_the_hard_one(short_tmp: Path) -> None:
    sock = short_tmp / "d.sock"
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    proc = _spawn(sock, 64, hard)
    try:
        wait_healthy(sock)
        limits = Path(f"/proc/{proc.pid}/limits")
        if not limits.exists():
            pytest.skip("no /proc here")
        line = next(x for x in limits.read_text().splitlines() if x.startswith("Max open files"))
    finally:
        _stop(proc)
    soft = int(line.split()[3])
    assert soft == (65_536 if hard == resource.RLIM_INFINITY else min(hard, 65_536))
