"""Claude Code's settings with memoryd's hooks and MCP server merged in or taken out. Pure.

Claude Code reads hooks from a settings file (`~/.claude/settings.json`, or a project's
`.claude/settings.local.json`): `{"hooks": {Event: [{"matcher"?, "hooks": [{"type": "command",
"command", "timeout"}]}]}}`, and MCP servers from `mcpServers` in `~/.claude.json` (user scope)
or a project's `.mcp.json`. A hook is memoryd's when its command runs `memctl hook …` (any
path to memctl, so an install from another place is replaced, not doubled); the MCP server is
the `memoryd` entry. Everything else in the files is kept as it is, in its order.
"""

from __future__ import annotations

import copy
import shlex
from typing import Any

from memctl.claude_code import PATH_TOOL_MATCHER

SERVER_NAME = "memoryd"
HOOK_TIMEOUT_S = 5
# Claude Code event -> `memctl hook` event, and the tools a PostToolUse hook runs after.
HOOK_EVENTS = {
    "SessionStart": "session-start",
    "UserPromptSubmit": "user-prompt-submit",
    "PreCompact": "pre-compact",
    "Stop": "stop",
    "PostToolUse": "post-tool-use",
}
MATCHERS = {"PostToolUse": PATH_TOOL_MATCHER}
# In a project's settings.local.json: approve the `.mcp.json` server without a prompt.
APPROVED_KEY = "enabledMcpjsonServers"


def hook_command(memctl: list[str], event: str) -> str:
    return shlex.join([*memctl, "hook", event])


def is_memoryd_hook(hook: Any) -> bool:
    if not isinstance(hook, dict) or not isinstance(hook.get("command"), str):
        return False
    try:
        argv = shlex.split(hook["command"])
    except ValueError:
        return False
    for index, word in enumerate(argv[:-1]):
        if word.rsplit("/", 1)[-1] == "memctl":
            return argv[index + 1] == "hook"
        if word == "-m" and argv[index + 1] == "memctl":
            return argv[index + 2 : index + 3] == ["hook"]
    return False


def _without_ours(groups: list[Any]) -> list[Any]:
    kept = []
    for group in groups:
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            hooks = [h for h in group["hooks"] if not is_memoryd_hook(h)]
            if not hooks and group["hooks"]:
                continue  # a group that held only our hooks goes with them
            group = {**group, "hooks": hooks}
        kept.append(group)
    return kept


def with_hooks(settings: dict[str, Any], memctl: list[str]) -> dict[str, Any]:
    """`settings` with exactly one memoryd hook per event (older ones of ours replaced)."""
    result = copy.deepcopy(settings)
    hooks = result.get("hooks")
    if not isinstance(hooks, dict):
        hooks = {}
    for event, name in HOOK_EVENTS.items():
        ours = {"type": "command", "command": hook_command(memctl, name), "timeout": HOOK_TIMEOUT_S}
        groups = hooks.get(event)
        groups = list(groups) if isinstance(groups, list) else []
        current = [
            g
            for g in groups
            if isinstance(g, dict)
            and g.get("matcher") == MATCHERS.get(event)
            and g.get("hooks") == [ours]
        ]
        if current and sum(is_memoryd_hook(h) for g in groups for h in _hooks_of(g)) == 1:
            continue  # already exactly ours: keep the file byte for byte
        group: dict[str, Any] = {"matcher": MATCHERS[event]} if event in MATCHERS else {}
        group["hooks"] = [ours]
        hooks[event] = [*_without_ours(groups), group]
    result["hooks"] = hooks
    return result


def _hooks_of(group: Any) -> list[Any]:
    if isinstance(group, dict) and isinstance(group.get("hooks"), list):
        return list(group["hooks"])
    return []


def without_hooks(settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` with every memoryd hook taken out (events left empty by that removed)."""
    result = copy.deepcopy(settings)
    hooks = result.get("hooks")
    if not isinstance(hooks, dict):
        return result
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = _without_ours(groups)
        if kept == groups:
            continue
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    if not hooks and "hooks" in settings and settings["hooks"] != {}:
        del result["hooks"]
    return result


def mcp_entry(command: list[str]) -> dict[str, Any]:
    return {"type": "stdio", "command": command[0], "args": command[1:]}


def with_server(config: dict[str, Any], command: list[str]) -> dict[str, Any]:
    result = copy.deepcopy(config)
    servers = result.get("mcpServers")
    servers = dict(servers) if isinstance(servers, dict) else {}
    servers[SERVER_NAME] = mcp_entry(command)
    result["mcpServers"] = servers
    return result


def without_server(config: dict[str, Any]) -> dict[str, Any]:
    result = copy.deepcopy(config)
    servers = result.get("mcpServers")
    if isinstance(servers, dict) and SERVER_NAME in servers:
        servers = dict(servers)
        del servers[SERVER_NAME]
        if servers:
            result["mcpServers"] = servers
        else:
            del result["mcpServers"]
    return result


def with_approval(settings: dict[str, Any]) -> dict[str, Any]:
    result = copy.deepcopy(settings)
    approved = result.get(APPROVED_KEY)
    approved = list(approved) if isinstance(approved, list) else []
    if SERVER_NAME not in approved:
        result[APPROVED_KEY] = [*approved, SERVER_NAME]
    return result


def without_approval(settings: dict[str, Any]) -> dict[str, Any]:
    result = copy.deepcopy(settings)
    approved = result.get(APPROVED_KEY)
    if isinstance(approved, list) and SERVER_NAME in approved:
        kept = [a for a in approved if a != SERVER_NAME]
        if kept:
            result[APPROVED_KEY] = kept
        else:
            del result[APPROVED_KEY]
    return result
