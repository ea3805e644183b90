"""Background writers: extraction (an after_turn hook), MagicDocs and auto dream.

Their after-turn hooks are in `daemon/wiring.py`; this module serves:
- `memory.dream {cwd, wait?}` — consolidate that project's memory dir now (`memctl dream`);
- `magicdocs.list {cwd?}` — the registered magic docs (of one project, or all).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import StrictBool

from memoryd.daemon.params import Cwd
from memoryd.daemon.rpc import Params, method

if TYPE_CHECKING:
    from memoryd.daemon.app import Daemon


class DreamParams(Params):
    cwd: Cwd
    wait: StrictBool = True  # "yes" or 1 is -32602, as docs/protocol.md says of flags


async def memory_dream(daemon: Daemon, params: DreamParams) -> dict[str, Any]:
    """Consolidate one project's auto memory now: merge duplicates, retire, fix the index."""
    project = daemon.services.projects.resolve(params.cwd)
    service = daemon.services.dream
    daemon.model.require()  # a clear -32003 before anything is started
    if not params.wait:
        service.start(project)
        return {"started": True, "project": str(project.root)}
    return {"started": True, **await service.run(project)}


class MagicDocsListParams(Params):
    cwd: Cwd | None = None


async def magicdocs_list(daemon: Daemon, params: MagicDocsListParams) -> dict[str, Any]:
    """The registered magic docs, with their title, instruction and update counts."""
    root = daemon.services.projects.root_of(params.cwd)
    return {"docs": daemon.services.magic_docs.entries(root)}


METHODS = (
    method("memory.dream", DreamParams, memory_dream, writes_several=True, memory_folder=True),
    method("magicdocs.list", MagicDocsListParams, magicdocs_list),
)
