"""How the daemon reaches a model: keys, endpoint, model names, timeouts and retries."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from memoryd.core.env_numbers import env_count, env_seconds


@dataclass(frozen=True)
class ModelConfig:
    """Model access. The SDK reads ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL itself."""

    # Out of repr: a config shown in a log line or a traceback must not carry the credential.
    api_key: str | None = field(default=None, repr=False)
    auth_token: str | None = field(default=None, repr=False)
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
        """Raises EnvNumberError (a ValueError) naming a variable that is not a number."""
        env = os.environ
        defaults = cls()
        return cls(
            api_key=env.get("ANTHROPIC_API_KEY") or None,
            auth_token=env.get("ANTHROPIC_AUTH_TOKEN") or None,
            base_url=env.get("ANTHROPIC_BASE_URL") or None,
            model=env.get("MEMORYD_MODEL", defaults.model),
            small_model=env.get("MEMORYD_SMALL_MODEL", defaults.small_model),
            timeout_s=env_seconds("MEMORYD_MODEL_TIMEOUT", defaults.timeout_s, positive=True),
            max_retries=env_count("MEMORYD_MODEL_RETRIES", defaults.max_retries),
            retry_base_delay_s=env_seconds(
                "MEMORYD_MODEL_RETRY_DELAY", defaults.retry_base_delay_s
            ),
        )
