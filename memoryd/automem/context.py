"""The AutoMem / TeamMem entries of `get_context`, through the instruction-file provider hook."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from memoryd.automem.instructions import memory_instructions
from memoryd.automem.service import AutoMemory
from memoryd.errors import FeatureUnavailable, ForbiddenPath
from memoryd.rules.providers import ContextContribution, IndexEntry, register_index_provider

if TYPE_CHECKING:
    from memoryd.daemon.app import Daemon
    from memoryd.daemon.projects import Project


@register_index_provider
async def automem_index(daemon: Daemon, project: Project) -> ContextContribution:
    """MEMORY.md then team/MEMORY.md, each cut to its caps; nothing when auto memory is off."""
    am = daemon.service(AutoMemory)
    try:
        memory_dir = am.memory_dir(project)
    except FeatureUnavailable:
        return ContextContribution()
    except ForbiddenPath as exc:
        am.warnings.append(exc.message)
        return ContextContribution()
    entries: list[IndexEntry] = []
    truncated = False
    kinds: tuple[tuple[bool, Literal["AutoMem", "TeamMem"]], ...] = (
        (False, "AutoMem"),
        (True, "TeamMem"),
    )
    for team, kind in kinds:
        view = am.read_index(project, team=team)
        if not view.path.is_file():
            continue
        entries.append(IndexEntry(view.path, kind, view.text, view.truncated))
        truncated = truncated or view.truncated
    return ContextContribution(
        entries=entries,
        memory_dir=str(memory_dir),
        memory_instructions=memory_instructions(memory_dir),
        index_truncated=truncated,
    )
