"""Something on the socket that does not speak memoryd's JSON-RPC: both clients raise one
`ProtocolError` naming the socket and what came back, at once (before: JSONDecodeError,
AttributeError or TypeError from the sync client, and from the async one "memoryd closed the
connection" or a wait for the whole timeout)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from memoryd_client import AsyncClient, Client, DaemonUnavailable, ProtocolError

Reply = bytes | Callable[[dict[str, Any]], Any]

REPLIES: dict[str, Reply] = {
    "not-json": b"HTTP/1.1 400 Bad Request\r\n",
    "not-utf8": b"\xff\xfe\n",
    "array-of-numbers": b"[1,2]\n",
    "number": b"42\n",
    "error-not-an-object": lambda q: {"jsonrpc": "2.0", "id": q["id"], "error": "boom"},
    # Python's json reads NaN and Infinity, which JSON has not (memctl --json printed them on).
    "nan": lambda q: b'{"jsonrpc":"2.0","id":%d,"result":{"pid":NaN}}\n' % q["id"],
    "infinity": lambda q: b'{"jsonrpc":"2.0","id":%d,"result":{"x":1e999}}\n' % q["id"],
    # Deeper than Python's recursion limit: a RecursionError, a traceback.
    "deep": lambda q: (
        b'{"jsonrpc":"2.0","id":%d,"result":%s%s}\n' % (q["id"], b"[" * 100_000, b"]" * 100_000)
    ),
    "error-code-not-an-int": lambda q: {
        "jsonrpc": "2.0",
        "id": q["id"],
        "error": {"code": "x", "message": "m"},
    },
}


@asynccontextmanager
async def garbage_server(path: Path) -> AsyncIterator[None]:
    writers: list[asyncio.StreamWriter] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        connection = len(writers)  # status says which connection it came on
        while line := await reader.readline():
            request = json.loads(line)
            if request["method"] == "hang":
                continue  # never answered: a call in flight when the garbage comes
            if request["method"] == "status":
                reply: Any = {
                    "jsonrpc": "2.0",
                    "id": request["id"],
                    "result": {"pid": 1, "connection": connection},
                }
            else:
                reply = REPLIES[request["method"]]
            if callable(reply):
                reply = reply(request)
            writer.write(reply if isinstance(reply, bytes) else json.dumps(reply).encode() + b"\n")
            await writer.drain()

    server = await asyncio.start_unix_server(serve, str(path))
    try:
        yield
    finally:
        server.close()
        for writer in writers:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        await server.wait_closed()


@pytest.mark.parametrize("method", sorted(REPLIES))
async def test_a_reply_that_is_not_json_rpc_is_a_protocol_error(
    short_tmp: Path, method: str
) -> None:
    path = short_tmp / "garbage.sock"
    async with garbage_server(path):
        async with AsyncClient(path, timeout=10) as conn:
            first = (await conn.call("status"))["connection"]
            in_flight = asyncio.create_task(conn.call("hang"))
            await asyncio.sleep(0.05)
            with pytest.raises(ProtocolError, match="is not memoryd") as info:
                await conn.call(method)
            assert str(path) in str(info.value)
            # Every call in flight gets it at once, not its timeout.
            with pytest.raises(ProtocolError, match="is not memoryd"):
                await in_flight
            # The connection it came on is dropped; the next call connects afresh (before, an
            # error without an integer code left the async client on that connection).
            assert (await conn.call("status"))["connection"] != first
        # Not timed (< 5 s failed a loaded machine): a call left to its 10 s timeout fails
        # with TimeoutError ("did not answer"), not "is not memoryd".

        def sync_calls() -> None:
            with Client(path, timeout=10) as conn:
                first = conn.call("status")["connection"]
                with pytest.raises(ProtocolError, match="is not memoryd"):
                    conn.call(method)
                assert conn.call("status")["connection"] != first

        await asyncio.to_thread(sync_calls)


def test_a_protocol_error_is_a_daemon_unavailable() -> None:
    # memctl and every caller that handles a daemon that is down handle this one too.
    assert issubclass(ProtocolError, DaemonUnavailable)


async def test_an_async_timeout_says_which_call_and_how_long(short_tmp: Path) -> None:
    path = short_tmp / "mute.sock"

    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    server = await asyncio.start_unix_server(mute, str(path))
    try:
        async with AsyncClient(path, timeout=0.2) as conn:
            with pytest.raises(TimeoutError, match=r"did not answer memory\.list within 0\.2 s"):
                await conn.call("memory.list")
    finally:
        server.close()
