"""A burst of connections must queue in the accept backlog, not be refused (issue 14): the
daemon listens with the system's maximum backlog, also when asyncio takes the socket over."""

from __future__ import annotations

import errno
import socket

from tests.conftest import DaemonHandle

BURST = 200


async def test_a_burst_of_connections_queues_and_the_next_client_gets_in(
    daemon: DaemonHandle,
) -> None:
    # Opened without yielding to the event loop, so the daemon accepts none of them meanwhile:
    # every one waits in the backlog, as when many hooks start at once on a busy machine.
    burst: list[socket.socket] = []
    refused: list[str] = []
    try:
        for _ in range(BURST):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.setblocking(False)
            burst.append(sock)
            code = sock.connect_ex(str(daemon.socket_path))
            if code != 0:
                refused.append(errno.errorcode.get(code, str(code)))
    finally:
        for sock in burst:
            sock.close()
    assert refused == [], f"{len(refused)} of {BURST} connects refused: {sorted(set(refused))}"
    status = await daemon.call("status")
    assert status["pid"] > 0
    late = await daemon.client()
    try:
        assert (await late.call("status"))["pid"] == status["pid"]
    finally:
        await late.close()
