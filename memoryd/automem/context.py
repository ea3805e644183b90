"""The AutoMem / TeamMem entries of `get_context`, through the instruction-file provider hook."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from memoryd.automem.instructions import memory_instructions
from memoryd.automem.service import AutoMemory
from memoryd.errors import FeatureUnavailable, ForbiddenPath
from memoryd.rules.providers import ContextContribution, IndexEntry, register_index_provider

if TYPE_CHECKING:
    from memoryd.core.project import Project
    from memoryd.daemon.app import Daemon

_KINDS: tuple[tuple[bool, Literal["AutoMem", "TeamMem"]], ...] = (
    (False, "AutoMem"),
    (True, "TeamMem"),
)


@lru_cache(maxsize=64)
def _instructions(memory_dir: Path) -> str:
    return memory_instructions(memory_dir)


@register_index_provider
async def automem_index(daemon: Daemon, project: Project) -> ContextContribution:
    """MEMORY.md then team/MEMORY.md, each cut to its caps; nothing when auto memory is off.

    Runs on every `get_context`, so it stays on cached views: the checked memory dir and the
    index text per MEMORY.md stat. It also starts the memory dir's first load in the
    background, so the session's first extraction or recall finds the store warm.
    """
    am = daemon.service(AutoMemory)
    try:
        memory_dir = am.memory_dir(project)
    except FeatureUnavailable:
        return ContextContribution()
    except ForbiddenPath as exc:
        am.warnings.append(exc.message)
        return ContextContribution()
    am.warm(memory_dir)
    entries: list[IndexEntry] = []
    truncated = False
    for team, kind in _KINDS:
        view = am.index_text(memory_dir, team=team)
        if view is None:
            continue
        entries.append(IndexEntry(view.path, kind, view.text, view.truncated))
        truncated = truncated or view.truncated
    return ContextContribution(
        entries=entries,
        memory_dir=str(memory_dir),
        memory_instructions=_instructions(memory_dir),
        index_truncated=truncated,
    )
