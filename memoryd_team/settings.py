"""The server's limits, read once at startup and frozen (they cannot change under a request)."""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_MAX_ENTRIES = 10_000
# SPEC.md batches PUT bodies to 200,000 bytes but lets one entry of up to 250,000 bytes go
# alone; JSON escaping can inflate that, so the body cap leaves generous room above it.
DEFAULT_MAX_BODY_BYTES = 2 * 1024 * 1024
DEFAULT_MAX_ENTRY_BYTES = 250_000
# Reads stay bounded whatever a repository's size: a page holds entries until their contents
# reach PAGE_BYTES (plus at most one entry), and the unpaged listing old clients ask for is
# refused (413 paging_required) past FULL_BYTES, read row by row so it never holds more.
DEFAULT_PAGE_BYTES = 2 * 1024 * 1024
DEFAULT_FULL_BYTES = 8 * 1024 * 1024
# GET bodies kept encoded per server process (app.ReplyCache): a repository's first page is
# built once per state, not once per teammate pulling it.
DEFAULT_REPLY_CACHE_BYTES = 32 * 1024 * 1024
# Each wait on PostgreSQL (connect, a pooled connection, one statement); a stalled request costs
# about two of them (the statement, then its cancellation), to stay inside a client's 30 s.
DEFAULT_DATABASE_TIMEOUT_S = 5.0
# A client that sends no byte of its body for this long has stalled (a laptop asleep, a dropped
# VPN; its own write timeout is 30 s): a 503 body_timeout and the connection closed, not held
# for ever (a 503, not a 408: clients stop pushing on any 4xx but 409/429, SPEC.md Layer 4).
DEFAULT_BODY_TIMEOUT_S = 30.0
# A connection's request line and headers must arrive within this long of it opening, or of
# the previous reply (a client sends them at once; its connect timeout is 10 s): one that
# says nothing, or drips a header line every few seconds, no longer holds a connection.
DEFAULT_HEADER_TIMEOUT_S = 10.0
# A reply the client stopped reading: no progress for this long, or not drained within
# REPLY_TOTAL_WAITS times it, and the connection is aborted (its own read timeout is 30 s).
DEFAULT_WRITE_TIMEOUT_S = 30.0
REPLY_TOTAL_WAITS = 4
# On SIGTERM, requests still in flight after this long are cancelled: a stalled client must
# not keep a restart waiting for ever (uvicorn's default) or until the supervisor's SIGKILL.
SHUTDOWN_GRACE_S = 10


@dataclass(frozen=True, slots=True)
class ServerSettings:
    max_entries: int | None = DEFAULT_MAX_ENTRIES
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES
    secret_scan: bool = True
    page_bytes: int = DEFAULT_PAGE_BYTES
    full_bytes: int = DEFAULT_FULL_BYTES
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    # The connection's own deadlines (memoryd_team/connection.py), set on its protocol.
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    write_timeout_s: float = DEFAULT_WRITE_TIMEOUT_S
    reply_cache_bytes: int = DEFAULT_REPLY_CACHE_BYTES

    def __post_init__(self) -> None:
        if self.max_entries is not None and self.max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        if self.max_body_bytes < 1024:
            raise ValueError("max_body_bytes must be at least 1024")
        if self.max_entry_bytes < 1:
            raise ValueError("max_entry_bytes must be at least 1")
        if self.page_bytes < 1 or self.full_bytes < 1:
            raise ValueError("page_bytes and full_bytes must be at least 1")
        if self.reply_cache_bytes < 0:
            raise ValueError("reply_cache_bytes must be at least 0")
        for name in ("body_timeout_s", "header_timeout_s", "write_timeout_s"):
            seconds = getattr(self, name)
            # nan or inf would leave a stalled connection held for ever.
            if not (seconds > 0 and math.isfinite(seconds)):
                raise ValueError(f"{name} must be a positive, finite number of seconds")
