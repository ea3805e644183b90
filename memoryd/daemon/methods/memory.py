"""Auto memory methods: `memory.list/read/write/delete/history/restore/remember/reconcile`, `recall`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol

import yaml
from pydantic import AfterValidator, Field, StrictBool, StrictInt

from memoryd.agent.secret_screen import refuses_secrets
from memoryd.automem.layout import is_team
from memoryd.automem.memfile import MAX_FILE_BYTES, as_field, check_fields, load_frontmatter
from memoryd.automem.quickadd import choose
from memoryd.automem.recall.pick import MAX_RECALL, recall
from memoryd.automem.service import AutoMemory
from memoryd.automem.taxonomy import MemoryType
from memoryd.daemon.memory_secrets import check_write
from memoryd.daemon.methods.context import GetContextParams, context_now
from memoryd.daemon.params import Cwd, PathList, PathText, SessionId
from memoryd.daemon.rpc import Params, method
from memoryd.errors import ForbiddenPath, MemorydError, NotFound, TooLarge
from memoryd.fsutil import read_regular_file

if TYPE_CHECKING:
    from memoryd.automem.writes import WriteResult
    from memoryd.core.project import Project
    from memoryd.daemon.app import Daemon

# Generous on purpose: an oversized body must reach the handler to get -32004, not -32602.
_MAX_TEXT = 50 * 1024 * 1024


def _some_text(value: str) -> str:
    # Clients drop a blank prompt rather than ask (memctl's hook, the MCP tool, the editors);
    # one that asks anyway is told, as for an empty query, instead of getting arbitrary memories.
    if not value.strip():
        raise ValueError("must contain some text, not only whitespace")
    return value


def _stripped_note(value: str) -> str:
    return _some_text(value).strip()


class CwdParams(Params):
    cwd: Cwd


class PathParams(Params):
    cwd: Cwd
    path: PathText


class SnapshotStamp(Params):
    """The file as the client last saw it. `mtime_ns` may be a string of digits: a client
    whose numbers are doubles (Lua, JavaScript) cannot carry nanoseconds since 1970 exactly."""

    size: StrictInt = Field(ge=0)
    mtime_ns: StrictInt | Annotated[str, Field(pattern=r"^[0-9]{1,20}$")]

    def stamp(self) -> tuple[int, int]:
        return self.size, int(self.mtime_ns)


class SnapshotParams(PathParams):
    # Refused (ChangedSince) when the file no longer matches: an editor that stopped waiting
    # for the answer has written its new text, which must not be kept as the "edit" version.
    expect: SnapshotStamp | None = None


class WriteParams(Params):
    cwd: Cwd
    type: str = Field(max_length=100)
    name: str = Field(max_length=_MAX_TEXT)
    description: str = Field(max_length=_MAX_TEXT)
    body: str = Field(max_length=_MAX_TEXT)
    team: StrictBool = False
    file: PathText | None = None


class RestoreParams(Params):
    cwd: Cwd
    path: PathText
    version: str = Field(min_length=1, max_length=100)


class RememberParams(Params):
    cwd: Cwd
    # Stripped here, once: the saved body is the stripped note, so the secret scan's line
    # numbers and the derived title are the saved text's (a note led by blank lines was
    # scanned unstripped and its warning named the wrong line); a blank note is refused.
    text: Annotated[
        str,
        Field(min_length=1, max_length=_MAX_TEXT),
        AfterValidator(_stripped_note),
    ]
    type: MemoryType | None = None
    name: str | None = Field(default=None, min_length=1, max_length=_MAX_TEXT)
    team: StrictBool = False


# Far more than a prompt needs (memctl's hook sends at most 20,000 characters).
MAX_QUERY_CHARS = 100_000


class RecallParams(Params):
    cwd: Cwd
    query: Annotated[
        str, Field(min_length=1, max_length=MAX_QUERY_CHARS), AfterValidator(_some_text)
    ]
    session_id: SessionId | None = None
    recent_tools: list[str] = Field(default_factory=list, max_length=1_000)
    already_surfaced: PathList = Field(default_factory=list)
    # Strict, as the flags: pydantic's lax mode read "5", 5.0 and true as a number, and "yes",
    # "on", 1 as true ("off" as false), where docs/protocol.md promises -32602.
    limit: StrictInt = Field(default=MAX_RECALL, ge=1, le=MAX_RECALL)
    # "local" skips the model even when one is configured (hooks on a tight time budget).
    selector: Literal["auto", "local"] = "auto"
    # Each memory then says what the local ranker saw in it (`why`).
    explain: StrictBool = False


def _am(daemon: Daemon) -> AutoMemory:
    return daemon.services.automem


def _sync_if_team(daemon: Daemon, project: Project, path: Path, *, wrote: bool = True) -> list[str]:
    """A change in the team folder must reach the server even in a project whose sync has not
    started yet (no `get_context` or turn so far): start it; its first push carries the change,
    and once it runs a push follows every later one within the debounce. A file `wrote` is
    pending in `team.status` at once, not once the watcher noticed it. With no team
    server configured, or a folder whose sync is off (no git remote, a server's refusal), the
    change stays on this machine: the warning returned says so, for a reply to carry (lest the
    writer believe the team has it)."""
    if not path.is_relative_to(_am(daemon).team_dir(project)):
        return []
    if not daemon.services.team.configured:
        from memoryd.team.service import NOT_CONFIGURED  # the sync client stays unimported

        return [f"saved in the team folder but not shared: {NOT_CONFIGURED}"]
    daemon.services.team.ensure(project)
    if wrote:
        daemon.services.team.written(project, path)
    because = daemon.services.team.not_shared_because(project)
    return [] if because is None else [f"saved in the team folder but not shared: {because}"]


async def _instruction_files(daemon: Daemon, cwd: str) -> list[dict[str, Any]]:
    """The instruction files in effect now, as `get_context` reports them."""
    try:
        data = await context_now(daemon, GetContextParams(cwd=cwd))
    except MemorydError:
        return []
    return [f for f in data["files"] if f.get("type") not in {"AutoMem", "TeamMem"}]


async def memory_list(daemon: Daemon, params: CwdParams) -> dict[str, Any]:
    """Instruction files in effect and every auto/team memory (frontmatter only)."""
    project = daemon.services.projects.resolve(params.cwd)
    # The memory UI lists what is in effect now: the instruction files' cached load is
    # re-stat'ed (`context_now`), not read again. Dropped at every call, 1,000 rule files were
    # read and parsed again by each warm `memory.list` (0.3-0.5 s instead of 0.05).
    am = _am(daemon)
    memory_dir = am.memory_dir(project)
    await am.loaded(project)
    headers = am.manifest(project)
    auto_index = am.read_index(project)
    team_index = am.read_index(project, team=True)
    return {
        "instruction_files": await _instruction_files(daemon, params.cwd),
        "memories": [h.as_dict() for h in headers],
        "memory_dir": str(memory_dir),
        "team_dir": str(am.team_dir(project)),
        "index": {
            "path": str(auto_index.path),
            "truncated": auto_index.truncated,
            "cap": auto_index.cap,
            "dangling": list(auto_index.dangling),
            "team_dangling": list(team_index.dangling),
            "orphans": list(auto_index.orphans),
            "team_orphans": list(team_index.orphans),
        },
        "warnings": [
            *(index.problem for index in (auto_index, team_index) if index.problem),
            *(f"{h.file}: {h.problem}" for h in headers if h.problem),
        ],
    }


async def memory_read(daemon: Daemon, params: PathParams) -> dict[str, Any]:
    """One memory file: its full text and parsed frontmatter."""
    project = daemon.services.projects.resolve(params.cwd)
    am = _am(daemon)
    path, key = am.resolve_file(project, params.path, must_exist=True)
    cap = MAX_FILE_BYTES * 5
    # Read at most one byte over the cap: a huge file must not be loaded to be refused. No
    # following a symlink or blocking on a FIFO swapped in since the path was checked.
    try:
        raw = read_regular_file(path, cap)
    except OSError as exc:
        raise NotFound(f"cannot read {path}: {exc.strerror or exc}") from exc
    if len(raw) > cap:
        size = path.stat().st_size
        raise TooLarge(f"{path} is {size:,} bytes; memory files are read up to {cap:,}")
    content = raw.decode("utf-8", errors="replace")
    problem = None
    try:
        meta: dict[str, Any] = dict(load_frontmatter(content).metadata)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as exc:
        meta, problem = {}, f"broken frontmatter: {type(exc).__name__}"
    entry = am.state(am.memory_dir(project)).entries.get(key)
    if entry is not None:
        problem = entry.header.problem
    return {
        "path": str(path),
        "content": content,
        "frontmatter": _jsonable(meta),
        "problem": problem,
        "valid": problem is None,
    }


def _jsonable(value: Any) -> Any:
    """YAML can hold dates and other non-JSON scalars; pass those on as text."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


async def memory_write(daemon: Daemon, params: WriteParams) -> dict[str, Any]:
    """Write a memory atomically and keep its index line; a near duplicate updates the old one."""
    project = daemon.services.projects.resolve(params.cwd)
    # The limits first: a field over its limit is refused anyway, and scanning 40 MiB of it for
    # secrets took seconds before the refusal.
    check_fields(params.type, params.name, params.description, params.body)
    secrets = await _check_secrets(
        daemon, project, params.name, params.description, params.body, params.team, params.file
    )
    result, unshared = await _save(daemon, project, params, team=params.team, file=params.file)
    secrets["warnings"] += unshared
    return {**_written(result), **secrets}


class _MemoryText(Protocol):
    """What a memory is written from: the `memory.write` params or a quick-add's choice."""

    @property
    def type(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def body(self) -> str: ...


async def _save(
    daemon: Daemon,
    project: Project,
    memory: _MemoryText,
    *,
    team: bool,
    file: str | None = None,
    name_given: bool = True,
) -> tuple[WriteResult, list[str]]:
    """Write the memory, then start team sync if it landed in the team folder; with it the
    warnings for the reply (a team memory no server will get)."""
    result = await _am(daemon).write_memory(
        project,
        type=memory.type,
        name=memory.name,
        description=memory.description,
        body=memory.body,
        team=team,
        file=file,
        name_given=name_given,
    )
    return result, [*result.warnings, *_sync_if_team(daemon, project, result.path)]


def _written(result: WriteResult) -> dict[str, Any]:
    """The reply's part that says where a write landed (shared by write and remember)."""
    return {
        "path": str(result.path),
        "created": result.created,
        "merged_into": str(result.merged_into) if result.merged_into else None,
    }


async def _check_secrets(
    daemon: Daemon,
    project: Project,
    name: str,
    description: str,
    body: str,
    team: bool,
    file: str | None = None,
) -> dict[str, Any]:
    """`warnings`/`secrets` for the reply; raises SecretRefused when the user refuses them.
    Its callers have checked the sizes (a body is at most MAX_FILE_BYTES once stripped), so
    all of `body` is scanned: a note padded with blanks past the cap skipped the scan."""
    refuse = refuses_secrets(_am(daemon).settings.get(project.settings_root))
    # A thread: the scan of a 200 KB body full of keywords takes a second or more.
    return await asyncio.to_thread(
        check_write, name, description, body, team=team, refuse=refuse, file=file
    )


async def memory_delete(daemon: Daemon, params: PathParams) -> dict[str, Any]:
    """Delete a memory and its index line; the content is kept in history."""
    project = daemon.services.projects.resolve(params.cwd)
    target, _ = _am(daemon).resolve_file(project, params.path, must_exist=False)
    if _team_folder_syncs(daemon, project, target):
        # Answered {deleted: true} before: the next pull put the file back, and the index
        # line the delete removed was pushed, so every teammate's MEMORY.md lost it.
        raise ForbiddenPath(
            f"{target} is a team memory, and deletions do not reach the team server: the next "
            "pull would bring it back, and its index line would go from every teammate's "
            "MEMORY.md. Edit it instead (say it no longer applies), or restore an older "
            "version on the server (`memoryd-team restore`)"
        )
    path = await _am(daemon).delete_memory(project, params.path)
    _sync_if_team(daemon, project, path, wrote=False)
    return {"deleted": True, "path": str(path)}


def _team_folder_syncs(daemon: Daemon, project: Project, path: Path) -> bool:
    """Whether `path` is a team memory on the team server, in a folder that syncs: a pull would
    bring it back. One never pushed (new, or kept back by the secret scan, which tells the
    user to remove it) is deleted as any other."""
    am = _am(daemon)
    if not daemon.services.team.configured or not am.enabled(project):
        return False
    if not path.is_relative_to(am.team_dir(project)):
        return False
    daemon.services.team.ensure(project)
    return daemon.services.team.on_server(project, path)


async def memory_history(daemon: Daemon, params: PathParams) -> dict[str, Any]:
    """Earlier versions of a memory file, newest first (also of deleted ones)."""
    project = daemon.services.projects.resolve(params.cwd)
    path, versions = _am(daemon).versions(project, params.path)
    return {
        "path": str(path),
        "exists": path.is_file(),
        "versions": [v.as_dict() for v in versions],
    }


async def memory_snapshot(daemon: Daemon, params: SnapshotParams) -> dict[str, Any]:
    """Keep a memory file's current content as a version (before an edit outside memoryd)."""
    project = daemon.services.projects.resolve(params.cwd)
    am = _am(daemon)
    path, key = am.resolve_file(project, params.path, must_exist=True)
    expect = None if params.expect is None else params.expect.stamp()
    async with am.writer_lock(am.memory_dir(project)):
        kept = await am.snapshot(path, "edit", expect=expect)
    if kept is None:  # the same as the newest version: that one stands for it
        newest = am.versions(project, key)[1]
        return {"path": str(path), "version": newest[0].version if newest else None}
    return {"path": str(path), "version": kept.version}


async def memory_restore(daemon: Daemon, params: RestoreParams) -> dict[str, Any]:
    """Put an earlier version back (the current content is kept in history first)."""
    project = daemon.services.projects.resolve(params.cwd)
    secrets: dict[str, Any] = {"warnings": [], "secrets": []}

    async def screen(key: str, content: bytes) -> None:
        # A version saved before the refusal was on came back with its secret and no word.
        text = content.decode("utf-8", errors="replace")
        secrets.update(await _check_secrets(daemon, project, "", "", text, is_team(key)))

    path, warnings = await _am(daemon).restore(project, params.path, params.version, screen)
    _sync_if_team(daemon, project, path)
    return {
        "path": str(path),
        "restored": params.version,
        "warnings": secrets["warnings"] + warnings,
        "secrets": secrets["secrets"],
    }


async def memory_remember(daemon: Daemon, params: RememberParams) -> dict[str, Any]:
    """Quick-add: a model (or the text itself) picks type, name and description."""
    project = daemon.services.projects.resolve(params.cwd)
    _am(daemon).memory_dir(project)  # fail fast (auto memory off) before any model call
    # The note becomes the body: one over the cap is refused before the model or the guess
    # sees it (it was sent to the model in full, then refused).
    size = len(params.text.encode("utf-8", errors="surrogatepass"))
    if size > MAX_FILE_BYTES:
        raise TooLarge(f"text: a memory is at most {MAX_FILE_BYTES:,} bytes, got {size:,}")
    # Checked before the model sees the text: a refused secret never leaves the machine.
    secrets = await _check_secrets(daemon, project, params.name or "", "", params.text, params.team)
    quick = await choose(daemon.model, params.text, params.type, params.name)
    # A given name with a secret in it is redacted (quickadd), no longer the user's name: two
    # such ("ghp_…" and "ghp_…", both "[redacted]") updated one memory, the first note lost.
    # The check's own scan says so (a second one, on the loop, held every client for a long
    # name).
    given = (
        params.name is not None
        and as_field(params.name) != ""
        and all(s["field"] != "name" for s in secrets["secrets"])
    )
    result, unshared = await _save(daemon, project, quick, team=params.team, name_given=given)
    secrets["warnings"] += unshared
    return {
        **_written(result),
        "type": quick.type,
        "name": result.name,
        "description": quick.description,
        "derived_by": quick.derived_by,
        **secrets,
    }


async def memory_reconcile(daemon: Daemon, params: CwdParams) -> dict[str, Any]:
    """Bring MEMORY.md in step with the memory files (after edits made outside memoryd)."""
    project = daemon.services.projects.resolve(params.cwd)
    return await _am(daemon).reconcile_index(project)


async def recall_method(daemon: Daemon, params: RecallParams) -> dict[str, Any]:
    """At most 5 memories relevant to a query (model selector, else the local ranker)."""
    project = daemon.services.projects.resolve(params.cwd)
    surfaced = list(params.already_surfaced)
    shown = daemon.services.surfaced
    if params.session_id is not None and "already_surfaced" not in params.model_fields_set:
        # A client that says what it showed knows better than the daemon what was returned:
        # a reply its hook gave up on (over budget) never reached the agent.
        surfaced += sorted(shown.seen(project.root, params.session_id) - set(surfaced))
    result = await recall(
        daemon.model,
        daemon.services.automem,
        project,
        query=params.query,
        recent_tools=params.recent_tools,
        already_surfaced=surfaced,
        limit=params.limit,
        use_model=params.selector == "auto",
        explain=params.explain,
    )
    if params.session_id is not None:
        shown.add(project.root, params.session_id, [m["path"] for m in result["memories"]])
    return result


METHODS = (
    method("memory.list", CwdParams, memory_list, memory_folder=True),
    method("memory.read", PathParams, memory_read, memory_folder=True),
    method("memory.write", WriteParams, memory_write, memory_folder=True),
    method("memory.delete", PathParams, memory_delete, memory_folder=True),
    method("memory.history", PathParams, memory_history, memory_folder=True),
    method("memory.restore", RestoreParams, memory_restore, memory_folder=True),
    method("memory.snapshot", SnapshotParams, memory_snapshot),
    method("memory.remember", RememberParams, memory_remember, memory_folder=True),
    # MEMORY.md, then team/MEMORY.md: a full disk under the second leaves the first rewritten.
    method(
        "memory.reconcile", CwdParams, memory_reconcile, writes_several=True, memory_folder=True
    ),
    method("recall", RecallParams, recall_method),
)
