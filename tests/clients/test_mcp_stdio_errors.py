"""`memoryd-mcp` answers what the MCP SDK would leave unanswered: a line that is not JSON
(-32700), a batch and an invalid request (-32600); `memoryd_client.mcp_stdin`."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memoryd_client.mcp_stdin import NOT_INITIALIZED, error_reply, read_lines, sdk_lines
from memoryd_client.mcp_tools import is_jsonrpc_message
from tests.clients.conftest import memctl_env
from tests.clients.fake_daemon import FakeDaemon
from tests.clients.test_mcp_server import exchange, read_line, start_server


def test_lines_the_sdk_cannot_take_are_answered_and_replies_stay_whole(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    # A reply far over a pipe's atomic write, so an error written between its parts would tear it.
    memory = {"path": "/m/a.md", "name": "a", "type": "user", "content": "x" * 30_000}
    fake_daemon.on("recall", {"selector": "local", "memories": [memory]})
    recall = {"name": "recall", "arguments": {"query": "tea"}}
    lines = [
        *[
            json.dumps({"jsonrpc": "2.0", "id": 100 + n, "method": "tools/call", "params": recall})
            for n in range(3)
        ],
        "not json",
        '[{"jsonrpc":"2.0","id":9,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"}]',
        "[]",
        '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":5}',
        '{"jsonrpc":"2.0","id":"b","method":4}',
        "",  # a blank line and a response that is no response: nothing to answer
        '{"jsonrpc":"2.0","id":3,"result":5}',
        '{"jsonrpc":"2.0","id":10,"method":"ping"}',
        # A lone CR ends a line for the SDK (universal newlines): two requests, as it reads them.
        '{"jsonrpc":"2.0","id":11,"method":"ping"}\r{"jsonrpc":"2.0","id":12,"method":"ping"}',
    ]
    replies = exchange(fake_daemon.socket_path, tmp_path, lines, count=12)
    # Before: only 1, 100–102 and 10 were answered; the client waited for ever on 7, "b" and 9.
    by_id: dict[Any, Any] = {}
    for reply in replies:
        if isinstance(reply, list):
            by_id["batch"] = reply
        else:
            by_id.setdefault(reply["id"], []).append(reply)
    assert sorted(by_id, key=str) == sorted(
        [1, 100, 101, 102, None, "batch", 7, "b", 10, 11, 12], key=str
    )
    assert [r["error"]["code"] for r in by_id[None]] == [-32700, -32600]
    assert [(r["id"], r["error"]["code"]) for r in by_id["batch"]] == [(9, -32600)]
    assert by_id[7][0]["error"]["code"] == by_id["b"][0]["error"]["code"] == -32600
    assert by_id[10][0]["result"] == by_id[11][0]["result"] == by_id[12][0]["result"] == {}
    for n in range(3):
        assert "x" * 30_000 in by_id[100 + n][0]["result"]["content"][0]["text"]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"ping"}', None),
        (b'{"jsonrpc":"2.0","method":"notifications/initialized"}', None),
        (b'{"jsonrpc":"2.0","id":1,"result":{}}', None),
        (b"  \r\n", b""),
        (b"{nope", {"jsonrpc": "2.0", "id": None, "error": {"code": -32700}}),
        (b"[" * 100_000, {"jsonrpc": "2.0", "id": None, "error": {"code": -32700}}),
        (b'"ping"', {"jsonrpc": "2.0", "id": None, "error": {"code": -32600}}),
        (
            b'{"jsonrpc":"1.0","id":4,"method":"ping"}',
            {"jsonrpc": "2.0", "id": 4, "error": {"code": -32600}},
        ),
        (
            b'{"jsonrpc":"2.0","method":5}',
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32600}},
        ),
        # A request with an id MCP does not allow: the SDK took it for a notification.
        (
            b'{"jsonrpc":"2.0","id":null,"method":"ping"}',
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32600}},
        ),
        (
            b'{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"list"}}',
            {"jsonrpc": "2.0", "id": 1.5, "error": {"code": -32600}},
        ),
        (
            b'{"jsonrpc":"2.0","id":true,"method":"ping"}',
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32600}},
        ),
        (
            b'{"jsonrpc":"2.0","id":[2],"method":"notifications/initialized"}',
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32600}},
        ),
        (
            b'{"jsonrpc":"2.0","id":1e400,"method":"ping"}',
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32600}},
        ),
        # A notification or a response is never answered, however wrong.
        (b'{"jsonrpc":"2.0","method":"notifications/x","params":5}', b""),
        (b'{"jsonrpc":"2.0","id":3,"error":5}', b""),
        (b'[{"jsonrpc":"2.0","method":"notifications/x"}]', b""),
    ],
)
def test_error_reply(line: bytes, expected: Any) -> None:
    reply = error_reply(line, is_jsonrpc_message)
    if expected is None or expected == b"":
        assert reply == expected
        return
    assert reply is not None
    assert reply.endswith(b"\n")
    got = json.loads(reply)
    assert got["error"]["message"]
    got["error"] = {"code": got["error"]["code"]}
    assert got == expected


def test_a_request_whose_id_mcp_does_not_allow_is_answered(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    lines = [
        '{"jsonrpc":"2.0","id":null,"method":"ping"}',
        '{"jsonrpc":"2.0","id":2.5,"method":"tools/list"}',
        '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}',
        '{"jsonrpc":"2.0","id":3,"method":"ping"}',
    ]
    replies = exchange(fake_daemon.socket_path, tmp_path, lines, count=4)
    # Before: the SDK read the first two as notifications; only 1 and 3 were answered, and
    # the client waited for ever on the others.
    by_id = {r["id"]: r for r in replies}  # the wire's own answers may come first
    assert sorted(by_id, key=str) == [1, 2.5, 3, None]
    assert by_id[None]["error"]["code"] == by_id[2.5]["error"]["code"] == -32600
    assert by_id[3]["result"] == {}


def test_a_line_over_the_cap_is_read_past_not_kept() -> None:
    stream = io.BytesIO(b"ab\n" + b"x" * 25 + b"\n" + b"y" * 10 + b"cd\n" + b"last")
    assert list(read_lines(stream, max_bytes=10)) == [b"ab\n", None, None, b"last"]


def test_lines_are_cut_where_the_sdk_cuts_them() -> None:
    assert sdk_lines(b"a\r\n") == [b"a\r\n"]
    assert sdk_lines(b"a\rb\n") == [b"a\r", b"b\n"]
    assert sdk_lines(b"a\r\r\nb") == [b"a\r", b"\r\n", b"b"]


# The SDK's side of the wire stood in for by an echo: what it is handed comes back on stdout.
ECHO_SERVER = """
import os, sys
from memoryd_client.mcp_stdin import StdioWire

def is_message(line):
    raise TypeError("a verdict that fails")

wire = StdioWire(is_message)
for line in sys.stdin.buffer:
    os.write(1, line)
wire.finish()
"""


def test_a_verdict_that_fails_hands_the_line_on() -> None:
    done = subprocess.run(
        [sys.executable, "-c", ECHO_SERVER],
        input=b'{"jsonrpc":"2.0","id":1,"method":"ping"}\nnot json\n',
        capture_output=True,
        env=memctl_env(),
        timeout=60,
        check=False,
    )
    # Before: the reading thread ended at the first line, and nothing reached the server.
    assert done.stdout == b'{"jsonrpc":"2.0","id":1,"method":"ping"}\nnot json\n'
    assert b"passed on unchecked" in done.stderr


def test_a_request_before_initialize_is_told_to_initialize_first(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    # The SDK answered "Invalid request parameters" (data ""), which says nothing of why; a
    # request pipelined right after `initialize` is the SDK's to take, and is answered.
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": "1", "method": "tools/call", "params": {"name": "list"}},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
        {"jsonrpc": "2.0", "id": 4, "method": "initialize", "params": {"capabilities": {}}},
        {"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "id": 6, "method": "tools/list"},
    ]
    proc = start_server(fake_daemon.socket_path, tmp_path)
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        proc.stdin.write(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
        proc.stdin.flush()
        replies = [read_line(proc.stdout, timeout=60) for _ in lines]
    finally:
        proc.kill()
        proc.communicate()
    assert [r["id"] for r in replies] == [1, "1", 3, 4, 5, 6]
    for early in replies[:2]:
        assert early["error"] == {"code": -32602, "message": NOT_INITIALIZED}, early
    assert replies[2]["result"] == {}
    # An initialize with invalid params is the SDK's own error, and initializes nothing.
    assert replies[3]["error"]["message"] == "Invalid request parameters"
    assert replies[4]["result"]["serverInfo"]["name"] == "memoryd"
    assert {tool["name"] for tool in replies[5]["result"]["tools"]} >= {"recall", "read"}
