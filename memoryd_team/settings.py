"""The server's limits, read once at startup and frozen (they cannot change under a request)."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_ENTRIES = 10_000
# SPEC.md batches PUT bodies to 200,000 bytes but lets one entry of up to 250,000 bytes go
# alone; JSON escaping can inflate that, so the body cap leaves generous room above it.
DEFAULT_MAX_BODY_BYTES = 2 * 1024 * 1024
DEFAULT_MAX_ENTRY_BYTES = 250_000


@dataclass(frozen=True, slots=True)
class ServerSettings:
    max_entries: int | None = DEFAULT_MAX_ENTRIES
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES
    secret_scan: bool = True

    def __post_init__(self) -> None:
        if self.max_entries is not None and self.max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        if self.max_body_bytes < 1024:
            raise ValueError("max_body_bytes must be at least 1024")
        if self.max_entry_bytes < 1:
            raise ValueError("max_entry_bytes must be at least 1")
