"""The clients against the real daemon (in-process, real socket): hooks, memory UI, MCP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.clients.conftest import memctl_env, run_memctl_async
from tests.clients.test_mcp_server import mcp_session, payload
from tests.conftest import DaemonHandle


async def memctl(
    sock: Path, *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    return await run_memctl_async("--socket", str(sock), *args, stdin=stdin, env=env)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    path.mkdir()
    (path / "CLAUDE.md").write_text("Be terse.\n@./extra.md\n")
    (path / "extra.md").write_text("extra rules\n")
    return path


async def write_memory(daemon: DaemonHandle, project: Path, body: str, **extra: Any) -> str:
    result = await daemon.call(
        "memory.write",
        cwd=str(project),
        type="feedback",
        name="Tabs not spaces",
        description="user wants tabs in Go files",
        body=body,
        **extra,
    )
    return str(result["path"])


async def test_hooks_with_the_real_daemon(daemon: DaemonHandle, project: Path) -> None:
    await write_memory(
        daemon, project, "Use tabs.\n\n**Why:** team style\n\n**How to apply:** gofmt"
    )
    start = {
        "session_id": "e2e-1",
        "cwd": str(project),
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    code, out, err = await memctl(
        daemon.socket_path,
        "hook",
        "session-start",
        "--timeout-ms",
        "10000",
        stdin=json.dumps(start),
    )
    assert code == 0, err
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert (
        "- [Tabs not spaces](feedback_tabs_not_spaces.md) — user wants tabs in Go files" in context
    )
    assert "Be terse." not in context  # Claude Code loads CLAUDE.md itself
    assert "# Auto memory" in context

    prompt = {
        "session_id": "e2e-1",
        "cwd": str(project),
        "prompt": "which indentation for go files?",
    }
    code, out, err = await memctl(
        daemon.socket_path,
        "hook",
        "user-prompt-submit",
        "--timeout-ms",
        "10000",
        stdin=json.dumps(prompt),
    )
    assert code == 0, err
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "Use tabs." in context
    assert "feedback_tabs_not_spaces.md" in context


async def test_memory_ui_lists_and_restores_with_the_real_daemon(
    daemon: DaemonHandle, project: Path, isolated_env: Any
) -> None:
    path = await write_memory(
        daemon, project, "First version.\n\n**Why:** a\n\n**How to apply:** b"
    )
    await write_memory(
        daemon,
        project,
        "Second version.\n\n**Why:** a\n\n**How to apply:** b",
        file=Path(path).name,
    )

    code, out, err = await memctl(daemon.socket_path, "memory", "--list", "--cwd", str(project))
    assert code == 0, err
    assert "Project instructions" in out
    assert "     ↳ ./extra.md  (@-import)" in out
    assert "Tabs not spaces  — user wants tabs in Go files" in out

    # Filter to the memory, choose it, "History and restore", the first version, confirm.
    code, out, err = await memctl(
        daemon.socket_path,
        "memory",
        "--cwd",
        str(project),
        stdin="tabs not\n1\n2\n1\ny\n\n",
        env=memctl_env(VISUAL="true"),
    )
    assert code == 0, err
    assert "restored feedback_tabs_not_spaces.md" in out
    assert "First version." in Path(path).read_text()


async def test_mcp_with_the_real_daemon(daemon: DaemonHandle, project: Path) -> None:
    async with mcp_session(daemon.socket_path, project) as session:
        saved = payload(
            await session.call_tool(
                "remember",
                {
                    "type": "project",
                    "name": "Release freeze",
                    "description": "no merges after March 5",
                    "body": "Freeze from March 5.\n\n**Why:** mobile release\n\n**How to apply:** flag late PRs",
                },
            )
        )
        recalled = payload(
            await session.call_tool("recall", {"query": "when is the release freeze?"})
        )
        text = payload(await session.call_tool("read", {"path": Path(saved["path"]).name}))
    assert saved["created"] is True
    assert [m["path"] for m in recalled["memories"]] == [saved["path"]]
    assert "Freeze from March 5." in text


async def test_memory_ui_turns_auto_memory_back_on(daemon: DaemonHandle, project: Path) -> None:
    await daemon.call("settings.set", key="autoMemoryEnabled", value=False)
    code, out, err = await memctl(daemon.socket_path, "memory", "--list", "--cwd", str(project))
    assert code == 0, err
    assert "[ ] Auto memory" in out
    assert "./CLAUDE.md" in out
    assert "(auto memory is off" in out

    # Filter to the toggle, choose it, leave.
    code, out, err = await memctl(
        daemon.socket_path,
        "memory",
        "--cwd",
        str(project),
        stdin="auto memory\n1\n\n",
        env=memctl_env(VISUAL="true"),
    )
    assert code == 0, err
    assert "auto memory is off" in out
    settings = await daemon.call("settings.get", cwd=str(project))
    assert settings["settings"]["autoMemoryEnabled"] is True
    listing = await daemon.call("memory.list", cwd=str(project))
    assert listing["memory_dir"]
