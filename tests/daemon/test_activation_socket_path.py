"""Socket activation: a socket on another path than `--socket` (what a socket unit rewritten,
another path, but not restarted hands over) is served, and its status, status file and log name
it, with a warning saying how to make them agree; a descriptor that is no Unix stream socket is
one line and exit 2; more sockets than one are named in a warning."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.parametrize(
    "handed", ["a file", "a TCP socket", "a datagram socket", "a connection (Accept=yes)"]
)
def test_an_activated_descriptor_that_is_no_unix_stream_socket_is_one_line(
    short_tmp: Path, handed: str
) -> None:
    # Before: a traceback (ENOTSOCK, or asyncio's ValueError), under systemd a restart loop;
    # a connection (what a unit with Accept=yes hands over) was taken for a listening socket,
    # and the daemon ran, accepting nothing, answering nobody.
    peer = None
    if handed == "a file":
        held = open(short_tmp / "plain.txt", "w")  # noqa: SIM115 - closed below
    elif handed == "a TCP socket":
        held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        held.bind(("127.0.0.1", 0))
        held.listen(1)
    elif handed == "a connection (Accept=yes)":
        held, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    else:
        held = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        held.bind(str(short_tmp / "dgram.sock"))
    fd = held.fileno()
    script = (
        f"import os, sys; os.dup2({fd}, 3); "
        "os.environ['LISTEN_PID'] = str(os.getpid()); os.environ['LISTEN_FDS'] = '1'; "
        "os.execv(sys.executable, [sys.executable, '-m', 'memoryd', '--socket', "
        f"{str(short_tmp / 'm.sock')!r}])"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", script],
            pass_fds=(fd,),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        held.close()
        if peer is not None:
            peer.close()
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    wanted = "must have Accept=no" if peer is not None else "ListenStream= set to a socket path"
    assert wanted in proc.stderr


def test_a_unit_handing_over_two_sockets_is_named_in_one_warning(short_tmp: Path) -> None:
    # A socket unit with two `ListenStream=` lines hands over two listening sockets: the daemon
    # serves descriptor 3 only, and clients of the second wait for ever on a socket nobody
    # accepts on. Before, nothing said so (LISTEN_FDNAMES was cleared unread).
    first, second = short_tmp / "first.sock", short_tmp / "second.sock"
    listeners = []
    for path in (first, second):
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        listener.listen(16)
        listeners.append(listener)
    fds = tuple(s.fileno() for s in listeners)
    log_file = short_tmp / "memoryd.log"
    script = (
        f"import os, sys; os.dup2({fds[0]}, 3); os.dup2({fds[1]}, 4); "
        "os.environ['LISTEN_PID'] = str(os.getpid()); os.environ['LISTEN_FDS'] = '2'; "
        "os.environ['LISTEN_FDNAMES'] = 'memoryd.socket:extra'; "
        "os.execv(sys.executable, [sys.executable, '-m', 'memoryd', '--socket', "
        f"{str(first)!r}, '--log-file', {str(log_file)!r}])"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], pass_fds=fds)
    for listener in listeners:
        listener.close()
    try:
        assert wait_healthy(first)["socket"] == str(first)
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
    events = [json.loads(line) for line in log_file.read_text().splitlines()]
    warnings = [e for e in events if e["event"].startswith("systemd handed over more than one")]
    assert len(warnings) == 1, events
    assert (warnings[0]["count"], warnings[0]["names"]) == (2, ["memoryd.socket", "extra"])
    assert "one ListenStream=" in warnings[0]["event"]
