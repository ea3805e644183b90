"""The integration examples in examples/ stay true to the code."""

from __future__ import annotations

import ast
import asyncio
import json
import shlex
import sys
from pathlib import Path

from memctl.claude_code import (
    PATH_TOOL_MATCHER,
    PATH_TOOLS,
    READ_TOOLS,
    SEARCH_TOOLS,
    WRITE_TOOLS,
)
from memctl.commands.hook import EVENTS
from tests.clients.conftest import REPO, memctl_env
from tests.conftest import DaemonHandle

EXAMPLES = REPO / "examples"


def test_claude_code_settings_run_every_hook() -> None:
    settings = json.loads((EXAMPLES / "claude-code-settings.json").read_text())
    wired: dict[str, str] = {}
    for hook_event, groups in settings["hooks"].items():
        for group in groups:
            for hook in group["hooks"]:
                argv = shlex.split(hook["command"])
                assert argv[:2] == ["memctl", "hook"]
                assert hook["type"] == "command"
                wired[hook_event] = argv[2]
    # Each Claude Code event runs the memctl hook of the same name.
    assert {EVENTS[name]: event for event, name in wired.items()} == {v: v for v in wired}
    assert set(wired) == set(EVENTS.values())
    (post_tool_use,) = settings["hooks"]["PostToolUse"]
    assert post_tool_use["matcher"] == PATH_TOOL_MATCHER
    assert PATH_TOOLS == READ_TOOLS | WRITE_TOOLS | SEARCH_TOOLS


def test_mcp_example_names_the_console_script() -> None:
    config = json.loads((EXAMPLES / "claude-code-mcp.json").read_text())
    server = config["mcpServers"]["memoryd"]
    assert server["command"] == "memoryd-mcp"
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'memoryd-mcp = "memoryd_client.mcp_server:main"' in pyproject


async def test_agent_loop_example_without_a_key(daemon: DaemonHandle, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    await daemon.call(
        "memory.write",
        cwd=str(project),
        type="project",
        name="Release train",
        description="releases leave on Thursdays",
        body="Thursdays.\n\n**Why:** QA\n\n**How to apply:** plan",
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLES / "agent_loop.py"),
        "when do releases leave?",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=project,
        env=memctl_env(MEMORYD_SOCKET=str(daemon.socket_path)),
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    text = out.decode()
    assert "1 recalled memory(ies)" in text
    assert "Thursdays." in text
    assert text.rstrip().endswith("when do releases leave?")


def test_protocol_tour_calls_every_method() -> None:
    # docs/protocol.md's examples are the tour's output: a method it never calls has a
    # hand-written example there (memory.snapshot had one, out of step with its ids).
    from memoryd.daemon.wiring import rpc_methods

    tree = ast.parse((EXAMPLES / "protocol_tour.py").read_text())
    called = {
        node.elts[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Tuple)
        and node.elts
        and isinstance(node.elts[0], ast.Constant)
        and isinstance(node.elts[0].value, str)
    }
    served = {
        n for n, spec in rpc_methods().items() if spec.handler.__module__.startswith("memoryd.")
    }
    assert sorted(served - called) == []
