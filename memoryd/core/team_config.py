"""Where team memory syncs to: the team server's URL, the token, the push debounce."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from memoryd.core.env_numbers import env_seconds
from memoryd.core.model_config import url_fault, usable_credential

_RESTART = "in the daemon's environment, then restart memoryd"


@dataclass(frozen=True)
class TeamConfig:
    url: str | None = None
    token: str | None = field(default=None, repr=False)  # never in a log line or traceback
    debounce_s: float = 2.0

    @property
    def problem(self) -> str | None:
        """Why this half-set or mistyped team configuration cannot sync, in words that say
        what to set; None when it can (or when neither variable is set: team sync is off)."""
        if self.url is None and self.token is None:
            return None
        if self.url is None:
            return f"MEMORYD_TEAM_TOKEN is set but MEMORYD_TEAM_URL is not: set the memoryd-team server's URL {_RESTART}"
        fault = url_fault(self.url)
        if fault is not None:
            return f"MEMORYD_TEAM_URL {fault}; set it to the memoryd-team server (http://host:8787) {_RESTART}"
        if self.token is None:
            return (
                "MEMORYD_TEAM_URL is set but MEMORYD_TEAM_TOKEN is not: create one with "
                f"`memoryd-team token create --repo owner/repo` and set it {_RESTART}"
            )
        if not usable_credential(self.token):
            return (
                "MEMORYD_TEAM_TOKEN is not a usable token: it holds whitespace or a character "
                f"that is not printable ASCII (a newline pasted with it?); fix it {_RESTART}"
            )
        return None

    @classmethod
    def from_env(cls) -> TeamConfig:
        return cls(
            url=os.environ.get("MEMORYD_TEAM_URL") or None,
            token=os.environ.get("MEMORYD_TEAM_TOKEN") or None,
            # An hour at most: a longer debounce (1e300 was taken) never pushed at all.
            debounce_s=env_seconds("MEMORYD_TEAM_DEBOUNCE", 2.0, most=3_600.0),
        )
