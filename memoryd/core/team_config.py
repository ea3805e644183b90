"""Where team memory syncs to: the team server's URL, the token, the push debounce."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from memoryd.core.env_numbers import env_seconds


@dataclass(frozen=True)
class TeamConfig:
    url: str | None = None
    token: str | None = field(default=None, repr=False)  # never in a log line or traceback
    debounce_s: float = 2.0

    @classmethod
    def from_env(cls) -> TeamConfig:
        return cls(
            url=os.environ.get("MEMORYD_TEAM_URL") or None,
            token=os.environ.get("MEMORYD_TEAM_TOKEN") or None,
            # An hour at most: a longer debounce (1e300 was taken) never pushed at all.
            debounce_s=env_seconds("MEMORYD_TEAM_DEBOUNCE", 2.0, most=3_600.0),
        )
