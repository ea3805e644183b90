"""Result shapes of the methods in docs/protocol.md, as TypedDicts (standard library only).

They describe what the daemon sends; the client does not validate replies against them (the
daemon may add optional fields at any time, see PROTOCOL.md), so every dict is `total=False`.
"""

from __future__ import annotations

from typing import Any, TypedDict


class ContextFile(TypedDict, total=False):
    path: str
    type: str  # Managed | User | Project | Local | AutoMem | TeamMem
    parent: str | None
    reason: str  # session_start | nested | path_glob | include
    globs: list[str] | None


class SkippedFile(TypedDict, total=False):
    path: str
    reason: str


class ContextResult(TypedDict, total=False):
    claude_md: str
    current_date: str
    files: list[ContextFile]
    skipped: list[SkippedFile]
    memory_dir: str
    index_truncated: bool
    memory_instructions: str


class RecallWhy(TypedDict, total=False):
    words: list[str]  # the query's own words the memory holds
    near_words: list[str]  # words it holds only by their first letters (grandma ~ grandmother)
    pasted_words: list[str]  # words of the code or output pasted into the query
    feedback_terms: list[str]  # terms feedback added to the query that it holds (stems)
    date: str  # its date as the ranker reads it (ISO), if it has one
    date_signals: list[str]  # what raised it: "dated as asked", "says when", "same day as …"
    date_from: str  # with a date: "text" (its first full date) or "file" (its last write)
    lexical: float  # its lexical score as a share of the best (0-1)
    semantic: float  # with embeddings: the model's score fused with it
    cosine: float  # with embeddings: its pooled cosine to the query


class RecalledMemory(TypedDict, total=False):
    path: str
    name: str
    description: str
    type: str
    mtime: float
    team: bool
    content: str
    stale: bool
    note: str | None
    why: RecallWhy  # with `explain`


class RecallResult(TypedDict, total=False):
    memories: list[RecalledMemory]
    selector: str  # model | local
    not_ranked: str  # why, when the query names no topic


class Scheduled(TypedDict, total=False):
    extraction: bool
    session_memory: bool
    magic_docs: int


class AfterTurnResult(TypedDict, total=False):
    scheduled: Scheduled
    tokens: int


class CompactResult(TypedDict, total=False):
    messages: list[dict[str, Any]]  # absent when messages_omitted: the caller's list stands
    messages_omitted: bool
    used_session_memory: bool
    reason: str | None


class MemoryEntry(TypedDict, total=False):
    path: str
    name: str
    description: str
    type: str
    mtime: float
    team: bool


class MemoryListResult(TypedDict, total=False):
    instruction_files: list[ContextFile]
    memories: list[MemoryEntry]
    memory_dir: str
    team_dir: str


class MemoryReadResult(TypedDict, total=False):
    path: str
    content: str
    frontmatter: dict[str, Any]


class MemoryWriteResult(TypedDict, total=False):
    path: str
    created: bool
    merged_into: str | None
    warnings: list[str]  # e.g. the text looks like it holds a secret
    secrets: list[dict[str, Any]]  # {field, line, rule, description}; never the secret


class SettingsResult(TypedDict, total=False):
    settings: dict[str, Any]
    sources: dict[str, str]
    files: list[dict[str, Any]]


class StatusResult(TypedDict, total=False):
    version: str
    protocol_version: int
    pid: int
    uptime_s: float
    socket: str
    projects: int
    sessions: int
    model: dict[str, Any]
    features: dict[str, Any]
    methods: list[str]
