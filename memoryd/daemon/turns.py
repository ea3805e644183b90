"""What happens after a turn: the hooks `after_turn` runs, and what they are given.

Features that react to a finished turn (memory extraction, session memory, MagicDocs)
register an `AfterTurnHook` with `@after_turn_hook`. A hook does bookkeeping only — it must
return quickly — and starts real work with `daemon.spawn`. It returns the part of the
`scheduled` result it owns, e.g. `{"extraction": True}`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memoryd.daemon.app import Daemon
    from memoryd.daemon.projects import Project


@dataclass(frozen=True)
class Turn:
    session_id: str
    project: Project
    messages: list[dict[str, Any]]  # the full transcript, Anthropic Messages format
    read_paths: tuple[str, ...]
    usage: dict[str, Any] | None  # the last model response's usage, when the client sent it
    tokens: int  # the conversation's size as the daemon estimates it
    # The main conversation's request prefix, for prompt-cache reuse by background agents.
    system: Any = None
    tools: list[dict[str, Any]] | None = None
    model: str | None = None


AfterTurnHook = Callable[["Daemon", Turn], Awaitable[dict[str, Any]]]
AFTER_TURN_HOOKS: list[AfterTurnHook] = []


def after_turn_hook(hook: AfterTurnHook) -> AfterTurnHook:
    AFTER_TURN_HOOKS.append(hook)
    return hook


def natural_break(messages: Sequence[Mapping[str, Any]]) -> bool:
    """The last assistant message called no tool: the turn ended in prose.

    False when there is no assistant message yet. Session memory uses it as an update trigger,
    MagicDocs as the only moment it updates.
    """
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") != "assistant":
            continue
        content = message.get("content")
        if isinstance(content, list):
            return not any(isinstance(b, Mapping) and b.get("type") == "tool_use" for b in content)
        return True
    return False
