"""One typed method per RPC of docs/protocol.md, for the sync and the async client.

Both mixins only need `call(method, params)`; `Client` and `AsyncClient` provide it. Optional
arguments left at None are not sent, so the daemon's defaults apply. `SyncMethods` is written by
hand; `AsyncMethods` is generated from it by scripts/gen_client_methods.py and kept as plain
code so type checkers and readers see every signature (a test fails when the two drift).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from memoryd_client.types import (
        AfterTurnResult,
        CompactResult,
        ContextResult,
        MemoryListResult,
        MemoryReadResult,
        MemoryWriteResult,
        RecallResult,
        SettingsResult,
        StatusResult,
    )


def _params(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def _list(items: Sequence[Any] | None) -> list[Any] | None:
    return None if items is None else [dict(i) if isinstance(i, Mapping) else i for i in items]


def _dict(mapping: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if mapping is None else dict(mapping)


class SyncMethods:
    """Typed methods over a blocking `call`."""

    if TYPE_CHECKING:

        def call(self, method: str, params: dict[str, Any] | None = None) -> Any: ...

    def get_context(
        self,
        cwd: str,
        *,
        session_id: str | None = None,
        touched_paths: Sequence[str] | None = None,
        setting_sources: Sequence[str] | None = None,
    ) -> ContextResult:
        """`get_context`: Instruction files, index and memory instructions for `cwd`."""
        return cast(
            "ContextResult",
            self.call(
                "get_context",
                _params(
                    cwd=cwd,
                    session_id=session_id,
                    touched_paths=_list(touched_paths),
                    setting_sources=_list(setting_sources),
                ),
            ),
        )

    def recall(
        self,
        cwd: str,
        query: str,
        *,
        session_id: str | None = None,
        recent_tools: Sequence[str] | None = None,
        already_surfaced: Sequence[str] | None = None,
        limit: int | None = None,
        selector: str | None = None,
        explain: bool | None = None,
    ) -> RecallResult:
        """`recall`: Up to `limit` (1-5) memories relevant to `query`; `selector` "local"
        skips the model; with `explain`, each memory says what the local ranker saw in it."""
        return cast(
            "RecallResult",
            self.call(
                "recall",
                _params(
                    cwd=cwd,
                    query=query,
                    session_id=session_id,
                    recent_tools=_list(recent_tools),
                    already_surfaced=_list(already_surfaced),
                    limit=limit,
                    selector=selector,
                    explain=explain,
                ),
            ),
        )

    def after_turn(
        self,
        session_id: str,
        cwd: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        read_paths: Sequence[str] | None = None,
        usage: Mapping[str, Any] | None = None,
        system: Any = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        model: str | None = None,
    ) -> AfterTurnResult:
        """`after_turn`: Report a finished turn; the daemon schedules its background writers."""
        return cast(
            "AfterTurnResult",
            self.call(
                "after_turn",
                _params(
                    session_id=session_id,
                    cwd=cwd,
                    messages=_list(messages),
                    read_paths=_list(read_paths),
                    usage=_dict(usage),
                    system=system,
                    tools=_list(tools),
                    model=model,
                ),
            ),
        )

    def after_tool(
        self,
        session_id: str,
        cwd: str,
        *,
        tool: str | None = None,
        read_paths: Sequence[str] | None = None,
        touched_paths: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """`after_tool`: Report the files one tool call read or touched (rules, MagicDocs)."""
        return cast(
            "dict[str, Any]",
            self.call(
                "after_tool",
                _params(
                    session_id=session_id,
                    cwd=cwd,
                    tool=tool,
                    read_paths=_list(read_paths),
                    touched_paths=_list(touched_paths),
                ),
            ),
        )

    def compact(
        self, session_id: str, cwd: str, messages: Sequence[Mapping[str, Any]]
    ) -> CompactResult:
        """`compact`: Compact the transcript from the session summary when there is one."""
        return cast(
            "CompactResult",
            self.call("compact", _params(session_id=session_id, cwd=cwd, messages=_list(messages))),
        )

    def memory_list(self, cwd: str) -> MemoryListResult:
        """`memory.list`: Instruction files in effect and the auto memories of the project."""
        return cast("MemoryListResult", self.call("memory.list", _params(cwd=cwd)))

    def memory_read(self, cwd: str, path: str) -> MemoryReadResult:
        """`memory.read`: One memory file with its frontmatter."""
        return cast("MemoryReadResult", self.call("memory.read", _params(cwd=cwd, path=path)))

    def memory_write(
        self,
        cwd: str,
        *,
        type: str,
        name: str,
        description: str,
        body: str,
        team: bool | None = None,
        file: str | None = None,
    ) -> MemoryWriteResult:
        """`memory.write`: Write (create or update) one memory and its index line."""
        return cast(
            "MemoryWriteResult",
            self.call(
                "memory.write",
                _params(
                    cwd=cwd,
                    type=type,
                    name=name,
                    description=description,
                    body=body,
                    team=team,
                    file=file,
                ),
            ),
        )

    def memory_delete(self, cwd: str, path: str) -> dict[str, Any]:
        """`memory.delete`: Delete one memory and its index line."""
        return cast("dict[str, Any]", self.call("memory.delete", _params(cwd=cwd, path=path)))

    def memory_history(self, cwd: str, path: str) -> dict[str, Any]:
        """`memory.history`: Earlier versions of one memory file, newest first."""
        return cast("dict[str, Any]", self.call("memory.history", _params(cwd=cwd, path=path)))

    def memory_restore(self, cwd: str, path: str, version: str) -> dict[str, Any]:
        """`memory.restore`: Bring back an earlier version of a memory file (the current one goes to history)."""
        return cast(
            "dict[str, Any]",
            self.call("memory.restore", _params(cwd=cwd, path=path, version=version)),
        )

    def memory_snapshot(
        self, cwd: str, path: str, expect: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """`memory.snapshot`: Keep a memory file's current text as a version before an outside edit.
        `expect` ({size, mtime_ns}): only if the file still has that stamp, else -32602."""
        return cast(
            "dict[str, Any]",
            self.call("memory.snapshot", _params(cwd=cwd, path=path, expect=_dict(expect))),
        )

    def memory_remember(
        self,
        cwd: str,
        text: str,
        *,
        type: str | None = None,
        name: str | None = None,
        team: bool | None = None,
    ) -> dict[str, Any]:
        """`memory.remember`: Quick-add: the daemon picks type, name and description for `text`."""
        return cast(
            "dict[str, Any]",
            self.call(
                "memory.remember", _params(cwd=cwd, text=text, type=type, name=name, team=team)
            ),
        )

    def memory_reconcile(self, cwd: str) -> dict[str, Any]:
        """`memory.reconcile`: Bring MEMORY.md in step with the memory files after outside edits."""
        return cast("dict[str, Any]", self.call("memory.reconcile", _params(cwd=cwd)))

    def memory_dream(self, cwd: str, *, wait: bool | None = None) -> dict[str, Any]:
        """`memory.dream`: Consolidate the project's auto memory now."""
        return cast("dict[str, Any]", self.call("memory.dream", _params(cwd=cwd, wait=wait)))

    def magicdocs_list(self, cwd: str | None = None) -> dict[str, Any]:
        """`magicdocs.list`: The registered magic docs."""
        return cast("dict[str, Any]", self.call("magicdocs.list", _params(cwd=cwd)))

    def includes_approve(self, cwd: str) -> dict[str, Any]:
        """`includes.approve`: Allow this project's instruction files to include files outside it."""
        return cast("dict[str, Any]", self.call("includes.approve", _params(cwd=cwd)))

    def includes_revoke(self, cwd: str) -> dict[str, Any]:
        """`includes.revoke`: Withdraw the approval of external includes for this project."""
        return cast("dict[str, Any]", self.call("includes.revoke", _params(cwd=cwd)))

    def includes_list(self, cwd: str | None = None) -> dict[str, Any]:
        """`includes.list`: Every approval; with `cwd`, that project's state and refused includes."""
        return cast("dict[str, Any]", self.call("includes.list", _params(cwd=cwd)))

    def rpc_methods(self) -> dict[str, Any]:
        """`rpc.methods`: Every method the daemon serves, with its one-line summary."""
        return cast("dict[str, Any]", self.call("rpc.methods", None))

    def settings_get(self, cwd: str | None = None) -> SettingsResult:
        """`settings.get`: Effective memory settings and where each came from."""
        return cast("SettingsResult", self.call("settings.get", _params(cwd=cwd)))

    def settings_set(self, key: str, value: Any) -> dict[str, Any]:
        """`settings.set`: Write one key to the user settings file."""
        return cast("dict[str, Any]", self.call("settings.set", {"key": key, "value": value}))

    def team_status(self, cwd: str) -> dict[str, Any]:
        """`team.status`: Team sync state of the project's repository."""
        return cast("dict[str, Any]", self.call("team.status", _params(cwd=cwd)))

    def team_pull(self, cwd: str) -> dict[str, Any]:
        """`team.pull`: Pull team memory from the server now."""
        return cast("dict[str, Any]", self.call("team.pull", _params(cwd=cwd)))

    def team_push(self, cwd: str) -> dict[str, Any]:
        """`team.push`: Push local team memory changes now."""
        return cast("dict[str, Any]", self.call("team.push", _params(cwd=cwd)))

    def subscribe(self, events: Sequence[str] | None = None) -> dict[str, Any]:
        """`subscribe`: From now on this connection receives notifications (all, or those named)."""
        return cast("dict[str, Any]", self.call("subscribe", _params(events=_list(events))))

    def status(self) -> StatusResult:
        """`status`: Version, pid, uptime, feature availability."""
        return cast("StatusResult", self.call("status", None))

    def shutdown(self) -> dict[str, Any]:
        """`shutdown`: Ask the daemon to finish in-flight work and exit."""
        return cast("dict[str, Any]", self.call("shutdown", None))


class AsyncMethods:
    """Typed methods over an awaitable `call`."""

    if TYPE_CHECKING:

        async def call(self, method: str, params: dict[str, Any] | None = None) -> Any: ...

    async def get_context(
        self,
        cwd: str,
        *,
        session_id: str | None = None,
        touched_paths: Sequence[str] | None = None,
        setting_sources: Sequence[str] | None = None,
    ) -> ContextResult:
        """`get_context`: Instruction files, index and memory instructions for `cwd`."""
        return cast(
            "ContextResult",
            await self.call(
                "get_context",
                _params(
                    cwd=cwd,
                    session_id=session_id,
                    touched_paths=_list(touched_paths),
                    setting_sources=_list(setting_sources),
                ),
            ),
        )

    async def recall(
        self,
        cwd: str,
        query: str,
        *,
        session_id: str | None = None,
        recent_tools: Sequence[str] | None = None,
        already_surfaced: Sequence[str] | None = None,
        limit: int | None = None,
        selector: str | None = None,
        explain: bool | None = None,
    ) -> RecallResult:
        """`recall`: Up to `limit` (1-5) memories relevant to `query`; `selector` "local"
        skips the model; with `explain`, each memory says what the local ranker saw in it."""
        return cast(
            "RecallResult",
            await self.call(
                "recall",
                _params(
                    cwd=cwd,
                    query=query,
                    session_id=session_id,
                    recent_tools=_list(recent_tools),
                    already_surfaced=_list(already_surfaced),
                    limit=limit,
                    selector=selector,
                    explain=explain,
                ),
            ),
        )

    async def after_turn(
        self,
        session_id: str,
        cwd: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        read_paths: Sequence[str] | None = None,
        usage: Mapping[str, Any] | None = None,
        system: Any = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        model: str | None = None,
    ) -> AfterTurnResult:
        """`after_turn`: Report a finished turn; the daemon schedules its background writers."""
        return cast(
            "AfterTurnResult",
            await self.call(
                "after_turn",
                _params(
                    session_id=session_id,
                    cwd=cwd,
                    messages=_list(messages),
                    read_paths=_list(read_paths),
                    usage=_dict(usage),
                    system=system,
                    tools=_list(tools),
                    model=model,
                ),
            ),
        )

    async def after_tool(
        self,
        session_id: str,
        cwd: str,
        *,
        tool: str | None = None,
        read_paths: Sequence[str] | None = None,
        touched_paths: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """`after_tool`: Report the files one tool call read or touched (rules, MagicDocs)."""
        return cast(
            "dict[str, Any]",
            await self.call(
                "after_tool",
                _params(
                    session_id=session_id,
                    cwd=cwd,
                    tool=tool,
                    read_paths=_list(read_paths),
                    touched_paths=_list(touched_paths),
                ),
            ),
        )

    async def compact(
        self, session_id: str, cwd: str, messages: Sequence[Mapping[str, Any]]
    ) -> CompactResult:
        """`compact`: Compact the transcript from the session summary when there is one."""
        return cast(
            "CompactResult",
            await self.call(
                "compact", _params(session_id=session_id, cwd=cwd, messages=_list(messages))
            ),
        )

    async def memory_list(self, cwd: str) -> MemoryListResult:
        """`memory.list`: Instruction files in effect and the auto memories of the project."""
        return cast("MemoryListResult", await self.call("memory.list", _params(cwd=cwd)))

    async def memory_read(self, cwd: str, path: str) -> MemoryReadResult:
        """`memory.read`: One memory file with its frontmatter."""
        return cast("MemoryReadResult", await self.call("memory.read", _params(cwd=cwd, path=path)))

    async def memory_write(
        self,
        cwd: str,
        *,
        type: str,
        name: str,
        description: str,
        body: str,
        team: bool | None = None,
        file: str | None = None,
    ) -> MemoryWriteResult:
        """`memory.write`: Write (create or update) one memory and its index line."""
        return cast(
            "MemoryWriteResult",
            await self.call(
                "memory.write",
                _params(
                    cwd=cwd,
                    type=type,
                    name=name,
                    description=description,
                    body=body,
                    team=team,
                    file=file,
                ),
            ),
        )

    async def memory_delete(self, cwd: str, path: str) -> dict[str, Any]:
        """`memory.delete`: Delete one memory and its index line."""
        return cast("dict[str, Any]", await self.call("memory.delete", _params(cwd=cwd, path=path)))

    async def memory_history(self, cwd: str, path: str) -> dict[str, Any]:
        """`memory.history`: Earlier versions of one memory file, newest first."""
        return cast(
            "dict[str, Any]", await self.call("memory.history", _params(cwd=cwd, path=path))
        )

    async def memory_restore(self, cwd: str, path: str, version: str) -> dict[str, Any]:
        """`memory.restore`: Bring back an earlier version of a memory file (the current one goes to history)."""
        return cast(
            "dict[str, Any]",
            await self.call("memory.restore", _params(cwd=cwd, path=path, version=version)),
        )

    async def memory_snapshot(
        self, cwd: str, path: str, expect: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """`memory.snapshot`: Keep a memory file's current text as a version before an outside edit.
        `expect` ({size, mtime_ns}): only if the file still has that stamp, else -32602."""
        return cast(
            "dict[str, Any]",
            await self.call("memory.snapshot", _params(cwd=cwd, path=path, expect=_dict(expect))),
        )

    async def memory_remember(
        self,
        cwd: str,
        text: str,
        *,
        type: str | None = None,
        name: str | None = None,
        team: bool | None = None,
    ) -> dict[str, Any]:
        """`memory.remember`: Quick-add: the daemon picks type, name and description for `text`."""
        return cast(
            "dict[str, Any]",
            await self.call(
                "memory.remember", _params(cwd=cwd, text=text, type=type, name=name, team=team)
            ),
        )

    async def memory_reconcile(self, cwd: str) -> dict[str, Any]:
        """`memory.reconcile`: Bring MEMORY.md in step with the memory files after outside edits."""
        return cast("dict[str, Any]", await self.call("memory.reconcile", _params(cwd=cwd)))

    async def memory_dream(self, cwd: str, *, wait: bool | None = None) -> dict[str, Any]:
        """`memory.dream`: Consolidate the project's auto memory now."""
        return cast("dict[str, Any]", await self.call("memory.dream", _params(cwd=cwd, wait=wait)))

    async def magicdocs_list(self, cwd: str | None = None) -> dict[str, Any]:
        """`magicdocs.list`: The registered magic docs."""
        return cast("dict[str, Any]", await self.call("magicdocs.list", _params(cwd=cwd)))

    async def includes_approve(self, cwd: str) -> dict[str, Any]:
        """`includes.approve`: Allow this project's instruction files to include files outside it."""
        return cast("dict[str, Any]", await self.call("includes.approve", _params(cwd=cwd)))

    async def includes_revoke(self, cwd: str) -> dict[str, Any]:
        """`includes.revoke`: Withdraw the approval of external includes for this project."""
        return cast("dict[str, Any]", await self.call("includes.revoke", _params(cwd=cwd)))

    async def includes_list(self, cwd: str | None = None) -> dict[str, Any]:
        """`includes.list`: Every approval; with `cwd`, that project's state and refused includes."""
        return cast("dict[str, Any]", await self.call("includes.list", _params(cwd=cwd)))

    async def rpc_methods(self) -> dict[str, Any]:
        """`rpc.methods`: Every method the daemon serves, with its one-line summary."""
        return cast("dict[str, Any]", await self.call("rpc.methods", None))

    async def settings_get(self, cwd: str | None = None) -> SettingsResult:
        """`settings.get`: Effective memory settings and where each came from."""
        return cast("SettingsResult", await self.call("settings.get", _params(cwd=cwd)))

    async def settings_set(self, key: str, value: Any) -> dict[str, Any]:
        """`settings.set`: Write one key to the user settings file."""
        return cast("dict[str, Any]", await self.call("settings.set", {"key": key, "value": value}))

    async def team_status(self, cwd: str) -> dict[str, Any]:
        """`team.status`: Team sync state of the project's repository."""
        return cast("dict[str, Any]", await self.call("team.status", _params(cwd=cwd)))

    async def team_pull(self, cwd: str) -> dict[str, Any]:
        """`team.pull`: Pull team memory from the server now."""
        return cast("dict[str, Any]", await self.call("team.pull", _params(cwd=cwd)))

    async def team_push(self, cwd: str) -> dict[str, Any]:
        """`team.push`: Push local team memory changes now."""
        return cast("dict[str, Any]", await self.call("team.push", _params(cwd=cwd)))

    async def subscribe(self, events: Sequence[str] | None = None) -> dict[str, Any]:
        """`subscribe`: From now on this connection receives notifications (all, or those named)."""
        return cast("dict[str, Any]", await self.call("subscribe", _params(events=_list(events))))

    async def status(self) -> StatusResult:
        """`status`: Version, pid, uptime, feature availability."""
        return cast("StatusResult", await self.call("status", None))

    async def shutdown(self) -> dict[str, Any]:
        """`shutdown`: Ask the daemon to finish in-flight work and exit."""
        return cast("dict[str, Any]", await self.call("shutdown", None))
