"""The daemon's own configuration, fixed once read (a frozen dataclass)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from memoryd import paths
from memoryd.core.model_config import ModelConfig
from memoryd.core.team_config import TeamConfig
from memoryd.daemon.limits import (
    DEFAULT_INPUT_BUFFER_CAP,
    DEFAULT_LINE_LIMIT,
    DEFAULT_REPLY_LIMIT,
    STALLED_LINE_S,
)


@dataclass(frozen=True)
class DaemonConfig:
    socket_path: Path = field(default_factory=paths.default_socket_path)
    line_limit: int = DEFAULT_LINE_LIMIT
    input_buffer_cap: int = DEFAULT_INPUT_BUFFER_CAP
    stalled_line_s: float = STALLED_LINE_S
    reply_limit: int = DEFAULT_REPLY_LIMIT
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
