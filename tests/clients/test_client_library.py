"""The Python client library: one typed method per RPC, sync and async, stdlib only."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from memoryd.core.model_config import ModelConfig
from memoryd.core.team_config import TeamConfig
from memoryd.daemon.main import build_config, parse_args
from memoryd_client import AsyncClient, Client, RpcError, default_socket_path
from tests.clients.conftest import memctl_env, run_memctl
from tests.clients.fake_daemon import FakeDaemon
from tests.conftest import DaemonHandle, daemon_config, start_daemon, stop_daemon

# (method, args, kwargs, rpc name, params the daemon must receive)
CASES: list[tuple[str, tuple[Any, ...], dict[str, Any], str, dict[str, Any] | None]] = [
    (
        "get_context",
        ("/p",),
        {"session_id": "s", "touched_paths": ("/p/a",)},
        "get_context",
        {"cwd": "/p", "session_id": "s", "touched_paths": ["/p/a"]},
    ),
    ("get_context", ("/p",), {}, "get_context", {"cwd": "/p"}),
    (
        "recall",
        ("/p", "q"),
        {"limit": 2, "recent_tools": ["Read"], "already_surfaced": ["/m/a.md"]},
        "recall",
        {
            "cwd": "/p",
            "query": "q",
            "limit": 2,
            "recent_tools": ["Read"],
            "already_surfaced": ["/m/a.md"],
        },
    ),
    (
        "after_tool",
        ("s", "/p"),
        {"tool": "Read", "read_paths": ["/p/x.md"]},
        "after_tool",
        {"session_id": "s", "cwd": "/p", "tool": "Read", "read_paths": ["/p/x.md"]},
    ),
    (
        "after_turn",
        ("s", "/p", [{"role": "user", "content": "hi"}]),
        {"read_paths": ["/p/x.md"], "usage": {"input_tokens": 3}},
        "after_turn",
        {
            "session_id": "s",
            "cwd": "/p",
            "messages": [{"role": "user", "content": "hi"}],
            "read_paths": ["/p/x.md"],
            "usage": {"input_tokens": 3},
        },
    ),
    ("compact", ("s", "/p", []), {}, "compact", {"session_id": "s", "cwd": "/p", "messages": []}),
    ("memory_list", ("/p",), {}, "memory.list", {"cwd": "/p"}),
    ("memory_read", ("/p", "/m/a.md"), {}, "memory.read", {"cwd": "/p", "path": "/m/a.md"}),
    (
        "memory_write",
        ("/p",),
        {"type": "user", "name": "n", "description": "d", "body": "b", "team": True},
        "memory.write",
        {"cwd": "/p", "type": "user", "name": "n", "description": "d", "body": "b", "team": True},
    ),
    ("memory_delete", ("/p", "/m/a.md"), {}, "memory.delete", {"cwd": "/p", "path": "/m/a.md"}),
    ("memory_history", ("/p", "/m/a.md"), {}, "memory.history", {"cwd": "/p", "path": "/m/a.md"}),
    (
        "memory_restore",
        ("/p", "/m/a.md", "v1"),
        {},
        "memory.restore",
        {"cwd": "/p", "path": "/m/a.md", "version": "v1"},
    ),
    (
        "memory_remember",
        ("/p", "we deploy on fridays"),
        {"type": "project"},
        "memory.remember",
        {"cwd": "/p", "text": "we deploy on fridays", "type": "project"},
    ),
    ("memory_reconcile", ("/p",), {}, "memory.reconcile", {"cwd": "/p"}),
    ("memory_snapshot", ("/p", "a.md"), {}, "memory.snapshot", {"cwd": "/p", "path": "a.md"}),
    ("memory_dream", ("/p",), {"wait": False}, "memory.dream", {"cwd": "/p", "wait": False}),
    ("magicdocs_list", (), {}, "magicdocs.list", {}),
    ("includes_approve", ("/p",), {}, "includes.approve", {"cwd": "/p"}),
    ("includes_revoke", ("/p",), {}, "includes.revoke", {"cwd": "/p"}),
    ("includes_list", ("/p",), {}, "includes.list", {"cwd": "/p"}),
    ("rpc_methods", (), {}, "rpc.methods", {}),
    ("settings_get", (), {}, "settings.get", {}),
    (
        "settings_set",
        ("autoDreamEnabled", False),
        {},
        "settings.set",
        {"key": "autoDreamEnabled", "value": False},
    ),
    ("team_status", ("/p",), {}, "team.status", {"cwd": "/p"}),
    ("team_pull", ("/p",), {}, "team.pull", {"cwd": "/p"}),
    ("team_push", ("/p",), {}, "team.push", {"cwd": "/p"}),
    ("subscribe", (["memory/saved"],), {}, "subscribe", {"events": ["memory/saved"]}),
    ("status", (), {}, "status", {}),
    ("shutdown", (), {}, "shutdown", {}),
]


@pytest.mark.parametrize(("method", "args", "kwargs", "rpc", "params"), CASES)
def test_each_method_sends_its_rpc(
    fake_daemon: FakeDaemon,
    method: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    rpc: str,
    params: dict[str, Any],
) -> None:
    if rpc != "subscribe":
        fake_daemon.on(rpc, {"ok": rpc})
    with Client(fake_daemon.socket_path, timeout=10) as conn:
        result = getattr(conn, method)(*args, **kwargs)
    assert fake_daemon.requests[-1] == (rpc, params)
    if rpc != "subscribe":
        assert result == {"ok": rpc}


def test_every_rpc_of_the_daemon_has_a_method() -> None:
    from memoryd.daemon.wiring import rpc_methods

    names = {case[3] for case in CASES}
    served = {
        n for n, spec in rpc_methods().items() if spec.handler.__module__.startswith("memoryd.")
    }
    missing = sorted(served - names)  # other tests may register test-only methods
    assert missing == [], f"client methods missing for {missing}"


def test_async_methods_are_the_sync_methods_generated() -> None:
    """AsyncMethods is SyncMethods with `async def` and `await self.call` (scripts/gen_client_methods.py)."""
    import ast
    import importlib.util

    script = Path(__file__).resolve().parents[2] / "scripts" / "gen_client_methods.py"
    spec = importlib.util.spec_from_file_location("gen_client_methods", script)
    assert spec is not None
    assert spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    tree = ast.parse(gen.METHODS.read_text(encoding="utf-8"))
    expected = ast.dump(gen.async_from_sync(tree), include_attributes=False)
    assert ast.dump(gen._class(tree, "AsyncMethods"), include_attributes=False) == expected


async def test_async_methods_against_the_real_daemon(daemon: DaemonHandle, tmp_path: Path) -> None:
    async with AsyncClient(daemon.socket_path) as conn:
        status = await conn.status()
        assert status["pid"] > 0
        methods = await conn.rpc_methods()
        assert "memory.list" in methods["methods"]
        subscribed = await conn.subscribe(["memory/saved"])
        assert subscribed == {"subscribed": ["memory/saved"]}
        await conn.settings_set("autoDreamEnabled", True)
        settings = await conn.settings_get(str(tmp_path))
        assert settings["settings"]["autoDreamEnabled"] is True
        assert settings["sources"]["autoDreamEnabled"] == "user"
        with pytest.raises(RpcError) as info:
            await conn.settings_get("relative")
        assert info.value.code == -32602
        await daemon.daemon.notify("memory/saved", {"path": "/m/x.md", "project": "/p"})
        note = await conn.next_notification(10)
        assert note["params"]["path"] == "/m/x.md"


async def test_async_call_that_times_out_forgets_its_request(fake_daemon: FakeDaemon) -> None:
    fake_daemon.delays["status"] = 1.0
    async with AsyncClient(fake_daemon.socket_path, timeout=0.05) as conn:
        with pytest.raises(TimeoutError):
            await conn.status()
        assert conn._pending == {}  # before: one future left per timed-out call, forever


def test_sync_poll_notification(fake_daemon: FakeDaemon) -> None:
    with Client(fake_daemon.socket_path, timeout=10) as conn:
        conn.subscribe()
        assert conn.poll_notification(0.01) is None
        fake_daemon.notify("memory/saved", {"path": "/m/a.md"})
        got = conn.poll_notification(5)
        assert got is not None
        assert got["method"] == "memory/saved"
        assert conn.status()["version"] == "fake"  # the connection still works after polling


def test_sync_notifications_read_during_a_call_come_out_in_order(fake_daemon: FakeDaemon) -> None:
    with Client(fake_daemon.socket_path, timeout=10) as conn:
        conn.subscribe()
        fake_daemon.wait_for_subscriber()
        # A hundred: the fake daemon sends them before anything reads, and the socket's buffer
        # holds only so many small writes.
        for index in range(100):
            fake_daemon.notify("memory/saved", {"path": f"/m/{index}.md"})
        assert conn.status()["version"] == "fake"  # read past the flood, which is queued
        # Taken from the front in constant time (a list's pop(0) moved the rest each time: a
        # flood of n cost n² moves).
        assert isinstance(conn.notifications, collections.deque)
        polled = [conn.poll_notification(0) for _ in range(50)]
        nexts = [conn.next_notification() for _ in range(50)]
        paths = [note["params"]["path"] for note in polled + nexts if note is not None]
        assert paths == [f"/m/{index}.md" for index in range(100)]
        assert conn.poll_notification(0.01) is None


def test_clients_import_nothing_heavy() -> None:
    """memoryd_client and memctl import without pydantic, anthropic or memoryd; memctl never loads mcp."""
    code = (
        "import sys\n"
        "for name in ('pydantic', 'anthropic', 'memoryd', 'mcp', 'jsonrpcserver', 'structlog'):\n"
        "    sys.modules[name] = None\n"
        "import memoryd_client, memoryd_client.methods, memoryd_client.types\n"
        "from memctl.__main__ import build_parser\n"
        "build_parser()\n"
        "import memctl.memory_menu, memctl.claude_code, memctl.notifications\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=memctl_env(),
        timeout=30,
        check=False,
    )
    assert done.stdout.strip() == "ok", done.stderr


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
async def test_nan_and_infinity_are_refused_before_sending(
    fake_daemon: FakeDaemon, value: float
) -> None:
    # Found by a bug hunt: json.dumps wrote NaN / Infinity, which are not JSON, and the caller
    # got the daemon's -32700 "parse error … column 77" about a line it never wrote.
    with Client(fake_daemon.socket_path, timeout=10) as conn:
        with pytest.raises(ValueError, match="not JSON"):
            conn.settings_set("x", value)
        assert conn.status()["version"] == "fake"  # the connection is still in step
    async with AsyncClient(fake_daemon.socket_path, timeout=10) as aconn:
        with pytest.raises(ValueError, match="not JSON"):
            await aconn.settings_set("x", value)
        assert aconn._pending == {}
        assert (await aconn.status())["version"] == "fake"
    assert fake_daemon.calls("settings.set") == []


@pytest.mark.parametrize(
    "params", ['{"key":"x","value":NaN}', '{"value":-Infinity}', '{"v":1e999}']
)
def test_memctl_call_refuses_params_that_are_not_json(fake_daemon: FakeDaemon, params: str) -> None:
    # Python's json.loads takes NaN, Infinity and 1e999 (as inf); the daemon does not.
    done = run_memctl("--socket", str(fake_daemon.socket_path), "call", "settings.set", params)
    assert done.returncode == 2, done.stderr
    assert "params is not valid JSON" in done.stderr
    assert "-32700" not in done.stderr
    assert fake_daemon.requests == []


def test_memctl_call_reads_params_from_standard_input_for_a_dash(fake_daemon: FakeDaemon) -> None:
    # docs/clients.md: text given to `call` may come from standard input for `-`; "-" was
    # parsed as JSON ("params is not valid JSON"), so params over an argument's 128 KiB
    # could not be given at all.
    fake_daemon.on("memory.write", {"path": "/m/x.md", "created": True, "warnings": []})
    body = "x" * 200_000
    params = json.dumps(
        {"cwd": "/p", "name": "n", "description": "d", "type": "user", "body": body}
    )
    done = run_memctl(
        "--socket", str(fake_daemon.socket_path), "call", "memory.write", "-", stdin=params
    )
    assert done.returncode == 0, done.stderr
    assert fake_daemon.calls("memory.write")[0]["body"] == body


async def test_async_call_over_the_line_cap_gets_the_daemons_error(
    short_tmp: Path, tmp_path: Path
) -> None:
    # Found by a bug hunt: the daemon answers a line over its cap with -32600 and "id": null,
    # then closes; AsyncClient dropped it, and the call failed with DaemonUnavailable("memoryd
    # closed the connection") (memoryd-mcp then told the model memoryd was not running).
    handle = await start_daemon(daemon_config(short_tmp, line_limit=4096))
    try:
        async with AsyncClient(handle.socket_path, timeout=30) as conn:
            with pytest.raises(RpcError) as info:
                await conn.memory_write(
                    str(tmp_path), type="user", name="big", description="d", body="x" * 10_000
                )
            assert info.value.code == -32600
            assert "4096-byte cap" in info.value.message  # the answer, not the 30 s timeout

        def sync_write() -> None:  # the sync client says the same
            with Client(handle.socket_path, timeout=30) as sync:
                sync.memory_write(
                    str(tmp_path), type="user", name="big", description="d", body="x" * 10_000
                )

        with pytest.raises(RpcError, match="4096-byte cap"):
            await asyncio.to_thread(sync_write)
    finally:
        await stop_daemon(handle)


async def test_async_error_without_an_id_fails_the_calls_in_flight(short_tmp: Path) -> None:
    """A scripted daemon: a line holding "slow" is never answered, "refuse" gets an id-null
    -32600 and the connection closes after a moment, anything else its reply."""
    path = short_tmp / "scripted.sock"
    writers: list[asyncio.StreamWriter] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        while line := await reader.readline():
            request = json.loads(line)
            if request["method"] == "slow":
                continue
            if request["method"] == "refuse":
                error = {"code": -32600, "message": "request line over the 9-byte cap"}
                writer.write(json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode())
                writer.write(b"\n")
                await asyncio.sleep(0.3)
                break
            writer.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": 1}).encode())
            writer.write(b"\n")
        writer.close()

    server = await asyncio.start_unix_server(serve, str(path))
    try:
        async with AsyncClient(path, timeout=20) as conn:
            slow = asyncio.create_task(conn.call("slow"))
            await asyncio.sleep(0.1)
            refused = asyncio.create_task(conn.call("refuse"))
            await asyncio.sleep(0.1)
            late = asyncio.create_task(conn.call("slow"))  # sent after the error, before the close
            results = await asyncio.wait_for(
                asyncio.gather(slow, refused, late, return_exceptions=True), 5
            )
            for result in results:  # each the daemon's reason, none waiting out its timeout
                assert isinstance(result, RpcError), result
                assert result.code == -32600
        async with AsyncClient(path, timeout=20) as conn:
            with pytest.raises(RpcError):
                await conn.call("refuse")
        # An id-null error on a connection that goes on is forgotten once a later call is
        # answered: the connection closing later is DaemonUnavailable, not that old error.
        async with AsyncClient(path, timeout=20) as conn:
            conn._unmatched_error = {"code": -32700, "message": "parse error"}
            assert await conn.call("status") == 1
            assert conn._unmatched_error is None
    finally:
        server.close()
        for writer in writers:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        await server.wait_closed()


async def test_a_relative_memoryd_socket_is_made_absolute(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by a bug hunt: MEMORYD_SOCKET=run/d.sock was reported as it was in status.socket
    # and the status file (PROTOCOL.md: every path in results is absolute), so a client in
    # another folder could not find the daemon from what they said.
    monkeypatch.chdir(short_tmp)
    monkeypatch.setenv("MEMORYD_SOCKET", "run/d.sock")
    assert default_socket_path() == short_tmp / "run" / "d.sock"
    monkeypatch.setenv("MEMORYD_SOCKET", "~/d.sock")
    assert default_socket_path() == Path.home() / "d.sock"
    monkeypatch.setenv("MEMORYD_SOCKET", "run/d.sock")
    config = build_config(parse_args([]))  # what `memoryd` with no --socket runs with
    handle = await start_daemon(replace(config, model=ModelConfig(), team=TeamConfig()))
    try:
        monkeypatch.chdir("/")
        expected = str(short_tmp / "run" / "d.sock")
        assert (await handle.call("status"))["socket"] == expected
        status_file = short_tmp / "run" / "d.sock.status.json"
        assert json.loads(status_file.read_text())["socket"] == expected
    finally:
        await stop_daemon(handle)


def test_a_relative_xdg_base_directory_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by a bug hunt: XDG_RUNTIME_DIR=run put the socket under whatever folder the daemon
    # started in, so `memctl status` from anywhere else said "not running". The XDG spec has
    # a relative base directory ignored.
    from memoryd_client import paths

    monkeypatch.delenv("MEMORYD_SOCKET", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_RUNTIME_DIR", "run")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert default_socket_path("linux") == tmp_path / "cache" / "memoryd" / "memoryd.sock"
    monkeypatch.setenv("XDG_STATE_HOME", "state")
    assert paths.state_dir() == tmp_path / ".local" / "state" / "memoryd"
