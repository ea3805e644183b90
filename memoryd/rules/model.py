"""The shared vocabulary of Layer 1: file types, load reasons, skip reasons, results."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

FileType = Literal["Managed", "User", "Project", "Local", "AutoMem", "TeamMem"]
LoadReason = Literal["session_start", "nested", "path_glob", "include"]
# The setting sources an agent runs with (Claude Code's `--setting-sources`) and the instruction
# files each brings: User files only when the user source is on (SPEC.md, Layer 1).
SettingSource = Literal["user", "project", "local"]
ALL_SOURCES: frozenset[SettingSource] = frozenset({"user", "project", "local"})
SOURCE_TYPES: dict[SettingSource, FileType] = {
    "user": "User",
    "project": "Project",
    "local": "Local",
}
SkipReason = Literal[
    "missing",
    "not_a_file",
    "binary",
    "not_utf8",
    "not_text",
    "unreadable",
    "symlink_loop",
    "external",
    "cycle",
    "duplicate",
    "depth",
    "excluded",
    "too_large",
    "too_many",
    "bad_frontmatter",
    "paths_not_matched",
    "agents_md_disabled",
    "provider_error",
]

# Types whose includes may not leave the project unless the user approved it (SPEC, External gate).
GATED_TYPES: frozenset[FileType] = frozenset({"Managed", "Project", "Local"})


@dataclass(frozen=True)
class LoadedFile:
    path: Path
    type: FileType
    reason: LoadReason
    content: str
    parent: Path | None = None
    globs: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Skipped:
    path: Path
    reason: SkipReason
    detail: str
    parent: Path | None = None


@dataclass(frozen=True)
class ContextRequest:
    """Everything the loader needs, already read from the environment and settings."""

    cwd: Path
    project_root: Path
    config_dir: Path
    managed_dir: Path
    home: Path
    worktree_root: Path | None = None
    touched: frozenset[Path] = frozenset()
    excludes: tuple[str, ...] = ()
    agents_md_fallback: bool = True
    max_include_depth: int = 5
    external_approved: bool = False
    sources: frozenset[SettingSource] = ALL_SOURCES

    @property
    def rules_base(self) -> Path:
        """What `paths:` of Managed and User rules are relative to: the working tree's root."""
        return self.worktree_root or self.project_root


@dataclass(frozen=True)
class Condition:
    """A conditional rule's `paths:` as judged in a load, and what they are relative to."""

    patterns: tuple[str, ...]
    base: Path


@dataclass(frozen=True)
class ContextResult:
    files: tuple[LoadedFile, ...]
    skipped: tuple[Skipped, ...]
    warnings: tuple[str, ...] = ()
    # What the touched paths were judged against, beyond the nested folders: a load with other
    # touched paths is the same load when these come out the same (rules/service.py).
    conditions: tuple[Condition, ...] = ()


@dataclass(frozen=True)
class IndexEntry:
    """An auto memory or team memory index, contributed by an index provider."""

    path: Path
    type: Literal["AutoMem", "TeamMem"]
    content: str
    truncated: bool = False


@dataclass(frozen=True)
class ContextContribution:
    """What one index provider adds to `get_context`."""

    entries: list[IndexEntry] = field(default_factory=list)
    memory_dir: str | None = None
    memory_instructions: str = ""
    index_truncated: bool = False
