"""`team.status`, `team.pull`, `team.push` — and when team sync starts for a project.

A project's team folder starts syncing when a session asks for its context (`get_context`),
after a turn, on any `team.*` call, when a team memory is written through the daemon
(`methods/memory.py`), and at daemon start when it synced before. Failures talking to the server
are results (`ok: false` with the error), not RPC errors: the sync state is the answer either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memoryd.daemon.params import Cwd
from memoryd.daemon.rpc import Params, method
from memoryd.team.service import describe_state
from memoryd.team.sync.client import TeamHTTPError
from memoryd.team.sync.engine import SyncSuppressed

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
    project = daemon.services.projects.resolve(params.cwd)
    folder = await daemon.services.team.started(project)
    result: dict[str, Any] = {"ok": True}
    try:
        report = await folder.engine.pull()
    except SyncSuppressed as exc:
        result = {"ok": False, "error": f"team sync is off for this folder: {exc}"}
    except TeamHTTPError as exc:
        result = {"ok": False, "error": str(exc), "http_status": exc.status}
    else:
        result.update(
            pulled=report.pulled,
            not_modified=report.not_modified,
            conflicts=[vars(c) for c in report.conflicts],
        )
    return {**describe_state(folder), **result}


async def team_push(daemon: Daemon, params: TeamParams) -> dict[str, Any]:
    """Push the local changes now (delta by checksum, secrets never uploaded)."""
    project = daemon.services.projects.resolve(params.cwd)
    folder = await daemon.services.team.started(project)
    result: dict[str, Any] = {"ok": True}
    try:
        report = await folder.engine.push()
    except SyncSuppressed as exc:
        result = {
            "ok": False,
            "error": f"pushing is suppressed ({exc}); delete a file in team/ or restart memoryd "
            "to try again once the cause is fixed",
        }
    except TeamHTTPError as exc:
        result = {"ok": False, "error": str(exc), "http_status": exc.status}
    else:
        result.update(
            pushed=report.pushed,
            requests=report.requests,
            pulled=report.pulled,
            conflicts_resolved=[
                {"key": c.key, "saved_as": c.saved_as, "at": c.at} for c in report.conflicts
            ],
            withheld=report.withheld,
        )
    return {**describe_state(folder), **result}


METHODS = (
    method("team.status", TeamParams, team_status),
    method("team.pull", TeamParams, team_pull),
    method("team.push", TeamParams, team_push),
)
