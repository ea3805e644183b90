"""`team.status`, `team.pull`, `team.push` — and when team sync starts for a project.

A project's team folder starts syncing when a session asks for its context (`get_context`),
after a turn, on any `team.*` call, when a team memory is written through the daemon
(`methods/memory.py`), and at daemon start when it synced before. Failures talking to the server
are results (`ok: false` with the error), not RPC errors: the sync state is the answer either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memoryd.core.turn import Turn
from memoryd.daemon.params import Cwd
from memoryd.daemon.projects import Projects
from memoryd.daemon.registry import Params, on_daemon_start, rpc_method
from memoryd.daemon.turns import after_turn_hook
from memoryd.rules.providers import ContextContribution, register_index_provider
from memoryd.team.service import TeamSync, describe_state
from memoryd.team.sync.client import TeamHTTPError
from memoryd.team.sync.engine import SyncSuppressed

if TYPE_CHECKING:
    from memoryd.core.project import Project
    from memoryd.daemon.app import Daemon


class TeamParams(Params):
    cwd: Cwd


@rpc_method("team.status", TeamParams)
async def team_status(daemon: Daemon, params: TeamParams) -> dict[str, Any]:
    """Sync state of the project's team folder: repo, server, ETag, last result, pending, skipped."""
    project = daemon.service(Projects).resolve(params.cwd)
    return await daemon.service(TeamSync).describe(project)


@rpc_method("team.pull", TeamParams)
async def team_pull(daemon: Daemon, params: TeamParams) -> dict[str, Any]:
    """Pull now (server wins per key; local edits that would be lost are saved aside)."""
    project = daemon.service(Projects).resolve(params.cwd)
    folder = await daemon.service(TeamSync).started(project)
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


@rpc_method("team.push", TeamParams)
async def team_push(daemon: Daemon, params: TeamParams) -> dict[str, Any]:
    """Push the local changes now (delta by checksum, secrets never uploaded)."""
    project = daemon.service(Projects).resolve(params.cwd)
    folder = await daemon.service(TeamSync).started(project)
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


@after_turn_hook
async def start_team_sync(daemon: Daemon, turn: Turn) -> dict[str, Any]:
    """Bookkeeping only: make sure the project's team folder is syncing."""
    daemon.service(TeamSync).ensure(turn.project)
    return {}


@register_index_provider
async def start_team_sync_with_context(daemon: Daemon, project: Project) -> ContextContribution:
    """`get_context` starts a session: begin syncing its team folder, or pull teammates'
    edits if the last pull is over a minute old (adds no entries; the team index itself is
    auto memory's TeamMem entry)."""
    daemon.service(TeamSync).ensure(project, refresh=True)
    return ContextContribution()


@on_daemon_start
async def resume_team_sync(daemon: Daemon) -> None:
    if daemon.config.team.url is not None:
        await daemon.service(TeamSync).resume_saved()
