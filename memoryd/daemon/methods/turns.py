"""`after_turn` and `after_tool`: the client reports a finished turn, or one tool call.

`after_turn` schedules the background writers. `after_tool` is the light one, sent after every
file tool call (Claude Code's PostToolUse hook): it only records the paths, so conditional and
nested instruction files and MagicDocs registration follow the session as it works.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from memoryd.core.turn import Turn
from memoryd.daemon.params import Cwd, PathList, SessionId
from memoryd.daemon.rpc import Params, method
from memoryd.session.transcript import Messages, Usage

if TYPE_CHECKING:
    from memoryd.daemon.app import Daemon


class AfterTurnParams(Params):
    session_id: SessionId
    cwd: Cwd
    messages: Messages
    read_paths: PathList = Field(default_factory=list)
    usage: Usage | None = None
    system: Any = None
    tools: list[dict[str, Any]] | None = None
    model: str | None = None


async def after_turn(daemon: Daemon, params: AfterTurnParams) -> dict[str, Any]:
    """Record the turn and schedule extraction, session memory and MagicDocs updates."""
    project = daemon.services.projects.resolve(params.cwd)
    if params.read_paths:
        # Conditional and nested instruction files follow what the session has touched.
        await daemon.services.session_paths.add_touched(
            project.root, params.session_id, params.read_paths, project.cwd
        )
    usage = params.usage.model_dump(exclude_none=True) if params.usage is not None else None
    tokens = await daemon.services.session_memory.count_tokens(
        project, params.session_id, params.messages, usage
    )
    turn = Turn(
        session_id=params.session_id,
        project=project,
        messages=params.messages,
        read_paths=tuple(params.read_paths),
        usage=usage,
        tokens=tokens,
        system=params.system,
        tools=params.tools,
        model=params.model,
    )
    scheduled: dict[str, Any] = {"extraction": False, "session_memory": False, "magic_docs": 0}
    for hook in daemon.services.after_turn_hooks:
        scheduled.update(await hook(turn))  # each hook sets only its own keys
    return {"scheduled": scheduled, "tokens": tokens}


class AfterToolParams(Params):
    session_id: SessionId
    cwd: Cwd
    tool: str | None = Field(default=None, max_length=200)
    read_paths: PathList = Field(default_factory=list)
    touched_paths: PathList = Field(default_factory=list)


async def after_tool(daemon: Daemon, params: AfterToolParams) -> dict[str, Any]:
    """Record the files one tool call read or touched (rules and MagicDocs follow them)."""
    project = daemon.services.projects.resolve(params.cwd)
    paths = [*params.read_paths, *params.touched_paths]
    if paths:
        await daemon.services.session_paths.add_touched(
            project.root, params.session_id, paths, project.cwd
        )
    magic_docs = await daemon.services.magic_docs.on_read(
        params.session_id, project.root, tuple(params.read_paths)
    )
    daemon.services.dream.rearm(project)  # the session is busy, not idle
    return {"touched": len(paths), "magic_docs": magic_docs}


METHODS = (
    method("after_turn", AfterTurnParams, after_turn),
    method("after_tool", AfterToolParams, after_tool),
)
