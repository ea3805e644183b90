"""What happens after a turn: the hooks `after_turn` runs, and what they are given.

Features that react to a finished turn (memory extraction, session memory, MagicDocs)
register an `AfterTurnHook` with `@after_turn_hook`. A hook does bookkeeping only — it must
return quickly — and starts real work with `daemon.spawn`. It returns the part of the
`scheduled` result it owns, e.g. `{"extraction": True}`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from memoryd.core.turn import Turn

if TYPE_CHECKING:
    from memoryd.daemon.app import Daemon


AfterTurnHook = Callable[["Daemon", Turn], Awaitable[dict[str, Any]]]
AFTER_TURN_HOOKS: list[AfterTurnHook] = []


def after_turn_hook(hook: AfterTurnHook) -> AfterTurnHook:
    AFTER_TURN_HOOKS.append(hook)
    return hook
