"""The hook through which other layers add index entries to `get_context`.

Auto memory (and team memory) register one provider each at import time:

    from memoryd.rules.providers import register_index_provider

    @register_index_provider
    async def automem_index(daemon: Daemon, project: Project) -> ContextContribution: ...

`get_context` awaits every provider on every call (providers cache what they need), puts
their entries after the instruction files — types 5 and 6 of SPEC.md — and takes
`memory_dir`, `memory_instructions` and `index_truncated` from them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from memoryd.rules.model import ContextContribution, IndexEntry

if TYPE_CHECKING:
    from memoryd.core.project import Project
    from memoryd.daemon.app import Daemon

IndexProvider = Callable[["Daemon", "Project"], Awaitable[ContextContribution]]

_PROVIDERS: list[IndexProvider] = []

__all__ = [
    "ContextContribution",
    "IndexEntry",
    "IndexProvider",
    "index_providers",
    "register_index_provider",
    "unregister_index_provider",
]


def register_index_provider(provider: IndexProvider) -> IndexProvider:
    """Add `provider` (once; registering it again is a no-op). Usable as a decorator."""
    if provider not in _PROVIDERS:
        _PROVIDERS.append(provider)
    return provider


def unregister_index_provider(provider: IndexProvider) -> None:
    if provider in _PROVIDERS:
        _PROVIDERS.remove(provider)


def index_providers() -> tuple[IndexProvider, ...]:
    return tuple(_PROVIDERS)
