"""The daemon's own configuration, fixed once read (a frozen dataclass)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from memoryd import paths
from memoryd.daemon.protocol import DEFAULT_LINE_LIMIT


@dataclass(frozen=True)
class ModelConfig:
    """Model access. The SDK reads ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL itself."""

    api_key: str | None = None
    auth_token: str | None = None
    base_url: str | None = None
    model: str = "claude-sonnet-4-5"
    small_model: str = "claude-haiku-4-5"
    timeout_s: float = 60.0
    max_retries: int = 4
    retry_base_delay_s: float = 0.5
    retry_max_delay_s: float = 20.0

    @property
    def configured(self) -> bool:
        return bool(self.api_key or self.auth_token)

    @classmethod
    def from_env(cls) -> ModelConfig:
        env = os.environ
        defaults = cls()
        return cls(
            api_key=env.get("ANTHROPIC_API_KEY") or None,
            auth_token=env.get("ANTHROPIC_AUTH_TOKEN") or None,
            base_url=env.get("ANTHROPIC_BASE_URL") or None,
            model=env.get("MEMORYD_MODEL", defaults.model),
            small_model=env.get("MEMORYD_SMALL_MODEL", defaults.small_model),
            timeout_s=float(env.get("MEMORYD_MODEL_TIMEOUT", defaults.timeout_s)),
            max_retries=int(env.get("MEMORYD_MODEL_RETRIES", defaults.max_retries)),
            retry_base_delay_s=float(
                env.get("MEMORYD_MODEL_RETRY_DELAY", defaults.retry_base_delay_s)
            ),
        )


@dataclass(frozen=True)
class TeamConfig:
    url: str | None = None
    token: str | None = None
    debounce_s: float = 2.0

    @classmethod
    def from_env(cls) -> TeamConfig:
        return cls(
            url=os.environ.get("MEMORYD_TEAM_URL") or None,
            token=os.environ.get("MEMORYD_TEAM_TOKEN") or None,
            debounce_s=float(os.environ.get("MEMORYD_TEAM_DEBOUNCE", "2.0")),
        )


@dataclass(frozen=True)
class DaemonConfig:
    socket_path: Path = field(default_factory=paths.default_socket_path)
    line_limit: int = DEFAULT_LINE_LIMIT
    log_file: Path | None = None
    flag_settings: Path | None = None
    # Only this uid may connect; the owner of the daemon by default.
    allowed_uid: int = field(default_factory=os.getuid)
    # Seconds without a connection before the daemon exits; 0 disables.
    idle_timeout_s: float = 0.0
    drain_timeout_s: float = 30.0
    watch_files: bool = True
    model: ModelConfig = field(default_factory=ModelConfig.from_env)
    team: TeamConfig = field(default_factory=TeamConfig.from_env)
