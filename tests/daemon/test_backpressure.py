"""What one connection may hold in the daemon: requests running and replies not yet read."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import orjson

from memoryd.daemon.limits import MAX_INFLIGHT_PER_CONNECTION, WRITE_DRAIN_THRESHOLD
from memoryd.daemon.rpc import method
from tests.conftest import DaemonHandle, daemon_config, start_daemon, stop_daemon
from tests.daemon.conftest import TEST_METHODS, SleepParams

REQUEST = b'{"jsonrpc":"2.0","method":"rpc.methods","id":1}\n'


async def test_a_client_that_never_reads_its_replies_holds_a_bounded_share(
    daemon: DaemonHandle,
) -> None:
    # Found by a bug hunt: 2 MB of pipelined requests whose replies were never read cost the
    # daemon +230 MiB (a task and a buffered reply per line, 39,525 in flight).
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.setblocking(False)
    raw.connect(str(daemon.socket_path))
    _reader, writer = await asyncio.open_unix_connection(sock=raw)
    writer.write(REQUEST * 20_000)  # queued on our side: never drained, never read
    try:
        await asyncio.sleep(1.5)
        assert len(daemon.daemon.inflight) <= MAX_INFLIGHT_PER_CONNECTION
        queued = max(c.writer.transport.get_write_buffer_size() for c in daemon.daemon.connections)
        reply_size = len(orjson.dumps(await daemon.call("rpc.methods"))) + 64
        assert queued <= WRITE_DRAIN_THRESHOLD + reply_size
        # The daemon stays responsive to everyone else.
        status = await asyncio.wait_for(daemon.call("status"), 5)
        # The status request counts itself: 129 when the stuck client held its whole share
        assert status["inflight"] <= MAX_INFLIGHT_PER_CONNECTION + 1
    finally:
        writer.transport.abort()


async def test_a_client_that_pipelines_and_reads_gets_every_reply(daemon: DaemonHandle) -> None:
    count = 5_000
    reader, writer = await asyncio.open_unix_connection(str(daemon.socket_path))
    lines = b"".join(
        b'{"jsonrpc":"2.0","method":"rpc.methods","id":%d}\n' % i for i in range(count)
    )

    async def send() -> None:
        writer.write(lines)
        await writer.drain()

    async def receive() -> set[int]:
        ids = set()
        for _ in range(count):
            ids.add(orjson.loads(await reader.readline())["id"])
        return ids

    _sent, ids = await asyncio.wait_for(asyncio.gather(send(), receive()), 60)
    assert ids == set(range(count))
    writer.close()


async def test_the_members_of_batches_count_against_the_share(short_tmp: Path) -> None:
    # Found in review: a batch line was one task whose 1,000 members all ran at once, so 200
    # batches ran 51,000 requests on one connection, each reply held until written.
    running = {"now": 0, "most": 0}

    async def counted(_daemon: Any, params: SleepParams) -> dict[str, float]:
        running["now"] += 1
        running["most"] = max(running["most"], running["now"])
        try:
            await asyncio.sleep(params.seconds)
        finally:
            running["now"] -= 1
        return {"slept": params.seconds}

    handle = await start_daemon(
        daemon_config(short_tmp), (method("test.counted", SleepParams, counted),)
    )
    try:
        reader, writer = await asyncio.open_unix_connection(str(handle.socket_path))
        batch = [
            {"jsonrpc": "2.0", "method": "test.counted", "params": {"seconds": 0.05}, "id": i}
            for i in range(300)
        ]
        writer.write((orjson.dumps(batch) + b"\n") * 4)
        await writer.drain()
        replies = [orjson.loads(await asyncio.wait_for(reader.readline(), 30)) for _ in range(4)]
        assert [len(r) for r in replies] == [300] * 4
        assert running["most"] <= MAX_INFLIGHT_PER_CONNECTION
        writer.close()
    finally:
        await stop_daemon(handle)


async def test_a_batch_waiting_for_room_is_not_started_once_the_daemon_stops(
    short_tmp: Path,
) -> None:
    # A batch waiting for its connection's share was started when the requests before it
    # finished, even after shutdown had begun: the drain did not wait for it, and it ran
    # against services that were being closed.
    started: list[bool] = []
    stopping = asyncio.Event()

    async def marked(_daemon: Any, params: SleepParams) -> dict[str, float]:
        started.append(stopping.is_set())
        await asyncio.sleep(params.seconds)
        return {"slept": params.seconds}

    handle = await start_daemon(
        daemon_config(short_tmp), (method("test.marked", SleepParams, marked),)
    )
    try:
        _reader, writer = await asyncio.open_unix_connection(str(handle.socket_path))
        share = MAX_INFLIGHT_PER_CONNECTION - 1  # room for one more request, not two
        single = b'{"jsonrpc":"2.0","method":"test.marked","params":{"seconds":0.3},"id":"s"}\n'
        batch = [
            {"jsonrpc": "2.0", "method": "test.marked", "params": {"seconds": 0}, "id": i}
            for i in range(2)
        ]
        writer.write(single * share + orjson.dumps(batch) + b"\n")
        await writer.drain()
        async with asyncio.timeout(10):
            while len(started) < share:  # the batch now waits for room
                await asyncio.sleep(0.01)
        stopping.set()
    finally:
        await stop_daemon(handle)
    assert started.count(True) == 0, "a request started after the daemon began to stop"
    writer.close()


async def test_lines_read_whole_before_the_daemon_stops_are_answered_not_dropped(
    short_tmp: Path,
) -> None:
    # Found by a bug hunt: a line received whole before SIGTERM, still waiting for its
    # connection's share (or a parse thread) when the daemon stopped, was dropped: the client
    # saw the connection close with no reply. Each request now gets "memoryd is stopping".
    handle = await start_daemon(daemon_config(short_tmp), TEST_METHODS)
    stopping = None
    try:
        reader, writer = await asyncio.open_unix_connection(str(handle.socket_path))
        sleeping = b'{"jsonrpc":"2.0","method":"test.sleep","params":{"seconds":0.3},"id":%d}\n'
        held = [
            {"jsonrpc": "2.0", "method": "status", "id": "held"},
            {"jsonrpc": "2.0", "method": "status"},  # a notification: never answered
            [
                {"jsonrpc": "2.0", "method": "status", "id": "member"},
                {"jsonrpc": "2.0", "method": "status"},
            ],
        ]
        writer.write(
            b"".join(sleeping % i for i in range(MAX_INFLIGHT_PER_CONNECTION))
            + b"".join(orjson.dumps(m) + b"\n" for m in held)
        )
        await writer.drain()
        async with asyncio.timeout(10):
            while len(handle.daemon.inflight) < MAX_INFLIGHT_PER_CONNECTION:
                await asyncio.sleep(0.01)
        await handle._client.close()
        stopping = asyncio.create_task(handle.server.stop())
        replies = []
        async with asyncio.timeout(30):
            while raw := await reader.readline():
                replies.append(orjson.loads(raw))
    finally:
        await (stopping or stop_daemon(handle))
    answered = {r["id"]: r for r in replies if isinstance(r, dict)}
    assert set(answered) == {*range(MAX_INFLIGHT_PER_CONNECTION), "held"}
    assert answered["held"]["error"]["code"] == -32006
    assert "memoryd is stopping" in answered["held"]["error"]["message"]
    batches = [r for r in replies if isinstance(r, list)]
    assert [[m["id"] for m in b] for b in batches] == [["member"]]
    assert batches[0][0]["error"]["code"] == -32006
    writer.close()


async def test_a_connection_lingering_after_a_refusal_does_not_hold_up_the_stop(
    short_tmp: Path,
) -> None:
    # The close waits for a line read whole to be answered (above); a line refused over the
    # cap is answered at once, so the refusal's linger (the replies before it, then the
    # client's input) must not count as a line still to answer.
    handle = await start_daemon(daemon_config(short_tmp, line_limit=1_000), TEST_METHODS)
    try:
        reader, writer = await asyncio.open_unix_connection(str(handle.socket_path))
        writer.write(
            b'{"jsonrpc":"2.0","method":"test.sleep","params":{"seconds":2},"id":1}\n'
            + b"x" * 2_000
            + b"\n"
        )
        await writer.drain()
        refusal = orjson.loads(await asyncio.wait_for(reader.readline(), 10))
        assert "over the 1000-byte cap" in refusal["error"]["message"]
        (refused,) = [c for c in handle.daemon.connections if c.tasks]  # its sleep runs on
        assert refused._settled.is_set()
    finally:
        await stop_daemon(handle)
    writer.close()


async def test_every_line_of_a_chunk_read_before_the_stop_is_answered(short_tmp: Path) -> None:
    # Found in review: the close waited for a line's answer once, but the reader answers a
    # chunk's lines in turn, setting and clearing the flag for each; a close woken by one
    # line's answer went on while the next waited for the client to read, and that answer
    # and every later one were dropped (12,810 of 20,000 came back).
    lines = 20_000  # "1\n": 2 bytes in, ~160 bytes of -32006 out, 3 MB in all
    handle = await start_daemon(daemon_config(short_tmp), TEST_METHODS)
    stopping = None
    try:
        reader, writer = await asyncio.open_unix_connection(str(handle.socket_path))
        sleeping = b'{"jsonrpc":"2.0","method":"test.sleep","params":{"seconds":0.3},"id":%d}\n'
        writer.write(b"".join(sleeping % i for i in range(MAX_INFLIGHT_PER_CONNECTION)))
        writer.write(b'{"jsonrpc":"2.0","method":"status","id":"held"}\n' + b"1\n" * lines)
        await writer.drain()
        async with asyncio.timeout(10):
            while len(handle.daemon.inflight) < MAX_INFLIGHT_PER_CONNECTION:
                await asyncio.sleep(0.01)
        (connection,) = [c for c in handle.daemon.connections if c.tasks]
        closing = asyncio.Event()
        close = connection.close

        async def noted_close(flush_within: float | None = None) -> None:
            closing.set()
            await close(flush_within)

        connection.close = noted_close  # type: ignore[method-assign]
        await handle._client.close()
        stopping = asyncio.create_task(handle.server.stop())
        # Nothing is read until the close waits: the answers fill the buffer meanwhile.
        await asyncio.wait_for(closing.wait(), 30)
        answered = 0
        async with asyncio.timeout(30):
            while raw := await reader.readline():
                reply = orjson.loads(raw)
                answered += reply.get("id") is None and reply["error"]["code"] == -32006
    finally:
        await (stopping or stop_daemon(handle))
    assert answered == lines
    writer.close()
