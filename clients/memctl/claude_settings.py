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


def _memctl_span(argv: list[str]) -> tuple[int, int] | None:
    """Where memctl's own words are in a hook's argv: (start, end) of `…/memctl` or
    `python -m memctl`, when `hook` follows them; None when the hook is not memoryd's."""
    for index, word in enumerate(argv[:-1]):
        if word.rsplit("/", 1)[-1] == "memctl":
            return (index, index + 1) if argv[index + 1] == "hook" else None
        if word == "-m" and argv[index + 1] == "memctl":
            if index == 0 or argv[index + 2 : index + 3] != ["hook"]:
                return None
            return index - 1, index + 2
    return None


def is_memoryd_hook(hook: Any) -> bool:
    if not isinstance(hook, dict) or not isinstance(hook.get("command"), str):
        return False
    try:
        argv = shlex.split(hook["command"])
    except ValueError:
        return False
    return _memctl_span(argv) is not None


def retargeted(hook: dict[str, Any], memctl: list[str], event: str) -> dict[str, Any]:
    """One of memoryd's hooks, pointed at this installation's memctl and at `event`.

    memctl owns only that: the words that run memctl and the event after `hook`. What the user
    tuned stays: words before memctl (`env VAR=…`), arguments after the event
    (`--timeout-ms 3000`), the hook's `timeout` and any other key.
    """
    command = hook["command"]
    argv = shlex.split(command)
    span = _memctl_span(argv)
    assert span is not None  # only memoryd's hooks come here
    start, end = span
    words = [*argv[:start], *memctl, "hook", event, *argv[end + 2 :]]
    if shlex.join(argv) == command:
        command = shlex.join(words)  # written as memctl writes it: rewrite it word by word
    else:
        # Shell syntax or quoting of the user's own (`… 2>/dev/null`): change only memctl's
        # words where they stand, else leave the command as it is.
        old = shlex.join(argv[start : end + 2])
        if command.count(old) == 1:
            command = command.replace(old, shlex.join([*memctl, "hook", event]))
    return {**hook, "command": command}


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
    """`settings` with exactly one memoryd hook per event (older ones of ours replaced).

    A memoryd hook already there keeps the user's tuning (`retargeted`) and its place when it
    is the only one and its group has memoryd's matcher; otherwise the first one's tuning goes
    into one new group at the end.
    """
    result = copy.deepcopy(settings)
    hooks = result.get("hooks")
    if not isinstance(hooks, dict):
        hooks = {}
    for event, name in HOOK_EVENTS.items():
        groups = hooks.get(event)
        groups = list(groups) if isinstance(groups, list) else []
        found = [
            (g, h)
            for g, group in enumerate(groups)
            for h, hook in enumerate(_hooks_of(group))
            if is_memoryd_hook(hook)
        ]
        if found:
            g, h = found[0]
            ours = retargeted(groups[g]["hooks"][h], memctl, name)
            ours.setdefault("timeout", HOOK_TIMEOUT_S)  # a hand-made one without: ours
        else:
            ours = {"type": "command", "command": hook_command(memctl, name)}
            ours["timeout"] = HOOK_TIMEOUT_S
        if len(found) == 1 and groups[g].get("matcher") == MATCHERS.get(event):
            group = dict(groups[g])
            group["hooks"] = [*group["hooks"][:h], ours, *group["hooks"][h + 1 :]]
            groups[g] = group
            hooks[event] = groups
            continue
        group = {"matcher": MATCHERS[event]} if event in MATCHERS else {}
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


# The arguments of memoryd-mcp run as a module (no script next to the interpreter): memctl's.
MODULE_ARGS = ["-m", "memoryd_client.mcp_server"]


def with_server(config: dict[str, Any], command: list[str]) -> dict[str, Any]:
    """`config` with the `memoryd` server running `command`. An entry already there keeps what
    the user added (`env`, `timeout`, arguments after memctl's own): only the command is
    memctl's."""
    result = copy.deepcopy(config)
    servers = result.get("mcpServers")
    servers = dict(servers) if isinstance(servers, dict) else {}
    entry = mcp_entry(command)
    current = servers.get(SERVER_NAME)
    if isinstance(current, dict):
        args = current.get("args")
        args = list(args) if isinstance(args, list) else []
        if args[: len(MODULE_ARGS)] == MODULE_ARGS:
            args = args[len(MODULE_ARGS) :]
        entry = {**current, **entry, "args": [*entry["args"], *args]}
    servers[SERVER_NAME] = entry
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
