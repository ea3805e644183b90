"""The integration examples in examples/ stay true to the code."""

from __future__ import annotations

import ast
import asyncio
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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
from tests.fakes.messages_api import FakeMessagesAPI, text_reply

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


async def _agent_loop(daemon: DaemonHandle, tmp_path: Path, **env: str) -> tuple[str, str]:
    """examples/agent_loop.py run in a project holding one memory: its stdout and stderr."""
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
        env=memctl_env(MEMORYD_SOCKET=str(daemon.socket_path), **env),
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode(), err.decode()


async def test_agent_loop_example_without_a_key(daemon: DaemonHandle, tmp_path: Path) -> None:
    text, _ = await _agent_loop(daemon, tmp_path)
    assert "1 recalled memory(ies)" in text
    assert "Thursdays." in text
    assert text.rstrip().endswith("when do releases leave?")


async def test_agent_loop_example_with_a_model(
    daemon: DaemonHandle, tmp_path: Path, fake_model: FakeMessagesAPI
) -> None:
    # The path with a key was never run: the reply is printed, the model got the memory
    # instructions as the system prompt and the context, recall and prompt as one user
    # message, and the turn went to the daemon (`after_turn`, its session counted).
    fake_model.enqueue(text_reply("They leave on Thursdays."))
    out, err = await _agent_loop(
        daemon,
        tmp_path,
        ANTHROPIC_API_KEY="sk-test-fake-key",
        ANTHROPIC_BASE_URL=fake_model.base_url,
    )
    assert out.strip() == "They leave on Thursdays."
    assert "[memoryd scheduled: {" in err
    (sent,) = fake_model.message_requests()
    assert "Auto memory" in sent.json["system"]
    (message,) = sent.json["messages"]
    texts = [block["text"] for block in message["content"]]
    assert "Thursdays." in texts[1]
    assert texts[1].endswith("when do releases leave?")
    assert (await daemon.call("status"))["sessions"] == 1


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


def _once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are all different (an edit of the page doubled one)."""
    keys = [key for key, _ in pairs]
    assert len(set(keys)) == len(keys), f"a key twice in {keys}"
    return dict(pairs)


def _examples(markdown: str) -> dict[tuple[int, str], Any]:
    """Each `→ request` / `← reply` example of a page, by request id and method (the first:
    a later one of the same id and method is an illustration written after it)."""
    found: dict[tuple[int, str], Any] = {}
    for request, reply in re.findall(r"^→ (.*?)\n← (.*?)\n```", markdown, re.S | re.M):
        sent = json.loads(request)
        try:
            found.setdefault(
                (sent["id"], sent["method"]), json.loads(reply, object_pairs_hook=_once)
            )
        except json.JSONDecodeError:
            continue  # shortened by hand
    return found


def _fields(value: Any, prefix: str = "", depth: int = 0) -> set[str]:
    """The object keys of a reply, nested (a list by its first item); "…" marks a cut."""
    if isinstance(value, list):
        return _fields(value[0], prefix + "[]", depth) if value else set()
    if not isinstance(value, dict) or depth > 3:
        return set()
    keys = set()
    for key, item in value.items():
        if key != "…":
            keys.add(prefix + "." + key)
            keys |= _fields(item, prefix + "." + key, depth + 1)
    return keys


@pytest.fixture(scope="module")
def tour(tmp_path_factory: pytest.TempPathFactory) -> str:
    """What examples/protocol_tour.py prints: every method's request and reply, today."""
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / "protocol_tour.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path_factory.mktemp("tour"),
        env=memctl_env(),
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_protocol_page_examples_have_the_fields_the_tour_prints(tour: str) -> None:
    # The page's examples are a tour's output from an earlier session: a field the daemon has
    # sent since (status.sessions_with_touched_paths, features.instruction_files,
    # rpc.methods' after_tool, memory.list's index.orphans, team.push's pulled…) was missing.
    printed = _examples(tour)
    page = _examples((REPO / "docs" / "protocol.md").read_text())
    assert len(page) >= len(printed) - 1
    differ = {
        key: sorted(_fields(page[key]) ^ _fields(reply))
        for key, reply in printed.items()
        if key in page and _fields(page[key]) != _fields(reply)
    }
    assert differ == {}


def _glance_fields(cell: str, rows: dict[str, str]) -> set[str]:
    """The result fields a "Methods at a glance" cell names: each backticked name outside
    parentheses (`files[{…}]` is `files`); "as `memory.write`, plus …" adds that row's."""
    top = re.sub(r"\((?:[^()]|\([^()]*\))*\)", "", cell)
    names = {
        found.group(0)
        for span in re.findall(r"`([^`]+)`", top)
        if (found := re.match(r"\w+", span))
    }
    if top.lstrip().startswith("as `memory.write`"):
        names |= _glance_fields(rows["memory.write"], rows)
    return names


def test_protocol_methods_at_a_glance_names_every_result_field(tour: str) -> None:
    # The table left out status.sessions_with_touched_paths and session_updates_running, and
    # the `ok` of team.pull and team.push.
    text = (REPO / "docs" / "protocol.md").read_text()
    glance = text.split("\n## Methods at a glance\n", 1)[1].split("\n## ", 1)[0]
    rows = {
        name: cell
        for methods, cell in re.findall(
            r"^\| ((?:`[a-z_.]+`(?: / )?)+) \| .*? \| (.*) \|$", glance, re.M
        )
        for name in re.findall(r"`([a-z_.]+)`", methods)
    }
    undocumented = {}
    for (_, method), reply in _examples(tour).items():
        cell = rows[method]
        if "result" in reply and "…" not in cell:  # "…": the row names only some
            missing = set(reply["result"]) - _glance_fields(cell, rows)
            if missing:
                undocumented[method] = sorted(missing)
    assert undocumented == {}


def test_clients_page_shows_the_settings_example_as_it_is() -> None:
    text = (REPO / "docs" / "clients.md").read_text()
    shown = re.search(r'```json\n(\{\n  "hooks".*?)\n```', text, re.S)
    assert shown, "docs/clients.md shows the hooks' settings"
    assert json.loads(shown.group(1)) == json.loads(
        (EXAMPLES / "claude-code-settings.json").read_text()
    )
