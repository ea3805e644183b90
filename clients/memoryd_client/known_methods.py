"""The methods this client version's daemon serves, each with the params fields it takes.

`memctl call` reads it to tell a typo (a method or field no memoryd of this version has) from a
daemon older than this memctl (one it has and the running daemon has not). Clients never
import memoryd; tests/clients/test_known_methods.py holds this table to the daemon's own.
"""

from __future__ import annotations

PARAMS: dict[str, frozenset[str]] = {
    "after_tool": frozenset({"cwd", "read_paths", "session_id", "tool", "touched_paths"}),
    "after_turn": frozenset(
        {"cwd", "messages", "model", "read_paths", "session_id", "system", "tools", "usage"}
    ),
    "compact": frozenset({"cwd", "messages", "session_id"}),
    "get_context": frozenset({"cwd", "session_id", "setting_sources", "touched_paths"}),
    "includes.approve": frozenset({"cwd"}),
    "includes.list": frozenset({"cwd"}),
    "includes.revoke": frozenset({"cwd"}),
    "magicdocs.list": frozenset({"cwd"}),
    "memory.delete": frozenset({"cwd", "path"}),
    "memory.dream": frozenset({"cwd", "wait"}),
    "memory.history": frozenset({"cwd", "path"}),
    "memory.list": frozenset({"cwd"}),
    "memory.read": frozenset({"cwd", "path"}),
    "memory.reconcile": frozenset({"cwd"}),
    "memory.remember": frozenset({"cwd", "name", "team", "text", "type"}),
    "memory.restore": frozenset({"cwd", "path", "version"}),
    "memory.snapshot": frozenset({"cwd", "expect", "path"}),
    "memory.write": frozenset({"body", "cwd", "description", "file", "name", "team", "type"}),
    "recall": frozenset(
        {
            "already_surfaced",
            "cwd",
            "explain",
            "limit",
            "query",
            "recent_tools",
            "selector",
            "session_id",
        }
    ),
    "rpc.methods": frozenset(),
    "settings.get": frozenset({"cwd"}),
    "settings.set": frozenset({"key", "value"}),
    "shutdown": frozenset(),
    "status": frozenset(),
    "subscribe": frozenset({"events"}),
    "team.pull": frozenset({"cwd"}),
    "team.push": frozenset({"cwd"}),
    "team.status": frozenset({"cwd"}),
}
