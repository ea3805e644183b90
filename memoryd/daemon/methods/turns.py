"""`after_turn`: the client reports a finished turn; background writers are scheduled."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from memoryd.daemon.params import Cwd, PathList, SessionId
from memoryd.daemon.projects import Projects
from memoryd.daemon.registry import Params, rpc_method
from memoryd.daemon.turns import AFTER_TURN_HOOKS, Turn
from memoryd.llm.tokens import estimate_messages

if TYPE_CHECKING:
    from memoryd.daemon.app import Daemon


class AfterTurnParams(Params):
    session_id: SessionId
    cwd: Cwd
    messages: list[dict[str, Any]]
    read_paths: PathList = Field(default_factory=list)
    usage: dict[str, Any] | None = None
    system: Any = None
    tools: list[dict[str, Any]] | None = None
    model: str | None = None


@rpc_method("after_turn", AfterTurnParams)
async def after_turn(daemon: Daemon, params: AfterTurnParams) -> dict[str, Any]:
    """Record the turn and schedule extraction, session memory and MagicDocs updates."""
    project = daemon.service(Projects).resolve(params.cwd)
    turn = Turn(
        session_id=params.session_id,
        project=project,
        messages=params.messages,
        read_paths=tuple(params.read_paths),
        usage=params.usage,
        tokens=estimate_messages(params.messages),
        system=params.system,
        tools=params.tools,
        model=params.model,
    )
    scheduled: dict[str, Any] = {"extraction": False, "session_memory": False, "magic_docs": 0}
    tokens = turn.tokens
    for hook in AFTER_TURN_HOOKS:
        part = await hook(daemon, turn)
        tokens = int(part.pop("tokens", tokens))
        scheduled.update(part)
    return {"scheduled": scheduled, "tokens": tokens}
