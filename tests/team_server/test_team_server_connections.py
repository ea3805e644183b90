"""The connection deadlines (`memoryd_team/connection.py`), over real TCP: a client that never
finishes its headers or never reads its reply no longer holds a connection for good, and
clients that behave (keep-alive, a body that comes after a pause) are served as before."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from memoryd.team.protocol import TEAM_MEMORY_PATH
from memoryd_team.connection import DeadlineH11Protocol
from memoryd_team.etag import parse_if_match
from memoryd_team.settings import ServerSettings
from memoryd_team.storage.base import Author
from tests.team_server.conftest import ThreadedServer, create_token, start_server_process

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


# The connection deadlines shrunk through the settings, as `serve --header-timeout` does.
QUICK = ServerSettings(full_bytes=64 * 1024 * 1024, header_timeout_s=0.5, write_timeout_s=1.0)


@pytest.fixture
def server(database_url: str) -> Iterator[ThreadedServer]:
    started = ThreadedServer(database_url, QUICK).start()
    try:
        yield started
    finally:
        started.stop()


def connect(server: ThreadedServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.settimeout(15)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def read_reply(sock: socket.socket) -> bytes:
    """One whole reply (head and Content-Length body) off a kept-alive connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def test_a_connection_that_sends_nothing_is_closed(server: ThreadedServer) -> None:
    with connect(server) as sock:
        wait_for(lambda: server.open_connections == 1)
        assert read_until_closed(sock) == b""  # closed by the server, no reply to nothing
    wait_for(lambda: server.open_connections == 0)


def test_headers_dripped_a_line_at_a_time_get_a_503_and_the_connection_closed(
    server: ThreadedServer,
) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: team\r\n")
        sock.settimeout(0.1)
        reply = b""
        # A line every 0.1 s, well inside the deadline: the bytes arriving must not extend
        # it. Reading first, so the 503 is read whole before anything more is sent.
        for _ in range(200):
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                if not reply:
                    sock.sendall(b"X-Drip: 1\r\n")
                continue
            if not chunk:
                break
            reply += chunk
        else:
            pytest.fail("the dripping client was still connected after 20 s")
    head, _, body = reply.partition(b"\r\n\r\n")
    # A 503, not a 408: a client takes any 4xx but 409/429 as a refusal for good.
    assert head.startswith(b"HTTP/1.1 503 ")
    assert b"connection: close" in head.lower()
    assert json.loads(body)["error"] == "header_timeout"
    wait_for(lambda: server.open_connections == 0)


def test_a_kept_alive_connection_serves_its_requests_then_closes_when_idle(
    server: ThreadedServer,
) -> None:
    token = server.token("acme/widgets")
    body = json.dumps({"entries": {"a.md": "slow body\n"}}).encode()
    with connect(server) as sock:
        # A PUT whose body comes after a pause longer than the header deadline: the headers
        # were in, so the body's own (longer) deadline applies.
        sock.sendall(
            f"PUT {TEAM_MEMORY_PATH}?repo=acme/widgets HTTP/1.1\r\nHost: team\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
        )
        time.sleep(2 * QUICK.header_timeout_s)
        sock.sendall(body)
        first = read_reply(sock)
        assert first.startswith(b"HTTP/1.1 200 "), first
        # The next request on the same connection, in time.
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: team\r\n\r\n")
        second = read_reply(sock)
        assert second.startswith(b"HTTP/1.1 200 "), second
        assert read_until_closed(sock) == b""  # then idle: closed
    assert [v.key for v in server.run(server.storage.history("acme/widgets"))] == ["a.md"]


def test_a_client_that_never_reads_its_reply_is_dropped(server: ThreadedServer) -> None:
    token = server.token("acme/widgets")
    _big_repo(server)
    deaf = socket.socket()
    deaf.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    deaf.connect(("127.0.0.1", server.port))
    try:
        deaf.sendall(
            f"GET {TEAM_MEMORY_PATH}?repo=acme/widgets HTTP/1.1\r\nHost: team\r\n"
            f"Authorization: Bearer {token}\r\n\r\n".encode()
        )
        wait_for(lambda: server.open_connections == 1)
        # Never read: the server gives up on it instead of holding the reply for ever.
        wait_for(lambda: server.open_connections == 0)
    finally:
        deaf.close()
    with server.client(token) as http:  # and it still serves everyone else
        assert http.get("/healthz").status_code == 200


def test_serve_closes_a_connection_that_never_sends_a_request(
    database_url: str, tmp_path: Path
) -> None:
    """`memoryd-team serve` itself runs with the deadlines (uvicorn alone had none)."""
    create_token(database_url, "acme/widgets")
    served = start_server_process(
        database_url, tmp_path / "serve.log", "--header-timeout", "0.5", "--workers", "2"
    )
    try:
        port = int(urlsplit(served.url).port or 0)
        with socket.create_connection(("127.0.0.1", port)) as sock:
            # Its setting reached the workers: 0.5 s; the default 10 s fails this read's 5 s
            # (a TimeoutError). Not timed besides: < 5 s failed a loaded machine.
            sock.settimeout(5)
            sock.sendall(b"GET /healthz HTTP/1.1\r\n")
            assert read_until_closed(sock).startswith(b"HTTP/1.1 503 ")
    finally:
        served.stop()


def _put_head(length: int) -> bytes:
    """A PUT's head with a token the server does not know: refused before the body is read."""
    return (
        f"PUT {TEAM_MEMORY_PATH}?repo=acme/widgets HTTP/1.1\r\nHost: team\r\n"
        "Authorization: Bearer mdt_unknown\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def test_an_upload_answered_before_its_body_was_read_may_finish_while_bytes_come(
    server: ThreadedServer,
) -> None:
    # A bad token is refused (401) before the body is read; a slow client is still sending
    # it. The header deadline counted from that reply closed the connection under the upload
    # (a reset: the client saw a network error, retried for ever, and never read its 401).
    body = b'{"entries": {"a.md": "' + b"x" * 99_950 + b'"}}'
    with connect(server) as sock:
        sock.sendall(_put_head(len(body)))
        step = 2500  # 40 chunks, 50 ms apart: 4 header deadlines, never a 1 s stall
        for i in range(0, len(body), step):
            sock.sendall(body[i : i + step])
            time.sleep(0.05)
        assert read_reply(sock).startswith(b"HTTP/1.1 401 ")
        # The body all came: the connection serves the next request.
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: team\r\n\r\n")
        assert read_reply(sock).startswith(b"HTTP/1.1 200 ")


def test_the_rest_of_an_answered_body_that_stalls_is_closed(server: ThreadedServer) -> None:
    with connect(server) as sock:
        sock.sendall(_put_head(100_000) + b'{"entries": ')
        assert read_reply(sock).startswith(b"HTTP/1.1 401 ")
        # Nothing more of the body: not held for good.
        assert read_until_closed(sock) == b""
    wait_for(lambda: server.open_connections == 0)


def _big_repo(server: ThreadedServer) -> None:
    """40 x 240 KB: a reply far larger than the socket buffers on both sides can hold."""
    for batch in range(5):
        server.run(
            server.storage.put_entries(
                "acme/widgets",
                {f"k{batch}-{i}.md": f"{batch}{i}" * 120_000 for i in range(8)},
                None if batch == 0 else parse_if_match("*"),
                max_entries=None,
                author=Author("t", "t"),
                at=datetime.now(UTC),
                check_token=False,  # seeding: no token behind the author
            )
        )


def test_a_big_reply_read_steadily_is_not_cut(database_url: str) -> None:
    # A stalled write was timed from the first stall to the transport resuming the writer,
    # which it does only once the buffer is nearly empty: a reply over a slow link (small
    # socket buffers) had to drain whole within write_timeout_s, a 2 MiB page under 70 KB/s
    # was aborted on every pull. Then the whole reply had a flat REPLY_TOTAL_WAITS x that.
    # Scaled: 1 s without progress, 4 s in all or 128 KB/s; a 1.9 MB reply read at ~0.4 MB/s
    # (5 s: the flat 4 s cut it too).
    class SlowLink(DeadlineH11Protocol):
        min_reply_rate = 128 * 1024

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            transport.get_extra_info("socket").setsockopt(
                socket.SOL_SOCKET, socket.SO_SNDBUF, 16384
            )
            super().connection_made(transport)

    server = ThreadedServer(database_url, QUICK, protocol=SlowLink).start()
    try:
        server.run(
            server.storage.put_entries(
                "acme/widgets",
                {f"k{i}.md": f"{i}" * 240_000 for i in range(8)},
                None,
                max_entries=None,
                author=Author("t", "t"),
                at=datetime.now(UTC),
                check_token=False,  # seeding: no token behind the author
            )
        )
        token = server.token("acme/widgets")
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
            sock.connect(("127.0.0.1", server.port))
            sock.settimeout(15)
            sock.sendall(
                f"GET {TEAM_MEMORY_PATH}?repo=acme/widgets HTTP/1.1\r\nHost: team\r\n"
                f"Authorization: Bearer {token}\r\n\r\n".encode()
            )
            got = b""
            while len(got) < 1_920_000:
                chunk = sock.recv(16384)
                assert chunk, f"cut after {len(got)} bytes"
                got += chunk
                time.sleep(0.04)  # never near the 1 s stall
        assert got.startswith(b"HTTP/1.1 200 ")
    finally:
        server.stop()
