"""Claude Code's settings with memoryd's hooks and MCP server merged in or taken out. Pure.

Claude Code reads hooks from a settings file (`~/.claude/settings.json`, or a project's
`.claude/settings.local.json`): `{"hooks": {Event: [{"matcher"?, "hooks": [{"type": "command",
"command", "timeout"}]}]}}`, and MCP servers from `mcpServers` in `~/.claude.json` (user scope)
or a project's `.mcp.json`. A hook is memoryd's when its command runs `memctl hook …` (any
path to memctl, so an install from another place is replaced, not doubled; memctl's global
flags may stand before `hook`: `memctl --socket S hook stop`); the MCP server is the `memoryd`
entry. Everything else in the files is kept as it is, in its order.
"""

from __future__ import annotations

import argparse
import copy
import functools
import shlex
from dataclasses import dataclass
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


@dataclass(frozen=True)
class _Span:
    """Where a memoryd hook's words are in its argv."""

    start: int  # the first word that runs memctl (`…/memctl`, or the python of `-m memctl`)
    end: int  # after them: memctl's global flags (`--socket S`), then `hook`
    event: int  # the event after `hook` and the hook's own flags (len(argv): none given)


@functools.cache
def _takes_value() -> tuple[dict[str, bool], dict[str, bool]]:
    """The options memctl takes before `hook` (its global flags) and after it (the hook's own
    and the global ones again), each with whether a value follows it: read from memctl's own
    parsers, so a new flag is known here too."""
    from memctl.commands import hook
    from memctl.global_flags import accept_after_command, add_global_flags

    parser = argparse.ArgumentParser(add_help=False)
    add_global_flags(parser)
    sub = parser.add_subparsers()
    hook.register(sub)
    accept_after_command(parser)

    def options(parser: argparse.ArgumentParser) -> dict[str, bool]:
        return {name: action.nargs != 0 for name, action in parser._option_string_actions.items()}

    return options(parser), options(sub.choices["hook"])


def _after_options(argv: list[str], index: int, takes_value: dict[str, bool]) -> int:
    """The index of the first word from `index` on that is neither an option nor an option's
    value (`--socket S`, `--socket=S`, an abbreviation as argparse takes it: `--sock S`)."""
    while index < len(argv) and argv[index].startswith("-"):
        name, has_value, _ = argv[index].partition("=")
        known = [o for o in takes_value if o == name] or [
            o for o in takes_value if o.startswith("--") and o.startswith(name)
        ]
        # An unknown option counts as a flag: the hook is still memoryd's, to replace or remove.
        index += 2 if len(known) == 1 and takes_value[known[0]] and not has_value else 1
    return index


def _memctl_span(argv: list[str]) -> _Span | None:
    """Where memctl's own words are in a hook's argv, when `hook` follows them (after any of
    memctl's global flags: `memctl --socket S hook stop` is memoryd's hook too); None when the
    hook is not memoryd's."""
    for index, word in enumerate(argv):
        if word.rsplit("/", 1)[-1] == "memctl":
            start, end = index, index + 1
        elif word == "-m" and argv[index + 1 : index + 2] == ["memctl"]:
            if index == 0:
                return None
            start, end = index - 1, index + 2
        else:
            continue
        before, after = _takes_value()
        hook = _after_options(argv, end, before)
        if argv[hook : hook + 1] != ["hook"]:
            return None
        return _Span(start, end, _after_options(argv, hook + 1, after))
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
    tuned stays: words before memctl (`env VAR=…`), flags between memctl and the event
    (`--socket S`, `--json`), arguments after the event (`--timeout-ms 3000`), the hook's
    `timeout` and any other key.
    """
    command = hook["command"]
    argv = shlex.split(command)
    span = _memctl_span(argv)
    assert span is not None  # only memoryd's hooks come here
    # memctl's flags and the hook's around `hook` are the user's, kept where they stand.
    flags_and_hook = argv[span.end : span.event]
    words = [*argv[: span.start], *memctl, *flags_and_hook, event, *argv[span.event + 1 :]]
    if shlex.join(argv) == command:
        command = shlex.join(words)  # written as memctl writes it: rewrite it word by word
    else:
        # Shell syntax or quoting of the user's own (`… 2>/dev/null`): change only memctl's
        # words where they stand, else leave the command as it is.
        old = shlex.join(argv[span.start : span.event + 1])
        if command.count(old) == 1:
            command = command.replace(old, shlex.join([*memctl, *flags_and_hook, event]))
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

    A memoryd hook already there keeps the user's tuning (`retargeted`), its place and its
    group with the group's matcher (`"startup|compact"` on SessionStart, a narrower
    PostToolUse list: the user's choice); any other memoryd hook of the event goes. Without
    one, memoryd's goes into a new group at the end, with memoryd's matcher.
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
            group = dict(groups[g])
            later = [hook for hook in group["hooks"][h + 1 :] if not is_memoryd_hook(hook)]
            group["hooks"] = [*group["hooks"][:h], ours, *later]
            hooks[event] = [*groups[:g], group, *_without_ours(groups[g + 1 :])]
            continue
        group = {"matcher": MATCHERS[event]} if event in MATCHERS else {}
        group["hooks"] = [{"type": "command", "command": hook_command(memctl, name)}]
        group["hooks"][0]["timeout"] = HOOK_TIMEOUT_S
        hooks[event] = [*groups, group]
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


# What runs memoryd-mcp: its script, or a python's `-m` of its module (no script beside it).
SERVER_SCRIPT = "memoryd-mcp"
SERVER_MODULE = "memoryd_client.mcp_server"


def _server_span(argv: list[str]) -> tuple[int, int] | None:
    """Where the words that run memoryd-mcp are in a server entry's command and args (`…/
    memoryd-mcp`, or `python -m memoryd_client.mcp_server`); None when it runs something else."""
    for index, word in enumerate(argv):
        if word.rsplit("/", 1)[-1] == SERVER_SCRIPT:
            return index, index + 1
        if word == "-m" and index > 0 and argv[index + 1 : index + 2] == [SERVER_MODULE]:
            return index - 1, index + 2
    return None


def _entry_argv(entry: dict[str, Any]) -> list[str] | None:
    command, args = entry.get("command"), entry.get("args", [])
    if not isinstance(command, str) or not isinstance(args, list):
        return None
    if not all(isinstance(arg, str) for arg in args):
        return None
    return [command, *args]


def with_server(config: dict[str, Any], command: list[str]) -> dict[str, Any]:
    """`config` with the `memoryd` server running `command`. An entry already there keeps what
    the user added (`env`, `timeout`, a launcher before memoryd-mcp such as `env VAR=…` or `uvx
    --from …`, memoryd-mcp's arguments after it): only the words that run memoryd-mcp are
    memctl's. One that runs something else is replaced, its other keys kept."""
    result = copy.deepcopy(config)
    servers = result.get("mcpServers")
    servers = dict(servers) if isinstance(servers, dict) else {}
    entry = mcp_entry(command)
    current = servers.get(SERVER_NAME)
    if isinstance(current, dict):
        entry = {**current, **entry}
        argv = _entry_argv(current)
        span = _server_span(argv) if argv is not None else None
        if argv is not None and span is not None:
            # Before, the args stayed whole after memctl's command: `uvx --from memoryd[mcp]
            # memoryd-mcp` became `memoryd-mcp --from memoryd[mcp] memoryd-mcp`, which fails.
            words = [*argv[: span[0]], *command, *argv[span[1] :]]
            entry["command"], entry["args"] = words[0], words[1:]
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
