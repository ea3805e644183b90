"""The one place the daemon is put together.

`Services` builds every layer service with its collaborators, in the order written below,
and says what the daemon does with them: the after-turn hooks (in the order they run, each
returning its own keys of `scheduled`), the index providers of `get_context`, the work
started once the socket listens, the parts of `status`, and what is closed at shutdown
(in reverse order of building). `rpc_methods` is the table of every RPC method.

Cheap services are built at once. The background writers (extraction, dream, MagicDocs,
session memory) and team sync are built on first use, and their modules imported then.

Where things go: a new RPC method is a handler in a `daemon/methods/` module, listed in that
module's `METHODS` (a new module is added to `rpc_methods` below); a new layer service is a
class in its layer taking its collaborators in its constructor, built here; a new background
worker is a coroutine the service starts with `Host.spawn`, triggered from an after-turn hook
or from `on_start` here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import structlog

from memoryd.automem.context import automem_index
from memoryd.automem.recall.surfaced import SurfacedMemories
from memoryd.automem.service import AutoMemory
from memoryd.core.host import Closable
from memoryd.core.project import Project
from memoryd.core.turn import Turn
from memoryd.daemon.methods import background, compact, context, core, memory, team, turns
from memoryd.daemon.projects import Projects
from memoryd.daemon.rpc import MethodSpec
from memoryd.daemon.state_upkeep import tidy_state
from memoryd.rules.model import ContextContribution
from memoryd.rules.service import InstructionFiles
from memoryd.rules.sessions import SessionPaths

if TYPE_CHECKING:
    from memoryd.automem.dream import Dream
    from memoryd.automem.extraction import Extraction
    from memoryd.daemon.app import Daemon
    from memoryd.magicdocs import MagicDocs
    from memoryd.session.service import SessionMemory
    from memoryd.team.service import TeamSync

log = structlog.get_logger("memoryd.daemon")

AfterTurnHook = Callable[[Turn], Awaitable[dict[str, Any]]]
IndexProvider = Callable[[Project], Awaitable[ContextContribution]]


C = TypeVar("C", bound=Closable)


class FeatureStatus(Protocol):
    def feature_status(self) -> dict[str, Any]: ...


def rpc_methods() -> dict[str, MethodSpec]:
    """Every RPC method the daemon serves, by name."""
    table: dict[str, MethodSpec] = {}
    for module in (core, context, memory, turns, compact, background, team):
        for spec in module.METHODS:
            if spec.name in table:
                raise RuntimeError(f"RPC method {spec.name!r} defined twice")
            table[spec.name] = spec
    return table


class Services:
    def __init__(self, host: Daemon) -> None:
        self._host = host
        self._config = config = host.config
        self._closables: list[Closable] = []  # in the order built
        self.projects = Projects()
        self.session_paths = SessionPaths()
        self.surfaced = SurfacedMemories()
        self.automem = self._closing(AutoMemory(host, flag_settings=config.flag_settings))
        self.instructions = self._closing(
            InstructionFiles(
                host, flag_settings=config.flag_settings, watch_files=config.watch_files
            )
        )
        # `after_turn` runs these in this order; each returns only its own keys of `scheduled`.
        self.after_turn_hooks: list[AfterTurnHook] = [
            self._magic_docs_after_turn,
            self._extraction_after_turn,
            self._dream_after_turn,
            self._session_memory_after_turn,
            self._team_after_turn,
        ]
        # `get_context` awaits these on every call and adds their entries after the files.
        self.index_providers: list[IndexProvider] = [
            self._automem_index,
            self._team_on_context,
        ]

    def _closing(self, service: C) -> C:
        self._closables.append(service)
        return service

    # -- built on first use ------------------------------------------------------------------
    @cached_property
    def extraction(self) -> Extraction:
        from memoryd.automem.extraction import Extraction

        return self._closing(Extraction(self._host, self.automem))

    @cached_property
    def dream(self) -> Dream:
        from memoryd.automem.dream import Dream

        return self._closing(Dream(self._host, self.automem, self.extraction))

    @cached_property
    def magic_docs(self) -> MagicDocs:
        from memoryd.magicdocs import MagicDocs

        return self._closing(MagicDocs(self._host, self.automem.settings))

    @cached_property
    def session_memory(self) -> SessionMemory:
        from memoryd.session.service import SessionMemory

        return SessionMemory(
            self._host,
            on_compacted=self.instructions.drop,
            reply_limit=self._config.reply_limit,
            settings=self.automem.settings,
        )

    @cached_property
    def team(self) -> TeamSync:
        from memoryd.team.service import TeamSync

        return self._closing(
            TeamSync(self._host, self.automem, self.projects.resolve, config=self._config.team)
        )

    # -- after a turn ------------------------------------------------------------------------
    async def _magic_docs_after_turn(self, turn: Turn) -> dict[str, Any]:
        return {"magic_docs": await self.magic_docs.on_turn(turn)}

    async def _extraction_after_turn(self, turn: Turn) -> dict[str, Any]:
        return {"extraction": self.extraction.on_turn(turn)}

    async def _dream_after_turn(self, turn: Turn) -> dict[str, Any]:
        self.dream.on_turn(turn)
        return {}

    async def _session_memory_after_turn(self, turn: Turn) -> dict[str, Any]:
        return {"session_memory": await self.session_memory.on_turn(turn)}

    async def _team_after_turn(self, turn: Turn) -> dict[str, Any]:
        """Bookkeeping only: make sure the project's team folder is syncing."""
        self.team.ensure(turn.project)
        return {}

    # -- get_context -------------------------------------------------------------------------
    async def _automem_index(self, project: Project) -> ContextContribution:
        return await automem_index(self.automem, project)

    async def _team_on_context(self, project: Project) -> ContextContribution:
        """A session starts: begin syncing its team folder, or pull teammates' edits if the
        last pull is over a minute old (adds no entries; the team index itself is auto
        memory's TeamMem entry)."""
        self.team.ensure(project, refresh=True)
        return ContextContribution()

    # -- the daemon's life -------------------------------------------------------------------
    def on_start(self) -> None:
        """Once the socket listens: remove what writers killed mid-write left and hook
        sessions long over, resume the team folders that synced before."""
        self._host.spawn(asyncio.to_thread(tidy_state), worker="startup:tidy_state")
        if self._config.team.url is not None:
            self._host.spawn(self.team.resume_saved(), worker="startup:resume_team_sync")

    def feature_status(self) -> dict[str, Any]:
        """Every feature's part of `status.features`, in a fixed order."""
        parts: tuple[FeatureStatus, ...] = (
            self.automem,
            self.instructions,
            self.extraction,
            self.session_memory,
            self.magic_docs,
            self.dream,
            self.team,
        )
        features: dict[str, Any] = {}
        for part in parts:
            features.update(part.feature_status())
        return features

    def status_counts(self) -> dict[str, int]:
        return {
            **self.projects.status_extra(),
            **self.session_paths.status_extra(),
            **self.session_memory.status_extra(),
        }

    async def close(self) -> list[tuple[str, BaseException]]:
        """Close every service built, newest first; the failures, by service name."""
        failed: list[tuple[str, BaseException]] = []
        for service in reversed(self._closables):
            try:
                await service.close()
            except Exception as exc:
                failed.append((type(service).__name__, exc))
        return failed
