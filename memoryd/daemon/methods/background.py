"""Background writers: extraction (an after_turn hook), MagicDocs and auto dream.

Importing this module registers their `after_turn` hooks and serves:
- `memory.dream {cwd, wait?}` — consolidate that project's memory dir now (`memctl dream`);
- `magicdocs.list {cwd?}` — the registered magic docs (of one project, or all).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryd import magicdocs
from memoryd.automem import dream, extraction  # noqa: F401 - registers their after_turn hooks
from memoryd.daemon.params import Cwd
from memoryd.daemon.projects import Projects
from memoryd.daemon.registry import Params, rpc_method

if TYPE_CHECKING:
    from memoryd.daemon.app import Daemon


class DreamParams(Params):
    cwd: Cwd
    wait: bool = True


@rpc_method("memory.dream", DreamParams)
async def memory_dream(daemon: Daemon, params: DreamParams) -> dict[str, Any]:
    """Consolidate one project's auto memory now: merge duplicates, retire, fix the index."""
    project = daemon.service(Projects).resolve(params.cwd)
    service = daemon.service(dream.Dream)
    daemon.model.require()  # a clear -32003 before anything is started
    if not params.wait:
        daemon.spawn(service.run(project), worker=dream.WORKER)
        return {"started": True, "project": str(project.root)}
    return {"started": True, **await service.run(project)}


class MagicDocsListParams(Params):
    cwd: Cwd | None = None


@rpc_method("magicdocs.list", MagicDocsListParams)
async def magicdocs_list(daemon: Daemon, params: MagicDocsListParams) -> dict[str, Any]:
    """The registered magic docs, with their title, instruction and update counts."""
    root: Path | None = None
    if params.cwd is not None:
        root = daemon.service(Projects).resolve(params.cwd).root
    return {"docs": daemon.service(magicdocs.MagicDocs).entries(root)}
