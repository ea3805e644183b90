"""What of a recall query is read: its start and its end, where a prompt usually says what it
wants. The local ranker's cost grows with the query's words and it runs on the event loop (a
100,000-character query held the daemon for 2 s at 10,000 memories); the model selector is
billed by the token. Both read the same excerpt, so they answer the same question."""

from __future__ import annotations

QUERY_EXCERPT_CHARS = 8_000


def query_excerpt(query: str) -> str:
    """`query` itself when short; else its first and last QUERY_EXCERPT_CHARS / 2 characters."""
    if len(query) <= QUERY_EXCERPT_CHARS:
        return query
    half = QUERY_EXCERPT_CHARS // 2
    return f"{query[:half]}\n{query[-half:]}"
