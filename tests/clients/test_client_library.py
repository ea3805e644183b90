"""The Python client library: one typed method per RPC, sync and async, stdlib only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memoryd_client import AsyncClient, Client, RpcError
from tests.clients.conftest import memctl_env, run_memctl
from tests.clients.fake_daemon import FakeDaemon
from tests.conftest import DaemonHandle

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
