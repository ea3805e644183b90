"""`compact`: replace a long transcript by the session summary plus its recent messages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memoryd.daemon.params import Cwd, SessionId
from memoryd.daemon.projects import Projects
from memoryd.daemon.registry import Params, rpc_method
from memoryd.session.service import SessionMemory
from memoryd.session.transcript import Messages

if TYPE_CHECKING:
    from memoryd.daemon.app import Daemon


class CompactParams(Params):
    session_id: SessionId
    cwd: Cwd
    messages: Messages


@rpc_method("compact", CompactParams)
async def compact(daemon: Daemon, params: CompactParams) -> dict[str, Any]:
    """Compact a transcript with the session summary (or say why it cannot)."""
    project = daemon.service(Projects).resolve(params.cwd)
    return await daemon.service(SessionMemory).compact(project, params.session_id, params.messages)
