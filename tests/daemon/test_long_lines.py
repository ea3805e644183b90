"""A long request line on its way from the socket to the parser: its bytes are handed on, not
copied (joined as `bytes(partial) + tail` and then `strip()`ped, a 50 MiB line was copied three
times on the event loop, ~100 ms of every client's wait), and the stdlib's reading of a long
one (half a surrogate pair, which orjson refuses) runs in a thread, where its Python parts let
the event loop in (~300 ms on the loop for 50 MiB). `bench/bench_line_stall.py` has the times."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest

from memoryd.daemon.limits import PARSE_INLINE_BYTES, READ_CHUNK
from memoryd.daemon.protocol import framing
from memoryd.daemon.protocol.connection import Connection
from tests.conftest import DaemonHandle

MiB = 1024 * 1024


def _exchange(path: Path, line: bytes) -> dict[str, Any]:
    """`line` sent and its reply read by a blocking socket in a thread: the test's own copies
    (an asyncio transport buffers what it cannot send at once) stay out of the daemon's."""
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(30)
        conn.connect(str(path))
        conn.sendall(line)
        reply: dict[str, Any] = json.loads(conn.makefile("rb").readline())
        return reply


class _PeakAtParse:
    """framing's `orjson`, noting the most memory traced up to the moment a line is parsed
    (orjson's own reading takes ~12 times the line, mostly never touched: not counted)."""

    def __init__(self) -> None:
        self.peaks: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(orjson, name)  # dumps, for the reply

    def loads(self, data: bytes | bytearray) -> Any:
        self.peaks.append(tracemalloc.get_traced_memory()[1])
        return orjson.loads(data)


async def test_a_long_line_reaches_the_parser_without_being_copied(
    daemon: DaemonHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    size = 16 * MiB
    # Whitespace before the `}` is JSON: the parsed request is small, the line is not.
    line = b'{"jsonrpc":"2.0","id":7,"method":"rpc.methods"' + b" " * size + b"}\n"
    parser = _PeakAtParse()
    monkeypatch.setattr(framing, "orjson", parser)
    tracemalloc.start()
    try:
        reply = await asyncio.to_thread(_exchange, daemon.socket_path, line)
    finally:
        tracemalloc.stop()
    assert reply["id"] == 7
    assert "status" in reply["result"]["methods"]
    # The line held once (its buffer grows by an eighth at a time) and what reading holds
    # besides; each copy was another `size`.
    assert len(parser.peaks) == 1
    assert parser.peaks[0] < 1.5 * size, f"{parser.peaks[0] / MiB:.1f} MiB for a 16 MiB line"


def _surrogate_line(size: int) -> bytes:
    """A `status` request (id 3) of about `size` bytes that orjson refuses and the stdlib
    reads (half a surrogate pair, read as U+FFFD)."""
    text = json.dumps("\ud83d" + "x" * size)
    return b'{"jsonrpc":"2.0","id":3,"method":"status","params":{"a":%s}}\n' % text.encode()


@pytest.mark.parametrize("long", [True, False])
async def test_the_stdlib_reads_a_long_line_off_the_event_loop(
    daemon: DaemonHandle, stdlib_parse_threads: list[threading.Thread], long: bool
) -> None:
    threads = stdlib_parse_threads
    # Half a surrogate pair: orjson refuses the line, the stdlib reads it (as U+FFFD).
    line = _surrogate_line(PARSE_INLINE_BYTES + 1 if long else 10)
    reply = await asyncio.to_thread(_exchange, daemon.socket_path, line)
    assert reply["id"] == 3
    assert reply["error"]["code"] == -32602  # status takes no params
    assert len(threads) == 1
    # A short line is read where it arrived: a thread costs more than it saves.
    assert (threads[0] is threading.main_thread()) is not long


async def test_a_line_read_in_a_thread_stays_charged_to_the_input_budget(
    daemon: DaemonHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Complete lines queued for the threads are input still held: uncharged, many clients'
    lines at the cap waited there beyond the budget."""
    seen: list[tuple[threading.Thread, int]] = []
    read = framing._strict_stdlib_parse
    budget = daemon.server.input_budget
    assert budget is not None

    def spy(line: bytes | bytearray, first_error: ValueError | None) -> Any:
        seen.append((threading.current_thread(), budget.used))
        return read(line, first_error)

    monkeypatch.setattr(framing, "_strict_stdlib_parse", spy)
    line = _surrogate_line(2 * PARSE_INLINE_BYTES)
    reply = await asyncio.to_thread(_exchange, daemon.socket_path, line)
    assert reply["id"] == 3
    [(thread, used)] = seen
    assert thread is not threading.main_thread()
    assert used >= len(line) - READ_CHUNK  # all but the chunk it ended in
    assert budget.used == 0


async def test_a_whole_line_waiting_for_room_stays_charged_to_the_input_budget(
    daemon: DaemonHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole line waits for the connection's room (its requests at their cap, or its client
    not reading its replies: for ever) before it is parsed. Given back at its newline, each of
    many such connections held a line at the cap beyond the budget (six of 40 MiB: 274 MiB
    more, none refused); found in review."""
    budget = daemon.server.input_budget
    assert budget is not None
    used_then: list[int] = []
    wait_for_room = Connection._wait_for_room

    async def spy(self: Connection) -> None:
        used_then.append(budget.used)
        await wait_for_room(self)

    monkeypatch.setattr(Connection, "_wait_for_room", spy)
    line = b'{"jsonrpc":"2.0","id":4,"method":"status"' + b" " * (4 * READ_CHUNK) + b"}\n"
    reply = await asyncio.to_thread(_exchange, daemon.socket_path, line)
    assert reply["id"] == 4
    [used] = used_then
    assert used >= len(line) - READ_CHUNK  # all but the chunk it ended in
    assert budget.used == 0
