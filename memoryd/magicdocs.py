"""MagicDocs: Markdown files that keep themselves up to date from the conversation.

A file whose text has a line `# MAGIC DOC: <title>` (case-insensitive) outside a fenced code
block is a magic doc; an italic line right under that header (`_..._` or `*...*`) is its update
instruction. A doc is
registered when a client reports reading it (`after_turn.read_paths`). After a turn that ended
without tool calls (a natural break), the docs that session registered are queued, at most
MAX_UPDATES_PER_BREAK of them (those that waited longest), each with that session's
conversation; the queue is worked one update at a time. Before each update the header is re-checked — gone means the doc
is unregistered and left untouched — and the agent that updates it may read and edit that one
file only, and no edit of it that changes its header or lands after the header went. A successful update is announced with `magicdoc/updated {path}`. The doc is a file
of the repository, committed and pushed with it: the text an edit adds is scanned for secrets
first (`agent/secret_screen.py`), refused with the user's `memorydRefuseSecrets` on, else
written with a `worker/error` warning naming the rule.

Registrations (which docs, read by which session of which project) are kept in
`<state>/magicdocs.json`, so a daemon restart mid-session (`memctl restart`, a crash) does not
forget the docs the session read: its next natural break still updates them (and each doc's update count and last
update are saved after each update, for `magicdocs.list`). Two daemons of one user (two sockets) share
the file: each save merges into what is there (under a lock) rather than replacing it.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar

import structlog

from memoryd import jsonread, paths
from memoryd.agent.policy import AccessPolicy, real
from memoryd.agent.seen import SeenFiles, Stamp, stamp_of
from memoryd.agent.transcript import conversation_block, render_transcript
from memoryd.automem.settings_cache import SettingsCache
from memoryd.core.turn import Turn, natural_break
from memoryd.fences import in_fenced_code
from memoryd.fsutil import atomic_write_text, flock_within, open_lock_file, read_regular_file
from memoryd.llm.prompt_cache import cached_prompt

if TYPE_CHECKING:
    from memoryd.agent.loop import AgentResult
    from memoryd.agent.secret_screen import WriteScreen
    from memoryd.agent.tools import WriteOp
    from memoryd.core.host import Host

log = structlog.get_logger("memoryd.magicdocs")
_K = TypeVar("_K")

WORKER = "magic_docs"
HEADER = re.compile(r"^#\s*MAGIC\s+DOC:\s*(.+)$", re.MULTILINE | re.IGNORECASE)
# Italic, not bold: `**Current release: 1.2**` under the header was read as an instruction, and
# the header screen refused every update of that line.
_ITALIC = re.compile(r"^\s*(?:_(?!_)(.+?)(?<!_)_|\*(?!\*)(.+?)(?<!\*)\*)\s*$")
SUFFIXES = frozenset({".md", ".markdown", ".mdx"})
MAX_DOC_BYTES = 512_000
MAX_CHECKED_PER_TURN = 500
# The registry lives as long as the daemon: it keeps the docs read most recently, and per doc
# the sessions that read it most recently (an older session's doc is registered again when it
# reads the doc again).
MAX_DOCS = 1_000
MAX_SESSIONS_PER_DOC = 100
MAX_TURNS = 5
MAX_TOKENS = 4096
# Docs queued at one natural break of a session: every doc it read was updated after each one,
# and a session that had read 50 docs paid 50 model runs per break. The docs that waited
# longest go first (never queued before, then queued longest ago; read most recently among
# equals), so each doc still gets its turn within ceil(docs / this) breaks.
MAX_UPDATES_PER_BREAK = 5
# Updates waiting (doc and session) at once; past it the oldest is dropped: the queue holds a
# transcript per session, and sessions breaking faster than a slow model works cannot grow it
# without bound.
MAX_QUEUED = MAX_DOCS
STATE_FILE = "magicdocs.json"
# A saved update count past this, or a time later than now by more than the slack (a clock
# stepped back since), is no value the daemon wrote: read as none (a hand-edited file).
MAX_SAVED_UPDATES = 2**53
CLOCK_SLACK_S = 300.0
MAX_STATE_BYTES = 8 * 1024 * 1024
# How long a save waits for another daemon's save of the registrations (milliseconds long).
SAVE_LOCK_WAIT_S = 30.0
IN_THE_REPOSITORY = "the doc is a file of the repository, which a commit and push share"


# -- pure ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DocHeader:
    title: str
    instruction: str | None


def _header_match(text: str) -> re.Match[str] | None:
    """The first HEADER line of `text` outside a fenced code block. One in a fence is an
    example of the format (a README that shows how to write a magic doc): taken as the
    header, the README was registered and a background model rewrote it."""
    code: list[bool] | None = None  # per line, computed once a header line is found
    line = counted_to = 0
    for match in HEADER.finditer(text):
        if code is None:
            code = list(in_fenced_code(text.split("\n")))  # `^`/`$` of HEADER break at \n only
        # Counted on from the last match: from the start each time, a 512 KB doc of fenced
        # header lines took 3 s.
        line += text.count("\n", counted_to, match.start())
        counted_to = match.start()
        if not code[line]:
            return match
    return None


def parse_header(text: str) -> DocHeader | None:
    """The doc's title and italic instruction, or None when it is not a magic doc."""
    # A byte order mark (Windows editors save one) stood before a first-line header's `#`,
    # and `^` did not match there: such a doc was never registered.
    match = _header_match(text.removeprefix("\ufeff"))
    if match is None:
        return None
    title = match.group(1).strip()
    rest = match.string[match.end() :].lstrip("\r\n").splitlines()
    instruction = None
    if rest:
        italic = _ITALIC.match(rest[0])
        if italic is not None:
            instruction = (italic.group(1) or italic.group(2)).strip()
    return DocHeader(title, instruction)


SYSTEM_PROMPT = """\
You keep one living document up to date. You run in the background after a turn of a
conversation between a user and a coding assistant; you never talk to the user. You may read
and edit only the document you are given.
"""

_INSTRUCTION = """\
The document `{path}` is a magic doc titled "{title}".
{instruction_line}
Update it so it reflects what the conversation above established that belongs in it: add new
facts, correct what became wrong, drop what is obsolete. Keep its structure and its
`# MAGIC DOC:` header line (and the italic line under it) exactly as they are. Prefer small Edit
calls; do not rewrite what is still right. If the conversation adds nothing for this
document, change nothing and reply "no update". You have at most {max_turns} turns.

Current content of `{path}`:
<document>
{content}
</document>
"""


def update_prompt(
    path: Path, header: DocHeader, content: str, transcript: str
) -> list[dict[str, Any]]:
    """The update request's content: the conversation, then the doc and what to do with it,
    each a block with a cache breakpoint. Every doc a session read is updated after one
    natural break, each sending the same conversation (up to 60,000 characters): as one block
    with the doc, no two docs' requests shared a cached prefix and each paid all of it."""
    line = (
        f"Its own instruction for updates: {header.instruction}"
        if header.instruction
        else "It has no update instruction of its own."
    )
    body = _INSTRUCTION.format(
        path=path,
        title=header.title,
        instruction_line=line,
        max_turns=MAX_TURNS,
        content=content,
    )
    # A file read or a page in the conversation that holds `</conversation>` closed the
    # wrapper, and what followed it read as memoryd's instructions for the doc.
    return cached_prompt(f"{conversation_block(transcript)}\n\n") + cached_prompt(body)


def _doc_or_why_not(path: Path) -> tuple[str, DocHeader] | str:
    """(text, header) when `path` (a real path) is a readable magic doc, else why it is not.

    A link put in its place since is not followed (the doc would be edited wherever it
    points), a FIFO is not waited on, and a doc that is not UTF-8 is not one: its edits would
    rewrite every byte of it they did not touch."""
    if path.suffix.lower() not in SUFFIXES:
        return "not a Markdown file"
    if real(path) != path:
        return "a link now"
    try:
        raw = read_regular_file(path, MAX_DOC_BYTES)
    except FileNotFoundError:
        return "file gone"
    except OSError as exc:
        return f"not readable: {exc.strerror or exc}"
    if len(raw) > MAX_DOC_BYTES:
        return f"over {MAX_DOC_BYTES:,} bytes"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8"
    header = parse_header(text)
    return (text, header) if header is not None else "header gone"


def _read_doc(path: Path) -> tuple[str, DocHeader] | None:
    found = _doc_or_why_not(path)
    return None if isinstance(found, str) else found


def _stamped_doc(path: Path) -> tuple[Stamp | None, tuple[str, DocHeader] | str]:
    """`_doc_or_why_not`, and the doc's stamp taken before it was read: the agent's Edit of
    a doc changed since (by the user, while the model was thinking) is refused until it
    reads the doc again (`agent.seen`)."""
    stamp = stamp_of(path)
    return stamp, _doc_or_why_not(path)


def header_screen(secrets: WriteScreen) -> WriteScreen:
    """`secrets`, run once the write is known to leave the doc the magic doc it is now (its
    header as it is, at most MAX_DOC_BYTES).

    Unchecked, the agent could Edit the header line (or the italic line under it) away: the
    doc, edited as a magic doc, was one no longer and its next update unregistered it. And a
    doc whose header the user removed while the model was thinking (the agent read it again,
    as told) was edited although it had stopped being magic."""
    from memoryd.agent import tools as agent_tools  # loaded with the loop

    def screen(path: Path, op: WriteOp) -> str | None:
        size = len(op.text.encode("utf-8", errors="surrogatepass"))
        if size > MAX_DOC_BYTES:
            # Written, the doc was no magic doc at its next update (unregistered for good).
            raise agent_tools.ToolError(
                f"not written: {path} would be {size:,} bytes, over the {MAX_DOC_BYTES:,} a "
                "magic doc may be; make it shorter (drop what is obsolete, condense)"
            )
        try:
            raw = read_regular_file(op.path, agent_tools.MAX_FILE_BYTES)
            now = parse_header(raw.decode("utf-8", errors="replace"))
        except OSError:
            now = None
        if now is None:
            raise agent_tools.ToolError(
                f"not written: {path} is no longer a magic doc (its `# MAGIC DOC:` header "
                "line is gone); leave it as it is"
            )
        after = parse_header(op.text)
        adds_instruction = (
            after is not None
            and after.title == now.title
            and now.instruction is None
            and after.instruction is not None
        )
        if adds_instruction:
            # Told of "the italic line under it", when the doc had none, the agent was lost.
            raise agent_tools.ToolError(
                f"not written: this edit puts an italic line right under the `# MAGIC DOC: "
                f"{now.title}` header line of {path}, which would make it the doc's update "
                "instruction; start the text under the header with something else"
            )
        if after != now:
            raise agent_tools.ToolError(
                f"not written: this edit changes the `# MAGIC DOC: {now.title}` header line of "
                f"{path} or the italic line under it; keep both exactly as they are and "
                "change only the text below them"
            )
        return secrets(path, op)

    return screen


# -- the service ---------------------------------------------------------------------------
Reader = tuple[str, str]  # (project root, session id): a session is one of a project


@dataclass
class Doc:
    path: Path
    title: str
    instruction: str | None
    project_root: Path  # of the session that read it first
    sessions: dict[str, None] = field(default_factory=dict)  # an ordered set, oldest first
    registered_at: float = field(default_factory=time.time)
    updates: int = 0
    last_updated: float | None = None
    # Every project whose sessions read it (one doc shared by two projects through a link):
    # an ordered set, oldest first, as `sessions`.
    projects: dict[Path, None] = field(default_factory=dict)
    # Which session of which project read it (root, session id), as `sessions`: its updates
    # are from these sessions' conversations. By the id alone, a doc one project's session
    # read was updated from the conversation of another project's session of that id ("s1").
    readers: dict[Reader, None] = field(default_factory=dict)
    # The natural break (daemon-wide count) that last queued it, 0 for none; and when.
    queued_at_break: int = 0
    last_queued: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "title": self.title,
            "instruction": self.instruction,
            "project": str(self.project_root),
            "projects": sorted({str(p) for p in (self.project_root, *self.projects)}),
            "sessions": sorted(self.sessions),
            "updates": self.updates,
            "last_updated": self.last_updated,
            "last_queued": self.last_queued,
        }


class MagicDocs:
    def __init__(self, host: Host, settings: SettingsCache | None = None) -> None:
        self.host = host
        # The user's settings (`memorydRefuseSecrets`); the daemon passes auto memory's cache.
        self.settings = settings if settings is not None else SettingsCache(None)
        self.docs: OrderedDict[Path, Doc] = OrderedDict()  # least recently read first
        # One pending update per doc and session: keyed by the doc alone, a doc two sessions
        # read, queued by one and then by the other before its turn came, was updated from
        # the second's conversation only, and what the first's turn established never got in.
        self._queue: OrderedDict[tuple[Path, Reader], Turn] = OrderedDict()
        self._task: asyncio.Task[Any] | None = None
        self.counts = {"updated": 0, "unregistered": 0, "skipped": 0, "failed": 0}
        self._breaks = 0  # natural breaks that queued docs, for the order of `_pick`
        self.deferred = 0  # docs of the last such break left for a later one
        self.dropped = 0  # queued updates dropped past MAX_QUEUED
        self._state_path = paths.state_dir() / STATE_FILE
        self._save_lock = asyncio.Lock()
        self._changed = False  # by the last `_register`: the registrations to save
        # Unregistered here since the last save: left out of the file, though another daemon
        # of this state dir saved them (`_merged`).
        self._dropped: set[str] = set()
        self._load()

    # -- registrations that survive a restart ------------------------------------------------
    def _load(self) -> None:
        """The registrations the last daemon kept; a missing or broken file is none (logged)."""
        try:
            entries = _saved_entries(self._state_path)
        except (OSError, ValueError, KeyError, UnicodeDecodeError) as exc:
            log.warning(
                "magic docs registrations not read", path=str(self._state_path), error=str(exc)
            )
            return
        for entry in entries[-MAX_DOCS:]:
            doc = _doc_from(entry)
            if doc is not None:
                self.docs[doc.path] = doc

    async def _save(self) -> None:
        # One save at a time, each of the registrations as they are when it starts: an older
        # snapshot never lands after a newer one.
        async with self._save_lock:
            ours = [_doc_to(d) for d in self.docs.values()]
            dropped = frozenset(self._dropped)
            try:
                await asyncio.to_thread(_save_merged, self._state_path, ours, dropped)
            except OSError as exc:
                log.warning("magic docs registrations not saved", error=str(exc))
            else:
                self._dropped -= dropped

    def _unregister(self, path: Path) -> bool:
        if self.docs.pop(path, None) is None:
            return False
        self.counts["unregistered"] += 1
        self._dropped.add(str(path))
        return True

    # -- registration ------------------------------------------------------------------------
    def _register(
        self,
        session_id: str,
        project_root: Path,
        checked: list[tuple[Path, tuple[str, DocHeader] | None]],
    ) -> int:
        """Register the docs found among `checked` (unregister those no longer magic)."""
        registered = 0
        self._changed = False
        for path, found in checked:
            if found is None:
                if self._unregister(path):
                    self._changed = True
                continue
            _, header = found
            doc = self.docs.get(path)
            if doc is None:
                doc = Doc(path, header.title, header.instruction, project_root)
                self.docs[path] = doc
                self._dropped.discard(str(path))
                self._changed = True
                log.info("magic doc registered", path=str(path), title=header.title)
                while len(self.docs) > MAX_DOCS:
                    self.docs.popitem(last=False)
            self.docs.move_to_end(path)
            if (doc.title, doc.instruction) != (header.title, header.instruction):
                doc.title, doc.instruction = header.title, header.instruction
                self._changed = True  # a retitled doc is saved so, not as it was
            reader = (str(project_root), session_id)
            if reader not in doc.readers or project_root not in doc.projects:
                self._changed = True
            _most_recent(doc.sessions, session_id)
            _most_recent(doc.projects, project_root)
            _most_recent(doc.readers, reader, _readers_limit(len(doc.projects)))
            registered += 1
        return registered

    @staticmethod
    def _check(read_paths: tuple[str, ...]) -> list[tuple[Path, tuple[str, DocHeader] | None]]:
        out: list[tuple[Path, tuple[str, DocHeader] | None]] = []
        seen: set[Path] = set()
        for raw in read_paths:
            if len(out) >= MAX_CHECKED_PER_TURN:
                break
            if not raw or "\x00" in raw or not raw.startswith("/"):
                continue
            path = real(raw)
            if path in seen or path.suffix.lower() not in SUFFIXES:
                continue
            seen.add(path)
            out.append((path, _read_doc(path)))
        return out

    async def on_read(self, session_id: str, project_root: Path, paths: tuple[str, ...]) -> int:
        """A client reports files the session read (`after_turn`, `after_tool`): how many of
        them are magic docs, now registered for that session."""
        if not paths:
            return 0
        checked = await asyncio.to_thread(self._check, paths)
        registered = self._register(session_id, project_root, checked)
        if self._changed:
            await self._save()
        return registered

    async def on_turn(self, turn: Turn) -> int:
        await self.on_read(turn.session_id, turn.project.root, turn.read_paths)
        if not natural_break(turn.messages) or not self.host.model.configured:
            return 0
        reader = (str(turn.project.root), turn.session_id)
        mine = [d for d in self.docs.values() if reader in d.readers]
        if not mine:
            return 0
        picked = {d.path for d in _pick(mine, MAX_UPDATES_PER_BREAK)}
        self._breaks += 1
        now = time.time()
        for doc in (d for d in mine if d.path in picked):  # queued in the order they were read
            doc.queued_at_break, doc.last_queued = self._breaks, now
            # Queued already by this session: its newer transcript, which holds the older.
            self._queue[(doc.path, reader)] = turn
        while len(self._queue) > MAX_QUEUED:
            (path, (root, session_id)), _ = self._queue.popitem(last=False)
            self.dropped += 1
            log.warning(
                "magic doc update dropped", path=str(path), project=root, session_id=session_id
            )
        self.deferred = len(mine) - len(picked)
        if self._task is None:
            self._task = self.host.spawn(self._drain(), worker=WORKER, writes=True)
        return len(picked)

    async def _drain(self) -> None:
        try:
            while self._queue:
                (path, _), turn = self._queue.popitem(last=False)
                try:
                    await self.update(path, turn)
                except Exception as exc:
                    # One doc's failure is reported, and must not strand the docs queued after it.
                    await self.host.report_worker_error(
                        WORKER, f"{path}: {type(exc).__name__}: {exc}", exc=exc
                    )
        finally:
            self._task = None

    async def wait_idle(self) -> None:
        while self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    # -- one update --------------------------------------------------------------------------
    async def update(self, path: Path, turn: Turn) -> AgentResult | None:
        doc = self.docs.get(path)
        if doc is None:
            return None
        stamp, found = await asyncio.to_thread(_stamped_doc, path)
        if isinstance(found, str):
            # The header is gone (or the file, ...): the doc stops being magic, is not edited.
            self._unregister(path)
            log.info("magic doc unregistered", path=str(path), reason=found)
            await self._save()
            return None
        content, header = found
        if (doc.title, doc.instruction) != (header.title, header.instruction):
            # Retitled since it was read: saved so (as `_register` does), or magicdocs.list
            # showed the old title again after a restart.
            doc.title, doc.instruction = header.title, header.instruction
            await self._save()
        written: list[Path] = []
        seen = SeenFiles()
        seen.note(path, stamp)  # its text is in the prompt: read, as far as the agent knows

        async def on_write(written_path: Path) -> None:
            written.append(written_path)

        policy = AccessPolicy(read_roots=(path,), write_files=(path,), allow_shell=False)
        from memoryd.agent import tools as agent_tools  # loaded when a doc is updated
        from memoryd.agent.loop import run_agent
        from memoryd.agent.secret_screen import secret_screen

        secrets = secret_screen(self.settings.get(doc.project_root), where=IN_THE_REPOSITORY)

        result = await run_agent(
            self.host,
            feature=WORKER,
            policy=policy,
            system=SYSTEM_PROMPT,
            messages=[
                {
                    "role": "user",
                    "content": update_prompt(
                        path, header, content, render_transcript(turn.messages)
                    ),
                }
            ],
            max_turns=MAX_TURNS,
            max_tokens=MAX_TOKENS,
            tools=[agent_tools.DEFINITIONS["Read"], agent_tools.DEFINITIONS["Edit"]],
            on_write=on_write,
            screen_write=header_screen(secrets),
            seen=seen,
        )
        if written:
            doc.updates += 1
            doc.last_updated = time.time()
            self.counts["updated"] += 1
            # Saved, or magicdocs.list showed 0 updates, never updated, after a restart.
            await self._save()
            await self.host.notify("magicdoc/updated", {"path": str(path)})
        elif result.error is not None:
            # The model failed (the run reported it): not a run that chose to change nothing.
            self.counts["failed"] += 1
        else:
            self.counts["skipped"] += 1
        return result

    # -- views -------------------------------------------------------------------------------
    def entries(self, project_root: Path | None = None) -> list[dict[str, Any]]:
        return [
            d.as_dict()
            for d in sorted(self.docs.values(), key=lambda d: str(d.path))
            # Listed for each project that read it: a doc reached through a link from a
            # second project was listed for the first only.
            if project_root is None or project_root in (d.project_root, *d.projects)
        ]

    def feature_status(self) -> dict[str, Any]:
        return {
            "magic_docs": {
                "enabled": self.host.model.configured,
                "reason": self.host.model.reason,
                "registered": len(self.docs),
                "queued": len(self._queue),
                "per_break": MAX_UPDATES_PER_BREAK,
                "deferred": self.deferred,
                "dropped": self.dropped,
                **self.counts,
            }
        }

    async def close(self) -> None:
        self._queue.clear()
        if self._task is not None:
            self._task.cancel()


def _pick(docs: list[Doc], limit: int) -> list[Doc]:
    """Of `docs` (read least recently first), the `limit` that waited longest: never queued
    first, then queued at the oldest break; read most recently first among equals."""
    return sorted(reversed(docs), key=lambda d: d.queued_at_break)[:limit]


def _most_recent(recent: dict[_K, None], key: _K, limit: int = MAX_SESSIONS_PER_DOC) -> None:
    """`key` to the end of the ordered set `recent`, which keeps the newest `limit`."""
    recent.pop(key, None)
    recent[key] = None
    while len(recent) > limit:
        del recent[next(iter(recent))]


def _readers_limit(projects: int) -> int:
    """How many readers a doc of `projects` projects keeps: MAX_SESSIONS_PER_DOC for each.
    An entry saved before readers were kept has each of its sessions read in each of its
    projects; cut to MAX_SESSIONS_PER_DOC, one of 2 projects and 100 sessions kept only its
    50 newest sessions, and the others' breaks updated it no more."""
    return MAX_SESSIONS_PER_DOC * max(1, projects)


def _saved_entries(path: Path) -> list[Any]:
    """The entries of the registrations file at `path`, none when it is missing; ValueError
    (or OSError, KeyError, UnicodeDecodeError) when it is no such file."""
    try:
        raw = read_regular_file(path, MAX_STATE_BYTES)
    except FileNotFoundError:
        return []
    if len(raw) > MAX_STATE_BYTES:
        raise ValueError(f"over {MAX_STATE_BYTES} bytes")
    # A count of 5,000 digits (a hand edit) is read as none, its doc kept.
    data = jsonread.loads(raw.decode("utf-8"), long_ints="none")
    entries = data["docs"] if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ValueError("no list of docs")
    return entries


def _save_merged(path: Path, ours: list[dict[str, Any]], dropped: frozenset[str]) -> None:
    """Write this daemon's registrations `ours` (entries, least recently read first) into the
    file at `path`, merged with what another daemon of this state dir saved there (a daemon on
    a second socket shares the state dir): a whole-file snapshot replaced the other's
    registrations, and after its restart its sessions' docs were never updated again."""
    lock = path.with_name(path.name + ".lock")
    fd = open_lock_file(lock)
    try:
        # The other daemon's read-merge-write, not between; waited for a while only: one
        # stopped with Ctrl-Z while it saved held this thread (and every later save) for ever.
        if not flock_within(fd, SAVE_LOCK_WAIT_S):
            raise OSError(
                errno.EWOULDBLOCK,
                f"another memoryd has held the lock over {SAVE_LOCK_WAIT_S:.0f} s",
                str(lock),
            )
        try:
            saved = [e for e in _saved_entries(path) if _doc_from(e) is not None]
        except (OSError, ValueError, KeyError, UnicodeDecodeError):
            saved = []  # broken (logged when read at start): replaced
        atomic_write_text(path, _state_text(_merged(saved, ours, dropped)))
    finally:
        os.close(fd)


def _state_text(docs: list[dict[str, Any]]) -> str:
    """The registrations file for `docs` (least recently read first), at most MAX_STATE_BYTES:
    the docs read least recently are left out of a file that would be larger. The registry's
    bounds allow more (1,000 docs with 500 KB titles, or with 100 sessions of 200-character
    ids each), and a file over the cap, read as broken at the next start, lost them all."""
    head, tail = '{"version": 1, "docs": [', "]}"
    parts = [json.dumps(d) for d in docs]  # ASCII (ensure_ascii): characters are bytes
    size = len(head) + len(tail) + sum(len(p) for p in parts) + 2 * max(len(parts) - 1, 0)
    start = 0
    while size > MAX_STATE_BYTES and start < len(parts):
        size -= len(parts[start]) + (2 if start < len(parts) - 1 else 0)
        start += 1
    if start:
        log.warning(
            "magic docs left out of the registrations file", docs=start, cap=MAX_STATE_BYTES
        )
    return head + ", ".join(parts[start:]) + tail


def _merged(
    saved: list[dict[str, Any]], ours: list[dict[str, Any]], dropped: frozenset[str]
) -> list[dict[str, Any]]:
    """The entries `saved` this daemon neither holds nor unregistered (another daemon's,
    oldest), then `ours`, each with the sessions and projects its saved entry had too; the
    MAX_DOCS last."""
    by_path = {e["path"]: e for e in saved}
    mine = {e["path"] for e in ours}
    merged = [e for e in saved if e["path"] not in mine and e["path"] not in dropped]
    for entry in ours:
        other = by_path.get(entry["path"])
        if other is not None:
            # The other daemon's updates of the doc are not ours: the larger count, the later
            # time (each daemon counts on from what it loaded).
            updates = max(entry["updates"], _saved_count(other.get("updates")))
            last = [t for t in (entry["last_updated"], _saved_time(other.get("last_updated"))) if t]
            both = _union(_saved_projects(other), entry["projects"])
            readers = _union(
                _saved_readers(other), _saved_readers(entry), _readers_limit(len(both))
            )
            entry = {
                **entry,
                "updates": updates,
                "last_updated": max(last, default=None),
                "sessions": _union(_strings(other["sessions"]), entry["sessions"]),
                "projects": both,
                "readers": [list(r) for r in readers],
            }
        merged.append(entry)
    return merged[-MAX_DOCS:]


def _union(older: list[_K], newer: list[_K], limit: int = MAX_SESSIONS_PER_DOC) -> list[_K]:
    """`older` then `newer` as one ordered set, each once, at its newest place; the `limit`
    last."""
    fresh = set(newer)
    kept = (k for k in older if k not in fresh)
    return list(dict.fromkeys([*kept, *newer]))[-limit:]


def _strings(values: list[Any]) -> list[str]:
    return [v for v in values if isinstance(v, str)]  # a hand-edited file


def _is_root(value: object) -> TypeGuard[str]:
    """An absolute path as the file keeps one (a doc's, a project root)."""
    return isinstance(value, str) and value.startswith("/") and "\x00" not in value


def _saved_projects(entry: dict[str, Any]) -> list[str]:
    """The project roots of a saved registration, each once, the MAX_SESSIONS_PER_DOC newest
    last; an entry saved before session 19 has only its `project`."""
    projects = entry.get("projects")
    listed = projects if isinstance(projects, list) else [entry.get("project")]
    return list(dict.fromkeys(r for r in listed if _is_root(r)))[-MAX_SESSIONS_PER_DOC:]


def _saved_readers(entry: dict[str, Any]) -> list[Reader]:
    """The (project root, session id) pairs of a saved registration, the newest last. An
    entry saved before session 24 has only its sessions and projects: each session is taken
    for a reader in each project, as that daemon took them, so none loses its updates."""
    roots = _saved_projects(entry)
    readers = entry.get("readers")
    if isinstance(readers, list):
        pairs = [
            (r[0], r[1])
            for r in readers
            if isinstance(r, list) and len(r) == 2 and _is_root(r[0]) and isinstance(r[1], str)
        ]
    else:
        sessions = entry.get("sessions")
        pairs = [
            (root, session)
            for session in (sessions if isinstance(sessions, list) else [])
            if isinstance(session, str)
            for root in roots
        ]
    return list(dict.fromkeys(pairs))[-_readers_limit(len(roots)) :]


def _doc_to(doc: Doc) -> dict[str, Any]:
    return {
        "path": str(doc.path),
        "title": doc.title,
        "instruction": doc.instruction,
        "project": str(doc.project_root),
        "projects": [str(p) for p in doc.projects],
        "sessions": list(doc.sessions),
        "readers": [list(r) for r in doc.readers],
        "registered_at": doc.registered_at,
        "updates": doc.updates,
        "last_updated": doc.last_updated,
    }


def _saved_count(value: Any) -> int:
    """An update count read from the file; 0 for none or one no daemon wrote."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return value if 0 <= value <= MAX_SAVED_UPDATES else 0


def _saved_time(value: Any) -> float | None:
    """A time read from the file (seconds since the epoch); None for none or one no daemon
    wrote: not a number, not finite, not after 1970, or later than now (a date in the future
    shown as the last update, or kept ahead of every real one by the merge)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    # Compared, not converted first: NaN and infinities fail it, and an int too large for a
    # float (float() raised OverflowError) is compared exactly.
    if not 0 < value <= time.time() + CLOCK_SLACK_S:
        return None
    return float(value)


def _doc_from(entry: Any) -> Doc | None:
    """A kept registration, or None when it is not one (a hand-edited or damaged file)."""
    if not isinstance(entry, dict):
        return None
    path, project, title = entry.get("path"), entry.get("project"), entry.get("title")
    sessions, instruction = entry.get("sessions"), entry.get("instruction")
    if not (_is_root(path) and _is_root(project)):
        return None
    if not isinstance(title, str) or not isinstance(sessions, list):
        return None
    registered_at = _saved_time(entry.get("registered_at"))
    return Doc(
        Path(path),
        title,
        instruction if isinstance(instruction, str) else None,
        Path(project),
        dict.fromkeys(s for s in sessions[-MAX_SESSIONS_PER_DOC:] if isinstance(s, str)),
        registered_at if registered_at is not None else time.time(),
        # Kept since session 23: an older file has neither (0 and never, as before).
        updates=_saved_count(entry.get("updates")),
        last_updated=_saved_time(entry.get("last_updated")),
        projects=dict.fromkeys(Path(p) for p in _saved_projects(entry)),
        readers=dict.fromkeys(_saved_readers(entry)),
    )
