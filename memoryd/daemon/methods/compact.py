"""`compact`: replace a long transcript by the session summary plus its recent messages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memoryd.daemon.params import Cwd, SessionId
from memoryd.daemon.rpc import Params, method
from memoryd.session.transcript import Messages

if TYPE_CHECKING:
    from memoryd.daemon.app import Daemon


class CompactParams(Params):
    session_id: SessionId
    cwd: Cwd
    messages: Messages


async def compact(daemon: Daemon, params: CompactParams) -> dict[str, Any]:
    """Compact a transcript with the session summary (or say why it cannot)."""
    project = daemon.services.projects.resolve(params.cwd)

    def compacted(reply: dict[str, Any]) -> None:
        # The client goes on with the compacted list: extraction's place in the transcript
        # (how many messages it has already seen) must follow, or it skips new messages.
        # Once a compaction: a call that repeats it moves nothing.
        kept = int(reply["kept_messages"])
        daemon.services.extraction.on_compaction(
            project,
            params.session_id,
            params.messages,
            dropped=len(params.messages) - kept,
            added=len(reply["messages"]) - kept,
        )

    result = await daemon.services.session_memory.compact(
        project, params.session_id, params.messages, compacted
    )
    # The recalled memories went with the compacted messages: they may be recalled again.
    daemon.services.surfaced.forget(project.root, params.session_id)
    return result


METHODS = (method("compact", CompactParams, compact),)
