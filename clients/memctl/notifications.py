"""One line of human text per daemon notification (`memctl watch`, the memory UI)."""

from __future__ import annotations

import os
from typing import Any


def _name(path: Any) -> str:
    return os.path.basename(str(path)) if path else "?"


def describe(message: dict[str, Any]) -> str:
    """'memory saved: x.md' and friends; unknown events are shown with their raw params."""
    event = str(message.get("method", "?"))
    params = message.get("params")
    p: dict[str, Any] = params if isinstance(params, dict) else {}
    if event == "memory/saved":
        return f"memory saved: {_name(p.get('path'))}"
    if event == "session/summary_updated":
        return f"session summary updated: {p.get('session_id', '?')}"
    if event == "team/synced":
        return f"team synced: {p.get('repo', '?')} (pushed {p.get('pushed', 0)}, pulled {p.get('pulled', 0)})"
    if event == "team/secret_blocked":
        return (
            f"team: {_name(p.get('path'))} not uploaded — secret matched rule {p.get('rule', '?')}"
        )
    if event == "team/conflict":
        return f"team conflict: {_name(p.get('path'))} kept as {_name(p.get('saved_as'))}"
    if event == "magicdoc/updated":
        return f"magic doc updated: {_name(p.get('path'))}"
    if event == "worker/error":
        return f"worker error ({p.get('worker', '?')}): {p.get('message', '')}"
    return f"{event}: {p}"
