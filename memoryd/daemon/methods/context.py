"""`get_context` and the external-include approvals: `includes.approve|revoke|list`."""

from __future__ import annotations

import asyncio
import os.path
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
from pydantic import BaseModel, Field

from memoryd.core.project import Project
from memoryd.daemon.params import Cwd, PathTexts, SessionId
from memoryd.daemon.rpc import Params, method
from memoryd.rules import approvals, assembly, realfs, sessions
from memoryd.rules.model import (
    ALL_SOURCES,
    ContextContribution,
    ContextResult,
    FileType,
    IndexEntry,
    LoadReason,
    SettingSource,
)
from memoryd.rules.service import build
from memoryd.rules.sessions import INLINE_TOUCHED, off_loop

if TYPE_CHECKING:
    from memoryd.daemon.app import Daemon

log = structlog.get_logger("memoryd.rules")


class GetContextParams(Params):
    cwd: Cwd
    session_id: SessionId | None = None
    touched_paths: PathTexts | None = None
    # As the agent was started with (`claude --setting-sources project,local`); all by default.
    setting_sources: list[SettingSource] | None = Field(default=None, max_length=3)


class FileInfo(BaseModel):
    path: str
    type: FileType
    parent: str | None
    reason: LoadReason
    globs: list[str] | None


class SkippedInfo(BaseModel):
    path: str
    reason: str
    detail: str
    parent: str | None


class GetContextResult(BaseModel):
    claude_md: str
    current_date: str
    files: list[FileInfo]
    skipped: list[SkippedInfo]
    memory_dir: str | None
    index_truncated: bool
    memory_instructions: str
    warnings: list[str]
    cached: bool


# Touched paths outside the project resolved through symlinks per call: a few lstats each.
MAX_RESOLVED_TOUCHED = 1000


def _touched(
    raw: list[str], given_cwd: str, real_cwd: Path, roots: tuple[Path, ...] = ()
) -> tuple[set[Path], list[str]]:
    """Absolute, normalized paths, a path under the cwd as given moved under the real cwd;
    and those outside the real cwd and `roots` (at most MAX_RESOLVED_TOUCHED), which may be
    spelled through a symlink (`/link/proj/svc/x.py` for a project at `/real/proj`)."""
    prefix = os.path.normpath(given_cwd)
    real = str(real_cwd)
    inside = tuple(str(root).rstrip(os.sep) + os.sep for root in (real_cwd, *roots))
    result: set[Path] = set()
    outside: list[str] = []
    for path in raw:
        if prefix != real and (path == prefix or path.startswith(prefix + os.sep)):
            path = real + path[len(prefix) :]
        result.add(Path(path))
        if len(outside) < MAX_RESOLVED_TOUCHED and not (path + os.sep).startswith(inside):
            outside.append(path)
    return result, outside


def _touched_set(
    raw: list[str], given_cwd: str, real_cwd: Path, roots: tuple[Path, ...]
) -> frozenset[Path]:
    """`_touched`'s paths and the real paths of those outside, at once. Blocking."""
    spelled, outside = _touched(raw, given_cwd, real_cwd, roots)
    return frozenset(spelled | _resolved(outside))


async def _made(
    raw: list[str], given_cwd: str, real_cwd: Path, roots: tuple[Path, ...]
) -> frozenset[Path]:
    """`_touched_set`, in a thread for many paths, or for those outside to resolve."""
    if len(raw) > INLINE_TOUCHED:
        return await asyncio.to_thread(_touched_set, raw, given_cwd, real_cwd, roots)
    spelled, outside = _touched(raw, given_cwd, real_cwd, roots)
    if outside:  # also as their real paths, which the loader judges against the real cwd
        spelled |= await asyncio.to_thread(_resolved, outside)
    return frozenset(spelled)


def _resolved(paths: list[str]) -> set[Path]:
    """Each path's real form (its longest existing prefix resolved). Blocking: a few lstats."""
    return {Path(os.path.realpath(path)) for path in paths}


async def _contributions(
    daemon: Daemon, project: Project
) -> tuple[list[ContextContribution], list[SkippedInfo]]:
    found: list[ContextContribution] = []
    failed: list[SkippedInfo] = []
    for provider in daemon.services.index_providers:
        name = getattr(provider, "__qualname__", repr(provider))
        try:
            found.append(await provider(project))
        except Exception as exc:
            # One broken index must not cost the session its instruction files.
            await daemon.report_worker_error(
                "index-provider", f"{name}: {type(exc).__name__}: {exc}", exc=exc
            )
            failed.append(
                SkippedInfo(
                    path=name,
                    reason="provider_error",
                    detail=f"{type(exc).__name__}: {exc}",
                    parent=None,
                )
            )
    return found, failed


def _wire(result: ContextResult) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    files = [
        FileInfo(
            path=str(f.path),
            type=f.type,
            parent=str(f.parent) if f.parent is not None else None,
            reason=f.reason,
            globs=list(f.globs) if f.globs is not None else None,
        ).model_dump()
        for f in result.files
    ]
    skipped = [
        SkippedInfo(
            path=str(s.path),
            reason=s.reason,
            detail=s.detail,
            parent=str(s.parent) if s.parent else None,
        ).model_dump()
        for s in result.skipped
    ]
    return files, skipped


def _entry_info(entry: IndexEntry) -> FileInfo:
    return FileInfo(
        path=str(entry.path), type=entry.type, parent=None, reason="session_start", globs=None
    )


async def get_context(daemon: Daemon, params: GetContextParams) -> dict[str, Any]:
    """The assembled instruction files and memory index for a session in `cwd`."""
    return await context_now(daemon, params, recheck=False)


async def context_now(
    daemon: Daemon, params: GetContextParams, *, recheck: bool = True
) -> dict[str, Any]:
    """`get_context`'s reply; with `recheck` a cached load the watcher vouches for is also
    re-stat'ed, so an edit saved a moment ago, not reported yet, is read (the memory UI lists
    what is in effect now)."""
    project = daemon.services.projects.resolve(params.cwd)
    real_cwd = Path(os.path.realpath(params.cwd))  # noqa: ASYNC240 - a few lstats
    cleaned = await sessions.normalized(params.touched_paths or [], params.cwd)
    roots = tuple(r for r in (project.root, project.facts.worktree_root) if r is not None)
    if params.session_id is None:
        touched = await _made(cleaned, params.cwd, real_cwd, roots)
    else:
        # The session's whole union: kept as Paths, only what was added since made again
        # (made each call, 50,000 held the GIL ~0.3 s a call beside the event loop).
        store = daemon.services.session_paths
        store.add(project.root, params.session_id, cleaned)
        draft = store.view(project.root, params.session_id, (params.cwd, real_cwd, roots))
        touched = draft.base
        if draft.new:
            made = await _made(draft.new, params.cwd, real_cwd, roots)
            touched = await off_loop(len(touched) + len(made), frozenset.union, touched, made)
        store.keep(draft, touched)
    service = daemon.services.instructions
    await service.ensure_started()
    sources = ALL_SOURCES if params.setting_sources is None else frozenset(params.setting_sources)
    cached, hit = await service.get(real_cwd, project, touched, sources)
    if (
        recheck
        and hit
        and cached.trusted  # one not trusted was re-stat'ed by `get` just now
        and not await asyncio.to_thread(realfs.unchanged, cached.involvement.stamps)
    ):
        service.drop(project.root)
        cached, hit = await service.get(real_cwd, project, touched, sources)
    contributions, provider_failures = await _contributions(daemon, project)
    entries = [entry for c in contributions for entry in c.entries]
    if cached.wire is None:
        cached.wire = _wire(cached.result)
    files, skipped = cached.wire
    # A plain dict: the typed parts were validated once when the entry was made.
    result: dict[str, Any] = {
        "claude_md": assembly.assemble(cached.sections, assembly.render_entries(entries)),
        "current_date": assembly.current_date_line(date.today()),
        "files": [*files, *(_entry_info(e).model_dump() for e in entries)],
        "skipped": [*skipped, *(f.model_dump() for f in provider_failures)],
        "memory_dir": next((c.memory_dir for c in contributions if c.memory_dir), None),
        "index_truncated": any(c.index_truncated for c in contributions),
        "memory_instructions": "\n\n".join(
            c.memory_instructions for c in contributions if c.memory_instructions
        ),
        "warnings": list(cached.result.warnings),
        "cached": hit,
    }
    return result


# -- external include approvals ----------------------------------------------------------
class IncludesParams(Params):
    cwd: Cwd


class IncludesListParams(Params):
    cwd: Cwd | None = None


async def includes_approve(daemon: Daemon, params: IncludesParams) -> dict[str, Any]:
    """Allow this project's instruction files to include files outside it."""
    root = daemon.services.projects.resolve(params.cwd).root
    approval = approvals.approve(root)
    return _approval_changed(daemon, root, approved=True, approved_at=approval.approved_at)


async def includes_revoke(daemon: Daemon, params: IncludesParams) -> dict[str, Any]:
    """Withdraw the approval of external includes for this project."""
    root = daemon.services.projects.resolve(params.cwd).root
    removed = approvals.revoke(root)
    return _approval_changed(daemon, root, approved=False, removed=removed)


def _approval_changed(daemon: Daemon, root: Path, **change: Any) -> dict[str, Any]:
    """Forget the project's cached instructions (their includes change) and say what changed."""
    daemon.services.instructions.drop(root)
    return {
        "project_root": str(root),
        **change,
        "file": str(approvals.approvals_path()),
    }


async def includes_list(daemon: Daemon, params: IncludesListParams) -> dict[str, Any]:
    """Every approval; with `cwd`, that project's state and the external includes refused."""
    result: dict[str, Any] = {
        "approvals": [
            {"project_root": a.project_root, "approved_at": a.approved_at}
            for a in approvals.list_approvals()
        ],
        "file": str(approvals.approvals_path()),
    }
    if params.cwd is not None:
        project = daemon.services.projects.resolve(params.cwd)
        real_cwd = Path(os.path.realpath(params.cwd))  # noqa: ASYNC240 - a few lstats
        loaded = await asyncio.to_thread(
            build, real_cwd, project, frozenset(), daemon.config.flag_settings
        )
        result["project_root"] = str(project.root)
        result["approved"] = approvals.is_approved(project.root)
        result["external"] = [
            {"path": str(s.path), "parent": str(s.parent) if s.parent else None, "detail": s.detail}
            for s in loaded.result.skipped
            if s.reason == "external"
        ]
    return result


METHODS = (
    method("get_context", GetContextParams, get_context),
    method("includes.approve", IncludesParams, includes_approve),
    method("includes.revoke", IncludesParams, includes_revoke),
    method("includes.list", IncludesListParams, includes_list),
)
