"""The wire protocol against a real daemon on a real socket: framing, errors, batches, concurrency."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.protocol.framing import encode_one
from memoryd.daemon.rpc import Params, method
from memoryd_client import AsyncClient, RpcError
from tests.conftest import DaemonHandle, daemon_config, start_daemon, stop_daemon


async def raw_exchange(path: Path, payload: bytes, replies: int = 1) -> list[Any]:
    reader, writer = await asyncio.open_unix_connection(str(path), limit=1 << 26)
    writer.write(payload)
    await writer.drain()
    out = []
    for _ in range(replies):
        line = await asyncio.wait_for(reader.readline(), 10)
        out.append(json.loads(line) if line else None)
    writer.close()
    return out


async def test_status_reports_version_pid_and_model_off(daemon: DaemonHandle) -> None:
    status = await daemon.call("status")
    assert status["pid"] > 0
    assert status["socket"] == str(daemon.socket_path)
    assert status["model"]["configured"] is False
    assert "ANTHROPIC_API_KEY" in status["model"]["reason"]
    assert status["features"]["model"]["enabled"] is False
    methods = (await daemon.call("rpc.methods"))["methods"]
    assert {"status", "subscribe", "shutdown", "settings.get", "settings.set"} <= set(methods)


@pytest.mark.parametrize(
    ("line", "code", "needle"),
    [
        (b"{not json\n", -32700, "parse error"),
        (b"\xff\xfe\n", -32700, "parse error"),
        (b"42\n", -32600, "JSON object"),
        (b'"status"\n', -32600, "JSON object"),
        (b"[]\n", -32600, "empty batch"),
        (b'{"jsonrpc":"1.0","id":1,"method":"status"}\n', -32600, "jsonrpc"),
        (b'{"id":1,"method":"status"}\n', -32600, "jsonrpc"),
        (b'{"jsonrpc":"2.0","id":1,"method":5}\n', -32600, "method"),
        (b'{"jsonrpc":"2.0","id":1,"method":["status"]}\n', -32600, "method"),
        (b'{"jsonrpc":"2.0","id":1,"method":"status","params":3}\n', -32600, "params"),
        (b'{"jsonrpc":"2.0","id":{},"method":"status"}\n', -32600, "id"),
        (b'{"jsonrpc":"2.0","id":1,"method":"no.such"}\n', -32601, "no.such"),
        (b'{"jsonrpc":"2.0","id":1,"method":"status","params":{"bogus":1}}\n', -32602, "bogus"),
        (b'{"jsonrpc":"2.0","id":1,"method":"status","params":[1]}\n', -32602, "named"),
        (b'{"jsonrpc":"2.0","id":1,"method":"settings.set","params":{}}\n', -32602, "key"),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"settings.set","params":{"key":"autoMemoryEnabled","value":"yes"}}\n',
            -32602,
            "autoMemoryEnabled",
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"settings.get","params":{"cwd":"rel/dir"}}\n',
            -32602,
            "cwd",
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"settings.get","params":{"cwd":"/no/such/dir"}}\n',
            -32602,
            "cwd",
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"events":["x/y"]}}\n',
            -32602,
            "events",
        ),
    ],
)
async def test_bad_input_gets_a_clear_error_and_the_daemon_keeps_serving(
    daemon: DaemonHandle, line: bytes, code: int, needle: str
) -> None:
    (reply,) = await raw_exchange(daemon.socket_path, line)
    assert reply["error"]["code"] == code
    assert needle in reply["error"]["message"]
    assert "Traceback" not in json.dumps(reply)
    assert (await daemon.call("status"))["pid"] > 0


async def test_notification_request_gets_no_reply(daemon: DaemonHandle) -> None:
    reader, writer = await asyncio.open_unix_connection(str(daemon.socket_path))
    writer.write(
        b'{"jsonrpc":"2.0","method":"status"}\n{"jsonrpc":"2.0","id":7,"method":"status"}\n'
    )
    await writer.drain()
    reply = json.loads(await asyncio.wait_for(reader.readline(), 5))
    assert reply["id"] == 7
    writer.close()


async def test_batch_mixes_results_errors_and_notifications(daemon: DaemonHandle) -> None:
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "status"},
        {"jsonrpc": "2.0", "method": "status"},
        {"jsonrpc": "2.0", "id": 2, "method": "nope"},
        5,
    ]
    (reply,) = await raw_exchange(daemon.socket_path, json.dumps(batch).encode() + b"\n")
    assert isinstance(reply, list)
    assert len(reply) == 3
    by_id = {r["id"]: r for r in reply if r["id"] is not None}
    assert "result" in by_id[1]
    assert by_id[2]["error"]["code"] == -32601
    assert any(r["id"] is None and r["error"]["code"] == -32600 for r in reply)


async def test_batch_of_a_thousand(daemon: DaemonHandle) -> None:
    batch = [{"jsonrpc": "2.0", "id": i, "method": "settings.get"} for i in range(1_000)]
    (reply,) = await raw_exchange(daemon.socket_path, json.dumps(batch).encode() + b"\n")
    assert len(reply) == 1_000
    assert sorted(r["id"] for r in reply) == list(range(1_000))
    assert all("result" in r for r in reply)


async def test_line_over_the_cap_is_refused_and_the_connection_closed(short_tmp: Path) -> None:
    handle = await start_daemon(daemon_config(short_tmp, line_limit=4096))
    try:
        reader, writer = await asyncio.open_unix_connection(str(handle.socket_path))
        writer.write(b'{"jsonrpc":"2.0","id":1,"method":"status","params":{"x":"' + b"a" * 10_000)
        writer.write(b'"}}\n')
        await writer.drain()
        reply = json.loads(await asyncio.wait_for(reader.readline(), 5))
        assert reply["error"]["code"] == -32600
        assert "4096" in reply["error"]["message"]
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the daemon
        writer.close()
        assert (await handle.call("status"))["pid"] > 0
    finally:
        await stop_daemon(handle)


async def test_half_a_line_then_disconnect(daemon: DaemonHandle) -> None:
    _reader, writer = await asyncio.open_unix_connection(str(daemon.socket_path))
    writer.write(b'{"jsonrpc":"2.0","id":1,"meth')
    await writer.drain()
    writer.close()
    await writer.wait_closed()
    await asyncio.sleep(0.05)
    assert (await daemon.call("status"))["connections"] >= 1


async def test_five_hundred_connections_opened_and_dropped(daemon: DaemonHandle) -> None:
    def churn() -> None:
        for i in range(500):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(str(daemon.socket_path))
            if i % 2:
                sock.sendall(b'{"jsonrpc":"2.0","id":1,"method":"status"}\n')
            sock.close()

    await asyncio.to_thread(churn)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        status = await daemon.call("status")
        if status["connections"] == 1:  # only ours is left
            break
        await asyncio.sleep(0.05)
    assert status["connections"] == 1


async def test_a_slow_request_does_not_block_others_on_the_same_connection(
    daemon: DaemonHandle,
) -> None:
    client = await daemon.client()
    # 30 s: the status is answered while the sleep is still in flight, however loaded the
    # machine (timing the status failed under load). That a slow one answered later still
    # reaches its caller: test_replies_are_matched_by_id_when_out_of_order.
    slow = asyncio.create_task(client.call("test.sleep", {"seconds": 30.0}))
    try:
        await asyncio.sleep(0.05)
        await client.call("status")
        assert not slow.done()
        # The sleep was read before the status (both on one connection), and is still served.
        assert (await daemon.call("status"))["inflight"] >= 2  # the sleep and this status
    finally:
        slow.cancel()
        await client.close()


async def test_replies_are_matched_by_id_when_out_of_order(daemon: DaemonHandle) -> None:
    reader, writer = await asyncio.open_unix_connection(str(daemon.socket_path))
    writer.write(
        b'{"jsonrpc":"2.0","id":"slow","method":"test.sleep","params":{"seconds":0.5}}\n'
        b'{"jsonrpc":"2.0","id":"fast","method":"status"}\n'
    )
    await writer.drain()
    first = json.loads(await asyncio.wait_for(reader.readline(), 5))
    second = json.loads(await asyncio.wait_for(reader.readline(), 5))
    assert [first["id"], second["id"]] == ["fast", "slow"]
    writer.close()


async def test_unknown_events_are_named_cut_and_at_most_ten(daemon: DaemonHandle) -> None:
    # Found by a review: each unknown event was named whole, so a 17 MiB name made a reply
    # over the cap and the client got -32004 'ask for less' instead of -32602.
    long = "e" * (2 * 1024 * 1024)
    with pytest.raises(RpcError) as err:
        await daemon.call("subscribe", events=[long, "memory/saved"])
    assert err.value.code == -32602
    assert err.value.message.startswith(
        f"events: unknown event(s) {'e' * 200}… (2,097,152 characters); known: "
    )
    many = [f"x/{i:02d}" for i in range(30)]
    with pytest.raises(RpcError) as err:
        await daemon.call("subscribe", events=many)
    named = ", ".join(many[:10])
    assert f"unknown event(s) {named} and 20 more; known: " in err.value.message
    assert "x/10" not in err.value.message


async def test_notifications_reach_subscribers_only(daemon: DaemonHandle) -> None:
    subscriber = await daemon.client()
    bystander = await daemon.client()
    try:
        result = await subscriber.call("subscribe", {"events": ["memory/saved"]})
        assert result["subscribed"] == ["memory/saved"]
        await bystander.call("status")
        await daemon.daemon.notify("worker/error", {"worker": "x", "message": "ignored"})
        await daemon.daemon.notify("memory/saved", {"path": "/m/a.md", "project": "/p"})
        note = await subscriber.next_notification(5)
        assert note == {
            "jsonrpc": "2.0",
            "method": "memory/saved",
            "params": {"path": "/m/a.md", "project": "/p"},
        }
        assert bystander.notifications.empty()
        assert subscriber.notifications.empty()
    finally:
        await subscriber.close()
        await bystander.close()


async def test_a_subscriber_that_half_closes_gets_its_replies_then_is_closed(
    daemon: DaemonHandle,
) -> None:
    # The documented behaviour (docs/protocol.md, Notifications): end of input is the client
    # done, as Redis and Go's HTTP server take it. Kept open for notifications, a
    # half-closed client (socat, `nc -N`) could never be told apart from one gone, held a
    # descriptor and kept --idle-timeout from ever counting.
    reader, writer = await asyncio.open_unix_connection(str(daemon.socket_path))
    try:
        writer.write(
            b'{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"events":["memory/saved"]}}\n'
            b'{"jsonrpc":"2.0","id":2,"method":"status"}\n'
        )
        writer.write_eof()
        received = await asyncio.wait_for(reader.read(), 60)  # to the daemon's close
    finally:
        writer.close()
    replies = {r["id"]: r for r in map(json.loads, received.splitlines())}
    assert replies[1]["result"] == {"subscribed": ["memory/saved"]}
    assert replies[2]["result"]["pid"] > 0
    assert not any(c.wants("memory/saved") for c in daemon.daemon.connections)


async def test_connection_from_another_uid_is_dropped(short_tmp: Path) -> None:
    import os

    # The daemon admits one uid; pretend ours is not it.
    handle = await start_daemon(daemon_config(short_tmp, allowed_uid=os.getuid() + 4242))
    try:
        client = AsyncClient(handle.socket_path)
        await client.connect()
        with pytest.raises((ConnectionError, RpcError)):
            await client.call("status")
        await client.close()
        assert handle.daemon.counters["refused_peer"] >= 1
    finally:
        await stop_daemon(handle)  # its own client was refused too; closing it is harmless


async def test_an_unexpected_exception_is_an_internal_error_not_a_traceback(
    daemon: DaemonHandle,
) -> None:
    with pytest.raises(RpcError) as info:
        await daemon.call("test.boom", seconds=1)
    assert info.value.code == -32603
    assert "internal error in test.boom: RuntimeError" in info.value.message
    assert "exploded" not in info.value.message  # details go to the log only
    assert info.value.data is None
    assert "Traceback" not in info.value.message
    assert (await daemon.call("status"))["pid"] > 0


async def test_a_session_id_naming_the_memory_folder_is_refused(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    with pytest.raises(RpcError) as info:
        await daemon.call("compact", session_id="memory", cwd=str(tmp_path), messages=[])
    assert info.value.code == -32602
    assert "reserved" in info.value.message


async def test_a_subscriber_that_stops_reading_does_not_hold_up_the_others(
    daemon: DaemonHandle,
) -> None:
    reader, writer = await asyncio.open_unix_connection(str(daemon.socket_path))
    writer.write(b'{"jsonrpc":"2.0","id":1,"method":"subscribe"}\n')
    await writer.drain()
    await reader.readline()  # subscribed; from now on this client never reads
    listener = await daemon.client()
    await listener.call("subscribe", {"events": ["worker/error"]})
    big = "x" * (1 << 20)
    received = []
    for i in range(40):  # 40 MiB for the stalled client, over the cap
        await asyncio.wait_for(
            daemon.daemon.notify("worker/error", {"worker": f"w{i}", "message": big}), 5
        )
        received.append(await listener.next_notification(10))  # a healthy client keeps up
    assert [n["params"]["worker"] for n in received] == [f"w{i}" for i in range(40)]
    assert daemon.daemon.counters["slow_subscriber_closed"] == 1
    writer.close()
    await listener.close()


class BigParams(Params):
    size: int


async def _big(_daemon: Any, params: BigParams) -> dict[str, str]:
    return {"text": "x" * params.size}


async def test_a_subscriber_reading_a_large_reply_keeps_it_through_a_notification(
    short_tmp: Path,
) -> None:
    # The subscriber cap counted reply bytes: a reply larger than it, queued while the client
    # read it, plus one notification, and the connection was aborted, the reply lost.
    reply_limit = 24 << 20
    config = daemon_config(short_tmp, reply_limit=reply_limit)
    handle = await start_daemon(config, (method("test.big", BigParams, _big),))
    try:
        reader, writer = await asyncio.open_unix_connection(
            str(short_tmp / "d.sock"), limit=1 << 26
        )
        writer.write(b'{"jsonrpc":"2.0","id":1,"method":"subscribe"}\n')
        await reader.readline()
        size = 20 << 20
        writer.write(b'{"jsonrpc":"2.0","id":2,"method":"test.big","params":{"size":%d}}\n' % size)
        (connection,) = [c for c in handle.daemon.connections if c.subscriptions]
        # The client reads nothing until the reply waits in the daemon's buffer.
        async with asyncio.timeout(30):
            while connection.writer.transport.get_write_buffer_size() < size // 2:
                await asyncio.sleep(0.01)
        await handle.daemon.notify("worker/error", {"worker": "w", "message": "m"})
        got = [json.loads(await reader.readline()) for _ in range(2)]
        assert got[0]["id"] == 2
        assert len(got[0]["result"]["text"]) == size
        assert got[1]["method"] == "worker/error"
        assert handle.daemon.counters["slow_subscriber_closed"] == 0
        writer.close()
    finally:
        await stop_daemon(handle)


def test_a_socket_folder_others_can_write_is_refused(tmp_path: Path) -> None:
    from memoryd.daemon.server import StartupError, bind_socket

    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)
    with pytest.raises(StartupError, match="writable by other users"):
        bind_socket(folder / "d.sock")
    folder.chmod(0o1777)  # sticky, like /tmp: others cannot replace our socket
    bind_socket(folder / "d.sock")[0].close()


async def test_half_a_surrogate_pair_is_read_as_a_replacement_character(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    # A transcript string cut inside an emoji: JSON the stdlib reads, orjson refuses.
    (tmp_path / "proj").mkdir()
    line = (
        b'{"jsonrpc":"2.0","id":1,"method":"recall","params":{"cwd":"'
        + str(tmp_path / "proj").encode()
        + b'","query":"the \\ud83d deploy \\ud83d\\ude00"}}\n'
        + b'{"jsonrpc":"2.0","id":2,"method":"status","params":{"x":"\\ud800'
        + b'"\n'
    )
    replies = await raw_exchange(daemon.socket_path, line, replies=2)
    by_id = {r["id"]: r for r in replies}
    assert "result" in by_id[1], by_id[1]
    assert by_id[None]["error"]["code"] == -32700  # still not JSON: a parse error, as before


async def test_half_a_surrogate_pair_is_one_replacement_character_not_three(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    # Each half is one U+FFFD (docs/protocol.md), in keys and nested values too; a whole pair
    # escaped beside it stays the emoji. Encoding with surrogatepass and decoding with "replace"
    # made three (one per byte of the half).
    from memoryd.daemon.protocol.framing import parse_line

    parsed = parse_line(b'{"k\\udc00":["a\\ud83db",{"x":"\\ud83d\\ude80 \\udfff"}],"n":1}')
    assert parsed == {"k\ufffd": ["a\ufffdb", {"x": "\U0001f680 \ufffd"}], "n": 1}

    (tmp_path / "proj").mkdir()
    params = (
        b'{"cwd":"' + str(tmp_path / "proj").encode() + b'","type":"project",'
        b'"name":"Launch \\ud83d","description":"launch day","body":"launch"}'
    )
    line = b'{"jsonrpc":"2.0","id":1,"method":"memory.write","params":' + params + b"}\n"
    (reply,) = await raw_exchange(daemon.socket_path, line)
    text = Path(reply["result"]["path"]).read_text(encoding="utf-8")
    assert "name: Launch \ufffd\n" in text


async def test_an_id_with_half_a_surrogate_pair_is_echoed_as_sent(daemon: DaemonHandle) -> None:
    # JSON-RPC 2.0: the reply's id is the request's. The U+FFFD that stands for a lone half
    # in params went into the id too ("\ufffd" back for "\ud83d"): no reply matched.
    line = (
        b'{"jsonrpc":"2.0","id":"r\\ud83d","method":"rpc.methods"}\n'
        b'{"jsonrpc":"2.0","id":"\\udc00","method":"no.such","params":{"q":"\\ud800"}}\n'
        b'[{"jsonrpc":"2.0","id":"b\\ud800","method":"status"},{"jsonrpc":"2.0","id":"c",'
        b'"method":"status","params":{"x":"\\ud800"}}]\n'
    )
    replies = await raw_exchange(daemon.socket_path, line, replies=3)
    singles = {r["id"]: r for r in replies if isinstance(r, dict)}
    assert "methods" in singles["r\ud83d"]["result"]
    assert singles["\udc00"]["error"]["code"] == -32601
    (batch,) = [r for r in replies if isinstance(r, list)]
    by_id = {r["id"]: r for r in batch}
    assert "pid" in by_id["b\ud800"]["result"]
    assert "x" in by_id["c"]["error"]["message"]  # the batch's other member, answered as ever


async def test_a_deep_line_with_half_a_surrogate_pair_is_a_parse_error(
    daemon: DaemonHandle,
) -> None:
    # Replacing the halves recurses as deep as the line nests: past Python's limit that is a
    # parse error, not a RecursionError out of the connection's reading loop.
    deep = b"[" * 600 + b'"\\ud83d"' + b"]" * 600
    line = b'{"jsonrpc":"2.0","id":1,"method":"status","params":{"a":' + deep + b"}}\n"
    line += b'{"jsonrpc":"2.0","id":2,"method":"status"}\n'
    by_id = {r["id"]: r for r in await raw_exchange(daemon.socket_path, line, replies=2)}
    assert by_id[None]["error"]["code"] == -32700
    assert "pid" in by_id[2]["result"]


async def test_nan_infinity_and_a_bom_are_refused_beside_half_a_surrogate_pair(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    # The stdlib reading that takes half a surrogate pair took NaN, Infinity, 1e999 and a
    # BOM too, which orjson refuses; settings.set then wrote `NaN` into settings.json.
    half = b'"\\ud83d"'
    bodies = [
        b'{"key":"statusLine","value":{"v":NaN,"note":' + half + b"}}",
        b'{"key":"statusLine","value":{"v":-Infinity,"note":' + half + b"}}",
        b'{"key":"statusLine","value":{"v":1e999,"note":' + half + b"}}",
    ]
    lines = [
        b'{"jsonrpc":"2.0","id":1,"method":"settings.set","params":' + b + b"}\n" for b in bodies
    ]
    lines.append(
        b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"method":"status","params":{"x":' + half + b"}}\n"
    )
    for line in lines:
        (reply,) = await raw_exchange(daemon.socket_path, line)
        assert reply["error"]["code"] == -32700, (line, reply)
    settings = Path(os.environ["HOME"]) / ".claude" / "settings.json"
    assert not settings.exists() or "NaN" not in settings.read_text()


async def test_an_integer_id_beyond_64_bits_is_echoed_exactly(daemon: DaemonHandle) -> None:
    # orjson reads such an integer as a float; the reply must carry the id as sent.
    ids = [123456789012345678901234567890, -9223372036854775809, 2**64]
    line = b"".join(
        b'{"jsonrpc":"2.0","id":%d,"method":"status"}\n' % id_ for id_ in ids
    ) + b'[{"jsonrpc":"2.0","id":%d,"method":"status"}]\n' % (2**70)
    replies = await raw_exchange(daemon.socket_path, line, replies=4)
    assert sorted(r["id"] for r in replies[:3]) == sorted(ids)
    assert replies[3][0]["id"] == 2**70
    assert "result" in replies[3][0]


async def test_a_refused_line_does_not_drop_replies_to_the_lines_before_it(
    short_tmp: Path,
) -> None:
    # Found by a bug hunt: the connection was half-closed as soon as the over-cap line was
    # answered, so the reply to a request still running from before it was never sent.
    from tests.daemon.conftest import TEST_METHODS

    handle = await start_daemon(daemon_config(short_tmp, line_limit=4096), TEST_METHODS)
    try:
        reader, writer = await asyncio.open_unix_connection(str(handle.socket_path))
        writer.write(b'{"jsonrpc":"2.0","id":1,"method":"test.sleep","params":{"seconds":0.3}}\n')
        writer.write(b'{"jsonrpc":"2.0","id":2,"method":"status","params":{"x":"')
        writer.write(b"a" * 10_000 + b'"}}\n')
        await writer.drain()
        rest = await asyncio.wait_for(reader.read(), 10)  # up to the daemon's close
        replies = [json.loads(line) for line in rest.splitlines()]
        assert replies[0]["error"]["code"] == -32600
        assert replies[1:] == [{"jsonrpc": "2.0", "id": 1, "result": {"slept": 0.3}}]
        writer.close()
    finally:
        await stop_daemon(handle)


async def test_an_error_without_data_has_no_data_member(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    # Found by a bug hunt: handler errors went out with "data": null, where docs/protocol.md's
    # examples (and JSON-RPC, which lets it be left out) have none.
    (tmp_path / "proj").mkdir()
    line = (
        b'{"jsonrpc":"2.0","id":7,"method":"memory.read","params":{"cwd":"'
        + str(tmp_path / "proj").encode()
        + b'","path":"nothing_here.md"}}\n'
    )
    (reply,) = await raw_exchange(daemon.socket_path, line)
    assert reply["error"]["code"] in (-32001, -32002), reply
    assert "data" not in reply["error"], reply


async def test_an_empty_event_list_subscribes_to_none_and_unsubscribes(
    daemon: DaemonHandle,
) -> None:
    # Found by a bug hunt: `events: []` subscribed to every event, and nothing unsubscribed.
    client = await daemon.client()
    try:
        assert len((await client.call("subscribe", {}))["subscribed"]) == 7  # no list: all
        assert (await client.call("subscribe", {"events": []}))["subscribed"] == []
        await daemon.daemon.notify("memory/saved", {"path": "/m/a.md", "project": "/p"})
        await client.call("status")  # anything sent before this reply would be queued by now
        assert client.notifications.empty()
    finally:
        await client.close()


async def test_a_huge_method_name_or_id_gets_a_small_reply(daemon: DaemonHandle) -> None:
    # Found by a bug hunt: a 17 MiB method name came back whole in -32601 (message and data),
    # so the reply went over the 16 MiB cap and became a -32004 that echoed it yet again; a
    # 17 MiB id, which a reply must echo whole, made every reply to it -32004.
    huge = 17 * 1024 * 1024
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "m" * huge},
        [{"jsonrpc": "2.0", "id": 2, "method": "m" * huge}],
        {"jsonrpc": "2.0", "id": "i" * huge, "method": "status"},
        {"jsonrpc": "2.0", "id": 3, "method": "status", "x" * huge: 1},
        {"jsonrpc": "2.0", "id": 4, "method": "status", "params": {"p" * huge: 1}},
    ]
    replies = []
    for line in lines:
        (reply,) = await raw_exchange(daemon.socket_path, json.dumps(line).encode() + b"\n")
        assert len(json.dumps(reply)) < 1_000
        replies.append(reply)
    single, (in_batch,) = replies[0], replies[1]
    for reply, id_ in ((single, 1), (in_batch, 2)):
        assert (reply["error"]["code"], reply["id"]) == (-32601, id_)
        cut = "m" * 200 + f"… ({huge:,} characters)"
        assert reply["error"]["message"] == f"method not found: {cut}"
        assert reply["error"]["data"] == cut
    long_id, member, field = replies[2:]
    assert long_id == {
        "jsonrpc": "2.0",
        "error": {
            "code": -32600,
            "message": f"invalid request: id: at most 1,024 characters, got {huge:,}",
        },
        "id": None,
    }
    assert (member["error"]["code"], member["id"]) == (-32600, 3)
    assert (field["error"]["code"], field["id"]) == (-32602, 4)
    # An id at the cap is echoed as sent.
    at_cap = "i" * 1_024
    (reply,) = await raw_exchange(
        daemon.socket_path,
        json.dumps({"jsonrpc": "2.0", "id": at_cap, "method": "status"}).encode() + b"\n",
    )
    assert reply["id"] == at_cap
    assert "result" in reply


async def test_many_unknown_fields_are_counted_not_listed(daemon: DaemonHandle) -> None:
    # Found in review: each field name an error repeats was cut, not their number: 600,000
    # unknown fields made a 27 MB -32602, over the reply cap, so the client got -32004. 60,000
    # tell it as surely (a 2.7 MB message naming field20), in a tenth of the time.
    params = {"cwd": "/tmp", "path": "x.md", **{f"field{i}": 1 for i in range(60_000)}}
    line = {"jsonrpc": "2.0", "id": 5, "method": "memory.history", "params": params}
    (reply,) = await raw_exchange(daemon.socket_path, json.dumps(line).encode() + b"\n")
    assert (reply["error"]["code"], reply["id"]) == (-32602, 5)
    message = reply["error"]["message"]
    assert message.startswith("invalid params: field0: Extra inputs are not permitted; field1:")
    assert "field19: Extra inputs are not permitted; and 59,980 more" in message
    assert "field20" not in message


def test_a_reply_the_stdlib_encodes_keeps_utf8_and_writes_no_nan() -> None:
    # A non-UTF-8 file name sends a reply through the stdlib: it escaped every non-ASCII
    # character (6 MB of emoji became 18 MB, over the reply cap) and wrote NaN, not JSON.
    name = os.fsdecode(b"r\xe9gle.md")
    line = encode_one({"path": name, "text": "café 🙂", "score": float("nan"), "n": 2**70})
    assert (
        line
        == '{"path":"r\\udce9gle.md","text":"café 🙂","score":null,"n":1180591620717411303424}'.encode()
    )
    assert json.loads(line, parse_constant=lambda c: pytest.fail(c))["path"] == name
