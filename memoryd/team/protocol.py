"""Wire vocabulary shared by the team sync client and the team server (pure, no I/O)."""

from __future__ import annotations

import hashlib

# The one endpoint of the team memory protocol (docs/team-server.md).
TEAM_MEMORY_PATH = "/api/claude_code/team_memory"

CHECKSUM_PREFIX = "sha256:"


def checksum(content: str) -> str:
    """The per-entry checksum both sides compare: `sha256:<hex of the UTF-8 bytes>`."""
    return CHECKSUM_PREFIX + hashlib.sha256(content.encode("utf-8")).hexdigest()
