"""`memoryd-mcp` driven by the official MCP SDK's own stdio client."""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from memoryd_client.version import build_version
from tests.clients.conftest import memctl_env
from tests.clients.fake_daemon import FakeDaemon, FakeError


@asynccontextmanager
async def mcp_session(
    socket_path: Path, cwd: Path, env: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memoryd_client.mcp_server", "--socket", str(socket_path)],
        env=env or memctl_env(),
        cwd=str(cwd),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def read_line(stream: IO[bytes], timeout: float) -> Any:
    """The next JSON line on a subprocess's pipe, or a failure after `timeout`."""
    buffered = b""
    deadline = time.monotonic() + timeout
    while not buffered.endswith(b"\n"):
        ready, _, _ = select.select([stream], [], [], max(deadline - time.monotonic(), 0))
        if not ready:
            pytest.fail(f"no reply within {timeout} s (got {buffered!r})")
        byte = os.read(stream.fileno(), 1)  # not stream.read: its buffer hides bytes from select
        if not byte:
            pytest.fail(f"the server closed its stdout (got {buffered!r})")
        buffered += byte
    return json.loads(buffered)


def start_server(socket_path: Path, cwd: Path) -> subprocess.Popen[bytes]:
    """`memoryd-mcp` as a process with pipes, for tests that write the wire themselves."""
    return subprocess.Popen(
        [sys.executable, "-m", "memoryd_client.mcp_server", "--socket", str(socket_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=memctl_env(),
        cwd=str(cwd),
    )


def exchange(socket_path: Path, cwd: Path, lines: list[str], count: int) -> list[Any]:
    """The first `count` replies of a server sent `initialize` (id 1), then `lines` as written."""
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    handshake = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ]
    proc = start_server(socket_path, cwd)
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        proc.stdin.write(("\n".join(handshake + lines) + "\n").encode())
        proc.stdin.flush()
        return [read_line(proc.stdout, timeout=15) for _ in range(count)]
    finally:
        proc.kill()
        proc.communicate()


def payload(result: Any) -> Any:
    assert not result.is_error, result.content
    text = result.content[0].text
    try:
        return json.loads(text)
    except ValueError:
        return text


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    path.mkdir()
    return path


async def test_tools_are_listed_with_schemas(fake_daemon: FakeDaemon, project: Path) -> None:
    async with mcp_session(fake_daemon.socket_path, project) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == {"recall", "remember", "list", "read"}
    remember = tools["remember"].input_schema
    assert set(remember["required"]) == {"type", "name", "description", "body"}
    assert "feedback" in json.dumps(remember["properties"]["type"])


async def test_recall_remember_list_read(
    fake_daemon: FakeDaemon, project: Path, tmp_path: Path
) -> None:
    memdir = tmp_path / "memdir"
    fake_daemon.on(
        "recall",
        {
            "selector": "local",
            "memories": [
                {
                    "path": str(memdir / "a.md"),
                    "name": "A",
                    "type": "user",
                    "description": "d",
                    "note": None,
                    "content": "likes tea",
                    "mtime": 1.0,
                }
            ],
        },
    )
    fake_daemon.on(
        "memory.write", lambda p: {"path": str(memdir / "feedback_x.md"), "created": True}
    )
    fake_daemon.on(
        "memory.list",
        {
            "memory_dir": str(memdir),
            "team_dir": str(memdir / "team"),
            "memories": [
                {
                    "path": str(memdir / "a.md"),
                    "name": "A",
                    "type": "user",
                    "description": "d",
                    "team": False,
                    "mtime": 1.0,
                }
            ],
            "instruction_files": [{"path": str(project / "CLAUDE.md"), "type": "Project"}],
        },
    )
    fake_daemon.on(
        "memory.read",
        lambda p: {
            "path": p["path"],
            "content": f"content of {Path(p['path']).name}",
            "frontmatter": {},
        },
    )
    async with mcp_session(fake_daemon.socket_path, project) as session:
        recalled = payload(await session.call_tool("recall", {"query": "drinks", "limit": 3}))
        saved = payload(
            await session.call_tool(
                "remember",
                {
                    "type": "feedback",
                    "name": "X",
                    "description": "one line",
                    "body": "Do X.\nWhy: y\nHow to apply: z",
                },
            )
        )
        listed = payload(await session.call_tool("list", {}))
        by_name = payload(await session.call_tool("read", {"path": "a.md"}))
        by_path = payload(await session.call_tool("read", {"path": str(memdir / "b.md")}))
    assert recalled["memories"][0]["content"] == "likes tea"
    assert fake_daemon.calls("recall") == [{"cwd": str(project), "query": "drinks", "limit": 3}]
    assert saved == {"path": str(memdir / "feedback_x.md"), "created": True}
    write = fake_daemon.calls("memory.write")[0]
    assert write == {
        "cwd": str(project),
        "type": "feedback",
        "name": "X",
        "description": "one line",
        "body": "Do X.\nWhy: y\nHow to apply: z",
    }
    assert listed["memories"][0]["name"] == "A"
    assert listed["instruction_files"] == [{"path": str(project / "CLAUDE.md"), "type": "Project"}]
    assert by_name == "content of a.md"
    assert by_path == "content of b.md"
    assert [c["path"] for c in fake_daemon.calls("memory.read")] == [
        str(memdir / "a.md"),
        str(memdir / "b.md"),
    ]


async def test_errors_are_tool_errors(
    fake_daemon: FakeDaemon, project: Path, short_tmp: Path
) -> None:
    def forbidden(_: dict[str, Any]) -> Any:
        raise FakeError(-32002, "path is outside the memory directory")

    fake_daemon.on("memory.read", forbidden)
    async with mcp_session(fake_daemon.socket_path, project) as session:
        denied = await session.call_tool("read", {"path": "/etc/passwd"})
        bad_type = await session.call_tool(
            "remember", {"type": "secret", "name": "n", "description": "d", "body": "b"}
        )
        bad_cwd = await session.call_tool("list", {"cwd": "relative/dir"})
        empty = await session.call_tool("recall", {"query": "   "})
    assert denied.is_error
    assert "outside the memory directory" in denied.content[0].text
    assert bad_type.is_error
    assert bad_cwd.is_error
    assert "absolute directory" in bad_cwd.content[0].text
    assert empty.is_error
    assert "must not be empty" in empty.content[0].text
    assert fake_daemon.calls("memory.write") == []

    async with mcp_session(short_tmp / "nobody.sock", project) as session:
        down = await session.call_tool("recall", {"query": "x"})
    assert down.is_error
    # Before: "Error executing tool recall: memoryd is not running: memoryd is not running on …"
    assert down.content[0].text.count("memoryd is not running") == 1
    assert "nobody.sock" in down.content[0].text


async def test_server_reports_its_version_and_clamps_the_recall_limit(
    fake_daemon: FakeDaemon, project: Path
) -> None:
    fake_daemon.on("recall", {"selector": "local", "memories": []})
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memoryd_client.mcp_server", "--socket", str(fake_daemon.socket_path)],
        env=memctl_env(),
        cwd=str(project),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        initialized = await session.initialize()
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        high = await session.call_tool("recall", {"query": "x", "limit": 9})
        low = await session.call_tool("recall", {"query": "x", "limit": 0})
    assert initialized.server_info.name == "memoryd"
    # Read now, as the server read it: a checkout's version names its commit (memoryd's
    # __version__, read once, may be older than a commit made since in a shared checkout).
    assert initialized.server_info.version == build_version()
    # The model is told the range up front, and a value outside it still gets an answer.
    assert "1–5" in tools["recall"].input_schema["properties"]["limit"]["description"]
    assert not high.is_error, high.content
    assert not low.is_error, low.content
    assert [c["limit"] for c in fake_daemon.calls("recall")] == [5, 1]


async def test_remember_passes_the_daemons_warning_on(
    fake_daemon: FakeDaemon, project: Path
) -> None:
    warning = "saved, but it looks like it holds a secret (body line 1 matches secret rule jwt)"
    fake_daemon.on(
        "memory.write",
        {"path": "/m/user_x.md", "created": True, "warnings": [warning], "secrets": []},
    )
    async with mcp_session(fake_daemon.socket_path, project) as session:
        saved = payload(
            await session.call_tool(
                "remember", {"type": "user", "name": "X", "description": "d", "body": "b"}
            )
        )
    assert saved == {"path": "/m/user_x.md", "created": True, "warnings": [warning]}


async def test_a_socket_that_is_not_memoryd_is_named_not_called_down(
    project: Path, short_tmp: Path
) -> None:
    path = short_tmp / "web.sock"

    async def web(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        writer.write(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        await writer.drain()
        await reader.read()  # and keep the connection open
        writer.close()

    server = await asyncio.start_unix_server(web, str(path))
    try:
        async with mcp_session(path, project) as session:
            result = await session.call_tool("list", {})
    finally:
        server.close()
    assert result.is_error
    text = result.content[0].text
    # Before: "memoryd is not running: memoryd closed the connection" (it did neither).
    assert f"what answers on {path} is not memoryd" in text
    assert "HTTP/1.1 400" in text
    assert "not running" not in text


@pytest.mark.parametrize("how", ["flag", "env"])
async def test_a_relative_default_project_is_taken_from_the_start_directory(
    fake_daemon: FakeDaemon, tmp_path: Path, project: Path, how: str
) -> None:
    fake_daemon.on("memory.list", {"memory_dir": "/m", "memories": [], "instruction_files": []})
    args = ["-m", "memoryd_client.mcp_server", "--socket", str(fake_daemon.socket_path)]
    env = memctl_env()
    if how == "flag":
        args += ["--cwd", "proj"]
    else:
        env["MEMORYD_MCP_CWD"] = "proj"
    params = StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(tmp_path))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.call_tool("list", {})
    # Before: "cwd must be an existing absolute directory, got 'proj'" on every call.
    assert not listed.is_error, listed.content
    assert fake_daemon.calls("memory.list") == [{"cwd": str(project)}]


async def test_a_start_directory_since_deleted_serves_tools_given_their_cwd(
    fake_daemon: FakeDaemon, tmp_path: Path, project: Path
) -> None:
    fake_daemon.on("memory.list", {"memory_dir": "/m", "memories": [], "instruction_files": []})
    gone = tmp_path / "gone"
    gone.mkdir()
    # The shell starts the server in a folder it has just removed.
    script = 'cd "$1" && rmdir "$1" && exec "$2" -m memoryd_client.mcp_server --socket "$3"'
    args = ["-c", script, "sh", str(gone), sys.executable, str(fake_daemon.socket_path)]
    params = StdioServerParameters(command="sh", args=args, env=memctl_env(), cwd=str(tmp_path))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        # Before: a FileNotFoundError traceback from os.getcwd() and no server at all.
        await session.initialize()
        without = await session.call_tool("list", {})
        given = await session.call_tool("list", {"cwd": str(project)})
    assert without.is_error
    assert "no longer exists; pass cwd" in without.content[0].text
    assert not given.is_error, given.content
    assert fake_daemon.calls("memory.list") == [{"cwd": str(project)}]


def test_sigint_ends_the_server_at_once_and_quietly(fake_daemon: FakeDaemon, project: Path) -> None:
    proc = start_server(fake_daemon.socket_path, project)
    try:
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        assert proc.stdin is not None
        assert proc.stdout is not None
        assert proc.stderr is not None
        proc.stdin.write(json.dumps(init).encode() + b"\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        proc.send_signal(signal.SIGINT)
        # Before: it stopped answering but lived on until stdin closed, then printed a
        # KeyboardInterrupt traceback.
        assert proc.wait(timeout=10) == 130
        assert proc.communicate()[1] == b""
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()  # waits, and closes the three pipes


@pytest.mark.parametrize(
    "line",
    [
        "line {i}: the user likes green tea with honey\n",
        # About a token a character: 40,000 characters of it were over Claude Code's cap.
        "{i}行目: ユーザーは蜂蜜入りの緑茶が好きです\n",
    ],
)
async def test_big_memories_are_cut_to_fit_and_read_pages_through_them(
    fake_daemon: FakeDaemon, project: Path, line: str
) -> None:
    from memoryd_client.mcp_tools import RESULT_BYTES

    def size(text: str) -> int:
        return len(text.encode())

    # Five memories of the daemon's 200,000-byte cap: 1.85 MB of tool result before, which a
    # host refuses (Claude Code: over 25,000 tokens), and read had no way to page.
    big = "".join(line.format(i=i) for i in range(4000))
    small = "---\nname: S\n---\n\nshort\n"
    fake_daemon.on(
        "recall",
        {
            "selector": "local",
            "memories": [
                {"path": f"/m/{n}.md", "name": n, "type": "user", "description": "d", "content": c}
                for n, c in [("b1", big), ("s", small), ("b2", big)]
            ],
        },
    )
    fake_daemon.on("memory.read", lambda p: {"path": p["path"], "content": big})
    async with mcp_session(fake_daemon.socket_path, project) as session:
        recall = await session.call_tool("recall", {"query": "tea"})
        pages: list[str] = []
        offset = 0
        while True:
            page = payload(await session.call_tool("read", {"path": "/m/b1.md", "offset": offset}))
            text, _, marker = page.partition("\n\n[memoryd-mcp: characters ")
            pages.append(text)
            assert size(text) <= RESULT_BYTES
            if not marker:
                break
            offset = int(marker.rsplit("offset=", 1)[1].split()[0])
        past = await session.call_tool("read", {"path": "/m/b1.md", "offset": len(big) + 5})
    memories = payload(recall)["memories"]
    assert size(recall.content[0].text) < RESULT_BYTES + 2_000  # the memories' other fields
    assert memories[1]["content"] == small  # a short one is whole; the long ones share the rest
    assert "truncated" not in memories[1]
    for memory in (memories[0], memories[2]):
        assert big.startswith(memory["content"])
        assert memory["content"].endswith("\n")  # cut after a line
        assert f"of {len(big):,} characters" in memory["truncated"]
        assert f"offset={len(memory['content'])}" in memory["truncated"]
    assert sum(size(m["content"]) for m in memories) <= RESULT_BYTES
    assert "".join(pages) == big
    assert len(pages) > 1
    assert past.is_error
    assert "outside the file" in past.content[0].text


def test_half_a_surrogate_pair_in_a_request_is_answered(
    fake_daemon: FakeDaemon, project: Path
) -> None:
    fake_daemon.on("recall", {"selector": "local", "memories": []})
    # Written as a JSON client writes them: \ud83d alone (a string cut inside an emoji), a
    # whole pair, and an escaped backslash before "ud83d", which is no escape at all.
    line = (
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"recall",'
        '"arguments":{"query":"tea \\ud83d and \\ud83d\\ude00 and \\\\ud83d"}}}'
    )
    replies = exchange(fake_daemon.socket_path, project, [line], count=2)
    # Before: no reply at all to id 2 (the SDK's parser refused the line), the client waited.
    assert [reply["id"] for reply in replies] == [1, 2]
    assert replies[1]["result"]["isError"] is False
    assert fake_daemon.calls("recall")[0]["query"] == "tea \ufffd and \U0001f600 and \\ud83d"


def _server_exit(cwd: Path, socket: str, redirect: str = "") -> subprocess.CompletedProcess[str]:
    """memoryd-mcp started by a shell with `redirect` (`<&-`, `>&-`), run to its end."""
    command = [sys.executable, "-m", "memoryd_client.mcp_server", "--socket", socket]
    return subprocess.run(
        ["sh", "-c", f'exec "$@" {redirect}', "sh", *command],
        stdin=subprocess.DEVNULL,
        capture_output=True,  # the redirect closes stdout again when it is `>&-`
        text=True,
        cwd=cwd,
        env=memctl_env(),
        timeout=60,
        check=False,
    )


def test_an_empty_socket_is_refused_as_memctl_refuses_it(tmp_path: Path) -> None:
    # Found by a bug hunt (session 23): `--socket ""` read as no --socket, and the server
    # quietly talked to the default daemon, not the one its host's config named.
    done = _server_exit(tmp_path, "")
    assert done.returncode == 2
    assert done.stderr.endswith(
        "memoryd-mcp: error: argument --socket: an empty path: give the daemon's socket, "
        "or leave --socket out\n"
    )
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("redirect", "closed"), [("<&-", "input"), (">&-", "output"), ("<&- >&-", "input and output")]
)
def test_a_closed_standard_stream_is_said(tmp_path: Path, redirect: str, closed: str) -> None:
    # Found by a bug hunt (session 23): started with stdin or stdout closed (cron, a careless
    # script), the server died in an AttributeError or EBADF traceback from a thread.
    done = _server_exit(tmp_path, "/nonexistent", redirect)
    assert done.returncode == 2
    assert done.stderr == (
        f"memoryd-mcp: standard {closed} is closed: an MCP client talks to it over standard "
        "input and output\n"
    )


def test_an_empty_cwd_is_refused_as_an_empty_socket_is(tmp_path: Path) -> None:
    # Found by a bug hunt (session 23): `--cwd ""` read as no --cwd, and the tools quietly
    # used $MEMORYD_MCP_CWD (or the start folder), not the project the host's config meant.
    done = subprocess.run(
        [sys.executable, "-m", "memoryd_client.mcp_server", "--cwd", ""],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=memctl_env(MEMORYD_MCP_CWD=str(tmp_path)),
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.endswith(
        "memoryd-mcp: error: argument --cwd: an empty path: give the project directory, "
        "or leave --cwd out\n"
    )
    assert done.stdout == ""


async def test_a_reply_not_shaped_as_memoryd_answers_says_so(
    fake_daemon: FakeDaemon, project: Path
) -> None:
    # Found by a bug hunt: a reply that is no object (not this memoryd, or another version)
    # was an AttributeError the host showed as a bare "Error executing tool list".
    fake_daemon.on("memory.list", [1, 2])
    fake_daemon.on(
        "recall", {"selector": "local", "memories": [5, {"path": "/m/a.md", "content": "A."}]}
    )
    async with mcp_session(fake_daemon.socket_path, project) as session:
        listed = await session.call_tool("list", {"cwd": str(project)})
        recalled = await session.call_tool("recall", {"query": "a", "cwd": str(project)})
    assert listed.is_error
    assert "memoryd's reply to memory.list is not an object: [1, 2]" in listed.content[0].text
    # An entry that is no object is left out; the others are answered.
    assert [m["path"] for m in payload(recalled)["memories"]] == ["/m/a.md"]
