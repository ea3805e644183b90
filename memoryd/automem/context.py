"""The AutoMem / TeamMem entries of `get_context` (an index provider, wired in `daemon/wiring.py`)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from memoryd.automem.instructions import memory_instructions
from memoryd.errors import FeatureUnavailable, ForbiddenPath
from memoryd.rules.model import ContextContribution, IndexEntry

if TYPE_CHECKING:
    from memoryd.automem.service import AutoMemory
    from memoryd.core.project import Project

_KINDS: tuple[tuple[bool, Literal["AutoMem", "TeamMem"]], ...] = (
    (False, "AutoMem"),
    (True, "TeamMem"),
)


@lru_cache(maxsize=64)
def _instructions(memory_dir: Path) -> str:
    return memory_instructions(memory_dir)


async def automem_index(am: AutoMemory, project: Project) -> ContextContribution:
    """MEMORY.md then team/MEMORY.md, each cut to its caps; nothing when auto memory is off.

    Runs on every `get_context`, so it stays on cached views: the checked memory dir and the
    index text per MEMORY.md stat. It also starts the memory dir's first load in the
    background, so the session's first extraction or recall finds the store warm.
    """
    try:
        memory_dir = am.memory_dir(project)
    except FeatureUnavailable:
        return ContextContribution()
    except ForbiddenPath as exc:
        am.dirs.warn(exc.message)
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
