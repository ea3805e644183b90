"""A finished turn, as the client reports it, and when it ended in prose."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memoryd.core.project import Project


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
