"""`team.status`, `team.pull`, `team.push` — and when team sync starts for a project.

A project's team folder starts syncing when a session asks for its context (`get_context`),
after a turn, on any `team.*` call, when a team memory is written through the daemon
(`methods/memory.py`), and at daemon start when it synced before. Failures talking to the server
are results (`ok: false` with the error), not RPC errors: the sync state is the answer either way.
A folder whose sync is off or stopped (`suppressed`) is answered with `why`, what that means and
what lifts it in words, for a client to show as it is (the editors kept copies of these texts).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from memoryd.daemon.params import Cwd
from memoryd.daemon.rpc import Params, method
from memoryd.team.service import describe_state, refused_op, why_off
from memoryd.team.sync.client import TeamHTTPError
from memoryd.team.sync.engine import SyncEngine, SyncSuppressed

if TYPE_CHECKING:
    from memoryd.daemon.app import Daemon


class TeamParams(Params):
    cwd: Cwd


async def team_status(daemon: Daemon, params: TeamParams) -> dict[str, Any]:
    """Sync state of the project's team folder: repo, server, ETag, last result, pending, skipped."""
    project = daemon.services.projects.resolve(params.cwd)
    return await daemon.services.team.describe(project)


async def team_pull(daemon: Daemon, params: TeamParams) -> dict[str, Any]:
    """Pull now (server wins per key; local edits that would be lost are saved aside)."""
    return await _sync_now(daemon, params, _pull)


async def team_push(daemon: Daemon, params: TeamParams) -> dict[str, Any]:
    """Push the local changes now (delta by checksum, secrets never uploaded)."""
    return await _sync_now(daemon, params, _push)


async def _pull(engine: SyncEngine) -> dict[str, Any]:
    report = await engine.pull()
    return {
        "pulled": report.pulled,
        "not_modified": report.not_modified,
        "conflicts": [vars(c) for c in report.conflicts],
    }


async def _push(engine: SyncEngine) -> dict[str, Any]:
    report = await engine.push()
    return {
        "pushed": report.pushed,
        "requests": report.requests,
        "pulled": report.pulled,
        "conflicts_resolved": [
            {"key": c.key, "saved_as": c.saved_as, "at": c.at} for c in report.conflicts
        ],
        "withheld": report.withheld,
    }


async def _sync_now(
    daemon: Daemon,
    params: TeamParams,
    step: Callable[[SyncEngine], Awaitable[dict[str, Any]]],
) -> dict[str, Any]:
    """Run `step` on the project's started folder; its failures are results (`ok: false`),
    saying why sync is off and what lifts it, or the server's HTTP status."""
    project = daemon.services.projects.resolve(params.cwd)
    folder = await daemon.services.team.started(project)
    result: dict[str, Any]
    try:
        result = {"ok": True, **await step(folder.engine)}
    except SyncSuppressed as exc:
        result = {"ok": False, "error": why_off(str(exc), refused_op(folder.engine.state))}
    except TeamHTTPError as exc:
        result = {"ok": False, "error": str(exc), "http_status": exc.status}
    return {**describe_state(folder), **result}


METHODS = (
    method("team.status", TeamParams, team_status, memory_folder=True),
    method("team.pull", TeamParams, team_pull, writes_several=True, memory_folder=True),
    method("team.push", TeamParams, team_push, writes_several=True, memory_folder=True),
)
