"""Background memory extraction: after a turn, an agent may save what the turn taught.

Path B of SPEC "Writing, two mutually exclusive paths": when the main agent did not write
memory itself this turn (no Write/Edit into the memory dir since the last real user message,
and no file in the memory dir changed since the session's previous `after_turn` other than by
our own writers), an agent with the manifest of existing memories in its prompt gets at most
five turns to write or update memory files and the index. It may read the project and the
memory dir, and write only inside the memory dir. One run at a time per memory dir; triggers
that arrive while one runs are coalesced into a single follow-up run on the latest transcript.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
import weakref
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import structlog

from memoryd.agent.policy import real
from memoryd.agent.seen import SeenFiles
from memoryd.agent.transcript import render_transcript
from memoryd.automem import extraction_prompts as prompts
from memoryd.automem import index as index_mod
from memoryd.automem import naming
from memoryd.automem.agent_guards import (
    keep_version,
    memory_screen_for,
    memory_writer_policy,
    refusing_duplicates,
)
from memoryd.automem.cursors import Cursor, Cursors
from memoryd.automem.manifest import MemoryHeader, format_manifest
from memoryd.automem.service import AutoMemory
from memoryd.core.turn import Turn
from memoryd.errors import MemorydError, TooLarge
from memoryd.session.compaction import compacted_head

if TYPE_CHECKING:
    from memoryd.agent.loop import AgentResult
    from memoryd.core.host import Host
    from memoryd.core.project import Project

log = structlog.get_logger("memoryd.extraction")

WORKER = "extraction"
MAX_TURNS = 5
MAX_TOKENS = 4096
MAX_SESSIONS = 10_000  # sessions whose last turn time and cursor are remembered
MANIFEST_LIMIT = 200  # newest memories listed in the extraction prompt
MEMORY_WRITE_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
# How far in the future a memory file's mtime may be and still count as written just now (a
# file system whose clock is a little ahead, NFS).
FUTURE_SLACK_NS = 5_000_000_000


# -- pure: did the main agent write memory this turn? ------------------------------------------
def _is_user_prompt(message: dict[str, Any]) -> bool:
    """A message the user typed (not one that only carries tool results)."""
    if message.get("role") != "user":
        return False
    content = message.get("content")
    if isinstance(content, str):
        return True
    if not isinstance(content, list):
        return False
    return any(not (isinstance(b, dict) and b.get("type") == "tool_result") for b in content)


def current_turn(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages since the last user prompt (the assistant's work this turn)."""
    for i in range(len(messages) - 1, -1, -1):
        if _is_user_prompt(messages[i]):
            return messages[i + 1 :]
    return messages


def main_agent_wrote_memory(messages: list[dict[str, Any]], memory_dir: Path) -> bool:
    """Did an assistant tool call this turn write or edit a file inside `memory_dir`?"""
    root = real(memory_dir)
    for message in current_turn(messages):
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "tool_use":
                continue
            if block.get("name") not in MEMORY_WRITE_TOOLS:
                continue
            tool_input = block.get("input")
            if not isinstance(tool_input, dict):
                continue
            target = tool_input.get("file_path") or tool_input.get("notebook_path")
            if isinstance(target, str) and target and "\x00" not in target:
                path = real(target)
                if path == root or path.is_relative_to(root):
                    return True
    return False


# -- pure: where in a transcript extraction left off (`cursors.Cursor`) -------------------------
# How many of the last offered messages the mark covers. One alone collided: short replies
# ("Done.", "OK") and repeated prompts ("continue") have equal fingerprints, and after the
# client's own compaction the offered part was found at a later "Done.", so the messages
# between were never offered.
MARK_SPAN = 3


def message_mark(message: dict[str, Any]) -> str:
    """A message's fingerprint: its role and first block, which a later line of the same
    reply (merged into the message) does not change."""
    content = message.get("content")
    first = content[0] if isinstance(content, list) and content else content
    text = json.dumps([message.get("role"), first], sort_keys=True, default=str)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _span_mark(marks: list[str], end: int) -> str:
    """The mark of the MARK_SPAN messages ending at `end` (fewer at the list's start)."""
    joined = "/".join(marks[max(0, end - MARK_SPAN) : end])
    return hashlib.blake2b(joined.encode(), digest_size=16).hexdigest()


def cursor_after(messages: list[dict[str, Any]]) -> Cursor:
    marks = [message_mark(m) for m in messages[-MARK_SPAN:]]
    return Cursor(len(messages), _span_mark(marks, len(marks)) if messages else None)


def new_messages_start(messages: list[dict[str, Any]], cursor: Cursor | None) -> int:
    """The index of the first message extraction has not been offered yet.

    Found by the last offered message's mark, newest first, where the count does not hold:
    before, after Claude Code's own compaction (memoryd's `compact` had moved the count to its
    compacted list), a long first turn was offered from the old count on, and its prompt,
    the message that most often holds what to remember, never was. A transcript without the
    offered messages (compacted by the client, cut to its newest) is new from its start."""
    if cursor is None or not messages:
        return 0
    if _holds_at_count(messages, cursor):
        return cursor.count
    if cursor.mark is None:
        return 0
    marks = [message_mark(m) for m in messages]
    # Where the count does not hold: the earliest place the offered part's last messages
    # stand, so that when unsure more is offered again rather than something never.
    for end in range(1, len(messages) + 1):
        if _span_mark(marks, end) == cursor.mark:
            return end
    return 0


def _holds_at_count(messages: list[dict[str, Any]], cursor: Cursor) -> bool:
    """Whether `messages` hold the offered part where the cursor's count says: the usual
    case, on the event loop each turn (the same list, grown), in which only the last offered
    messages are fingerprinted, not the whole transcript. A cursor without a mark (its last
    offered message compacted away) holds in memoryd's compacted list."""
    count = cursor.count
    if not 0 < count <= len(messages):
        return False
    if cursor.mark is None:
        return compacted_head(messages) > 0
    tail = [message_mark(m) for m in messages[max(0, count - MARK_SPAN) : count]]
    return _span_mark(tail, len(tail)) == cursor.mark


def session_place(project: Project, session_id: str) -> str:
    """The key of a session's cursor, last turn time and pending turn: the project's folder
    name and the session id. By the id alone, two projects' sessions of one id (the protocol's
    own example is "s1") moved each other's cursor, and the next extraction of one was offered
    its whole conversation again. `/` stands in neither (a folder name, `SessionId`), so a key
    names one (project, session) and one saved before (a bare id) is told from it."""
    return f"{project.key}/{session_id}"


# -- the service ---------------------------------------------------------------------------
@dataclass
class _Pending:
    turn: Turn
    since: float | None  # the session's after_turn before the first of the coalesced turns
    # The turn's disk check, started when it was scheduled (see `_schedule`).
    check: asyncio.Future[Path | None] | None = None


@dataclass
class _DirRun:
    task: asyncio.Task[Any] | None = None
    # One pending turn per session, oldest first. Sessions of one memory dir (two in one
    # project, two worktrees of one repo) each keep theirs: with one slot for the dir, another
    # session's turn replaced it and that turn was never offered (a session's last one, lost).
    pending: OrderedDict[str, _Pending] = field(default_factory=OrderedDict)  # by place


# What `status` counts, in the order it shows them.
_Count = Literal["scheduled", "runs", "coalesced", "skipped_main_agent", "written", "failed"]


class Extraction:
    def __init__(self, host: Host, automem: AutoMemory) -> None:
        self.host = host
        self.automem = automem
        self.counts: Counter[_Count] = Counter(dict.fromkeys(get_args(_Count), 0))
        self.last_run: dict[str, Any] | None = None
        # Per memory dir, while it has work: a daemon that runs for months sees hundreds.
        self._runs: dict[Path, _DirRun] = {}  # dropped when its run ends with none pending
        # Kept while someone holds it (`async with`), waits for it or is about to take it:
        # one left behind by then is no one's.
        self._run_locks: weakref.WeakValueDictionary[Path, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        # place (`session_place`) -> (wall, monotonic) time of its last after_turn
        # (`_previous_turn_at`)
        self._last_turn_at: dict[str, tuple[float, float]] = {}
        # place -> where its offered messages end; kept across restarts (`cursors`)
        self._cursor = Cursors()
        self._saving_cursors = asyncio.Lock()  # one write at a time, the newest last
        # Files our own background writers wrote, with the mtime they left: not the main agent.
        self._own: dict[str, int] = {}
        self.skip_reason: str | None = None
        # The formatted manifest per memory dir, keyed by the header list it was made from
        # (the store hands back the same list while nothing changed, so the check is O(1)).
        self._manifests: dict[Path, tuple[list[MemoryHeader], str]] = {}
        # A dir the store lets go of: its manifest (which holds the dir's headers) goes too.
        automem.states.on_evict.append(self._let_go)

    # -- bookkeeping (called from the after_turn hook; must be quick) ------------------------
    def note_own_write(self, path: Path) -> None:
        try:
            self._own[str(path)] = path.stat().st_mtime_ns
        except OSError:
            self._own.pop(str(path), None)

    def _changed_since(self, memory_dir: Path, since: float) -> Path | None:
        """A memory file (top level; team/ is the sync's) modified after `since` and not
        after now (give or take FUTURE_SLACK_NS), not by us."""
        cutoff = int(since * 1e9)
        # A file dated in the future (a clock that ran ahead, a restored backup, `touch -d`)
        # was not written this turn: counted, it skipped extraction on every turn until then.
        latest = time.time_ns() + FUTURE_SLACK_NS
        own = self._own
        base = os.fspath(memory_dir)
        try:
            fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return None
        try:
            names = os.listdir(fd)
            # Cheap tests first: this runs on every turn over every memory file. A stat
            # relative to the open dir skips building each path (only a hit needs one).
            for name in names:
                # The index is not a memory: memoryd itself rewrites it (a delete, a
                # reconcile), and a main agent that saves a memory writes its file too.
                if not name.endswith(".md") or naming.is_index_name(name):
                    continue
                try:
                    mtime = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mtime_ns
                except OSError:
                    continue
                if cutoff < mtime <= latest:
                    path = os.path.join(base, name)
                    if own.get(path) != mtime:
                        return Path(path)
        except OSError:
            return None
        finally:
            os.close(fd)
        return None

    def _previous_turn_at(self, place: str) -> float | None:
        """The wall time of the session's previous after_turn, for comparing with mtimes, and
        note this one. The clock set back since (by hand, NTP): a file the main agent writes
        now is dated before that time, looked like no write, and its memory was extracted a
        second time. So the time is also taken as the monotonic clock measured it, in the
        wall clock's present setting, and the earlier of the two counts."""
        wall, mono = time.time(), time.monotonic()
        previous = self._last_turn_at.pop(place, None)  # re-inserted as newest
        self._last_turn_at[place] = (wall, mono)
        if previous is None:
            return None
        then_wall, then_mono = previous
        return min(then_wall, wall - (mono - then_mono))

    def _place(self, project: Project, session_id: str, messages: list[dict[str, Any]]) -> str:
        """`session_place`, taking over once the cursor a daemon before it saved under the
        bare session id: dropped, an upgrade offered every session's whole conversation again.
        Only when `messages` (the session's transcript) hold it where its count says: of two
        projects' sessions of that id, the first to have a turn took it, found its mark
        nowhere in its messages, and both were offered their whole conversation again."""
        place = session_place(project, session_id)
        if self._cursor.get(place) is None:
            legacy = self._cursor.get(session_id)
            if legacy is not None and _holds_at_count(messages, legacy):
                self._cursor.pop(session_id)
                self._cursor[place] = legacy
        return place

    def on_turn(self, turn: Turn) -> bool:
        place = self._place(turn.project, turn.session_id, turn.messages)
        previous = self._previous_turn_at(place)
        if len(self._last_turn_at) > MAX_SESSIONS:  # forget the longest-idle sessions
            oldest = next(iter(self._last_turn_at))
            self._last_turn_at.pop(oldest, None)
            self._cursor.pop(oldest)
        if not self.host.model.configured:
            self.skip_reason = "no model configured"
            return False
        am = self.automem
        try:
            if not am.enabled(turn.project):
                self.skip_reason = "auto memory is off"
                # What is said while it is off is never offered, also not once it is on again
                # (the user turned it off not to have it remembered): the next extraction
                # was offered every message since the last one made while it was on.
                self._drop_pending(place)
                self._cursor[place] = cursor_after(turn.messages)
                return False
            memory_dir = am.memory_dir(turn.project)
        except MemorydError as exc:
            self.skip_reason = exc.message
            return False
        am.warm(memory_dir)  # a project's first turn: load its store in the background
        self.skip_reason = None
        if main_agent_wrote_memory(turn.messages, memory_dir):
            # An earlier turn of the session still waiting behind a run is folded into this
            # one, as a coalesced trigger is: left queued, it ran after the cursor had moved
            # past this turn, was offered the whole conversation from its first message,
            # and moved the cursor back before this turn (whose memory the main agent saved).
            self._drop_pending(place)
            self._skip_main_agent(turn, "a Write/Edit into the memory dir this turn")
            return False
        self._schedule(memory_dir, place, turn, previous)
        return True

    def on_compaction(
        self,
        project: Project,
        session_id: str,
        messages: list[dict[str, Any]],
        dropped: int,
        added: int,
    ) -> None:
        """`compact` replaced the first `dropped` messages of the session's transcript
        `messages` by `added` new ones (boundary and summary): move the cursor the same way,
        so the next turn offers exactly the messages that came after the compaction."""
        place = self._place(project, session_id, messages)
        offered = self._cursor.get(place)
        if offered is not None:
            # The last message offered is still there when it was kept; when it was dropped,
            # the count holds for memoryd's compacted list only (the mark says which).
            kept = offered.count > dropped
            self._cursor[place] = Cursor(
                added + max(0, offered.count - dropped), offered.mark if kept else None
            )

    def _drop_pending(self, place: str) -> None:
        """Fold the session's turn waiting behind a run into the turn at hand, which is
        not extracted: run after it, it was offered from the first message on (the cursor
        past the newer turn, which it does not hold) and moved the cursor back."""
        for run in self._runs.values():
            earlier = run.pending.pop(place, None)
            if earlier is not None:
                _cancel(earlier.check)
                self.counts["coalesced"] += 1

    def _skip_main_agent(self, turn: Turn, seen: str) -> None:
        self.counts["skipped_main_agent"] += 1
        self._cursor[session_place(turn.project, turn.session_id)] = cursor_after(turn.messages)
        log.info(
            "extraction skipped: the main agent wrote memory", session=turn.session_id, seen=seen
        )

    def _schedule(self, memory_dir: Path, place: str, turn: Turn, since: float | None) -> None:
        self.counts["scheduled"] += 1
        run = self._runs.setdefault(memory_dir, _DirRun())
        earlier = run.pending.pop(place, None)
        if earlier is not None:
            self.counts["coalesced"] += 1
            # Coalesced triggers: look for main-agent writes since the earliest of them.
            if since is not None and earlier.since is not None:
                since = min(since, earlier.since)
            _cancel(earlier.check)  # made for the earlier trigger's `since`
        entry = _Pending(turn, since)
        run.pending[place] = entry
        if run.task is None:
            if since is not None and not self.run_lock(memory_dir).locked():
                # The run starts at once: its disk check (a stat of every memory file, the
                # longest step before the model request) starts now, in a thread, while the
                # rest of `after_turn` and the prompt are built.
                entry.check = _in_thread(self._changed_since, memory_dir, since)
            run.task = self.host.spawn(self._drain(memory_dir, run), worker=WORKER, writes=True)

    async def _drain(self, memory_dir: Path, run: _DirRun) -> None:
        try:
            while run.pending:
                _, entry = run.pending.popitem(last=False)
                check = entry.check
                lock = self.run_lock(memory_dir)
                if check is not None and lock.locked():
                    check.cancel()  # we wait for another agent: check when it is our turn
                    check = None
                async with lock:
                    await self.extract(entry.turn, since=entry.since, disk_check=check)
        finally:
            for entry in run.pending.values():
                _cancel(entry.check)
                entry.check = None
            run.task = None
            self._let_go(memory_dir)

    def _let_go(self, memory_dir: Path) -> None:
        """Forget a dir with no run and nothing pending; its manifest too once the store let
        go of the dir (evicted while a run was on, it is dropped at the run's end)."""
        run = self._runs.get(memory_dir)
        if run is not None:
            if run.task is not None or run.pending:
                return
            del self._runs[memory_dir]
        if memory_dir not in self.automem.states.states:
            self._manifests.pop(memory_dir, None)

    async def _cannot_extract(
        self, exc: MemorydError, disk_check: asyncio.Future[Path | None] | None
    ) -> None:
        if disk_check is not None:
            disk_check.cancel()
        await self.host.report_worker_error(WORKER, f"cannot extract: {exc.message}")
        self.counts["failed"] += 1

    def run_lock(self, memory_dir: Path) -> asyncio.Lock:
        """Held by whichever writing agent (extraction, dream) works on `memory_dir`."""
        lock = self._run_locks.get(memory_dir)
        if lock is None:
            lock = self._run_locks[memory_dir] = asyncio.Lock()
        return lock

    async def wait_idle(self) -> None:
        """Until no extraction runs or is pending (tests, shutdown)."""
        while any(r.task is not None for r in self._runs.values()):
            tasks = [r.task for r in self._runs.values() if r.task is not None]
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- one run -----------------------------------------------------------------------------
    def manifest_text(self, memory_dir: Path, headers: list[MemoryHeader]) -> str:
        """The newest MANIFEST_LIMIT memories, one line each, and a note about the rest.

        A big memory dir would otherwise put tens of thousands of tokens into every
        extraction; the agent can still Grep/Glob the dir for older ones.
        """
        cached = self._manifests.get(memory_dir)
        if cached is not None and (cached[0] is headers or cached[0] == headers):
            return cached[1]
        newest = sorted(headers, key=lambda h: h.mtime, reverse=True)[:MANIFEST_LIMIT]
        text = format_manifest(sorted(newest, key=lambda h: (h.team, h.file)))
        if len(headers) > MANIFEST_LIMIT:
            text += (
                f"\n({len(headers) - MANIFEST_LIMIT} older memories are not listed; search "
                f"`{memory_dir}` with Grep or Glob before adding one that may exist.)"
            )
        self._manifests[memory_dir] = (headers, text)
        return text

    def build_request(
        self, turn: Turn, memory_dir: Path, manifest: str
    ) -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]] | None, str | None]:
        """(system, messages, tools, model) for one extraction of `turn`."""
        place = session_place(turn.project, turn.session_id)
        start = new_messages_start(turn.messages, self._cursor.get(place))
        # `extract` runs none without a new message; should the cursor move meanwhile (a
        # compact), the last message, never the whole conversation again.
        start = min(start, max(len(turn.messages) - 1, 0))
        new = len(turn.messages) - start
        scope = "most recent turn" if new <= 2 else f"last {new} messages"
        text = prompts.instruction(
            memory_dir=str(memory_dir), manifest=manifest, max_turns=MAX_TURNS, scope=scope
        )
        if turn.tools is not None and turn.model:
            # The main request's prefix (a request without a system prompt has none to reuse).
            messages = prompts.reuse_messages(turn.messages, turn.system, turn.tools, text)
            return turn.system, messages, turn.tools, turn.model
        transcript = render_transcript(turn.messages[start:])
        return prompts.SYSTEM_PROMPT, prompts.standalone_messages(transcript, text), None, None

    async def extract(
        self,
        turn: Turn,
        *,
        since: float | None = None,
        disk_check: asyncio.Future[Path | None] | None = None,
    ) -> AgentResult | None:
        """One extraction of `turn`; None when it was skipped or could not start.

        `since`: skip when a memory file changed on disk after that time (not by us). That
        check stats every memory file, so it runs in a thread while the prompt is built
        (`disk_check`: that check for this `since`, already started by the caller).
        """
        am = self.automem
        project = turn.project
        try:
            memory_dir = am.memory_dir(project)
        except MemorydError as exc:
            await self._cannot_extract(exc, disk_check)
            return None
        place = session_place(project, turn.session_id)
        start = new_messages_start(turn.messages, self._cursor.get(place))
        if start >= len(turn.messages):
            # Nothing since the last offer (the same transcript again: a client's retry, a
            # Stop hook that fired twice). It was offered as "the last N messages" from the
            # first message on: every turn already looked at was extracted again.
            if disk_check is not None:
                disk_check.cancel()
            log.info("extraction skipped: no new messages", session=turn.session_id)
            return None
        # A project's first extraction waits for the store's background first load, if one
        # runs, instead of parsing every memory file at once on the event loop.
        await am.ready(memory_dir)
        if disk_check is None and since is not None:
            disk_check = _in_thread(self._changed_since, memory_dir, since)
        try:
            headers = am.manifest(project)
            system, messages, tools, model = self.build_request(
                turn, memory_dir, self.manifest_text(memory_dir, headers)
            )
        except MemorydError as exc:
            await self._cannot_extract(exc, disk_check)
            return None
        changed = await disk_check if disk_check is not None else None
        if changed is not None:
            self._skip_main_agent(turn, f"{changed} changed on disk since the last turn")
            return None
        offered_before = self._cursor.get(place)
        self._cursor[place] = cursor_after(turn.messages)
        written: list[Path] = []
        index_written: list[Path] = []

        async def on_write(path: Path) -> None:
            self.note_own_write(path)
            if not naming.is_index_name(path.name):
                # A memory saved. An index (MEMORY.md, team/MEMORY.md: no folder's file of
                # that name is read as a memory) is none: team/MEMORY.md was announced.
                if path not in written:  # written, then edited: one memory, counted once
                    written.append(path)
            else:
                index_written.append(path)

        self.counts["runs"] += 1
        from memoryd.agent.loop import run_agent  # loaded when an extraction runs

        try:
            result = await run_agent(
                self.host,
                feature=WORKER,
                policy=memory_writer_policy(memory_dir, read_roots=(project.root,), team=True),
                screen_write=refusing_duplicates(
                    memory_screen_for(am, project), memory_dir, am.state(memory_dir).snapshot()
                ),
                system=system,
                messages=messages,
                model=model,
                max_turns=MAX_TURNS,
                max_tokens=MAX_TOKENS,
                tools=tools,
                before_write=keep_version(am),
                on_write=on_write,
                write_lock=am.writer_lock(memory_dir),
                seen=SeenFiles(),  # a write of a file there needs a fresh Read (`agent.seen`)
            )
        finally:
            # Even when the run was stopped: what it wrote is indexed and announced.
            # An index the agent rewrote is reconciled too, when it wrote no memory: one that
            # dropped lines or listed files that do not exist stayed so.
            problem = await self.settle(project, memory_dir, written, always=bool(index_written))
        if problem is not None:
            await self.host.report_worker_error(WORKER, problem)
        if result.stop_reason == "error" and not result.refused and not written:
            self._offer_again(turn, offered_before)
        await self._save_cursors()
        self.counts["written"] += len(written)
        self.last_run = {
            "project": str(project.root),
            "session_id": turn.session_id,
            "stop_reason": result.stop_reason,
            "turns": result.turns,
            "written": [str(p) for p in written],
            "denied": len(result.denied),
            "usage": result.usage,
            "at": time.time(),
        }
        await self._report_silent_failure(result, written)
        return result

    async def _save_cursors(self) -> None:
        """Write the sessions' places once a run is over (not before: a run cut short by a
        crash is offered again). The text is made under the lock, so the newest is written
        last."""
        async with self._saving_cursors:
            text = self._cursor.unsaved()
            if text is not None:
                await asyncio.to_thread(self._cursor.write, text)

    def _offer_again(self, turn: Turn, offered_before: Cursor | None) -> None:
        """A run that failed (the model unreachable, overloaded past every retry) and wrote
        nothing: the next extraction of the session is offered this turn's messages again.
        Before, they were passed over for good. Not when a compaction moved the cursor since,
        not after a refusal (offered again, the same messages were refused on every later
        turn), and not after a memory was written (it would be saved twice)."""
        place = session_place(turn.project, turn.session_id)
        if self._cursor.get(place) != cursor_after(turn.messages):
            return
        if offered_before is None:
            self._cursor.pop(place)
        else:
            self._cursor[place] = offered_before

    async def settle(
        self, project: Project, memory_dir: Path, written: list[Path], *, always: bool = False
    ) -> str | None:
        """After a background agent's run (extraction's, dream's): the index put in step with
        what it wrote (`always`: even with nothing written), memoryd's own writes noted, and
        each memory written announced. Returns why the index was not rebuilt (its lines would
        take it over its cap), or None: that raised out of the run before, and an extraction
        then neither noted its own writes nor saved its place."""
        if not written and not always:
            return None
        problem = None
        try:
            await self.automem.reconcile_index(project)
        except TooLarge as exc:
            log.warning("index not rebuilt", memory_dir=str(memory_dir), why=exc.message)
            problem = f"the index was not rebuilt: {exc.message}"
        for path in (memory_dir / index_mod.INDEX_NAME, *written):
            self.note_own_write(path)
        # Announced once the index has its lines: a client that reacts to `memory/saved`
        # (get_context, the memory UI) must see the memory in MEMORY.md as well.
        for path in dict.fromkeys(written):
            await self.host.notify(
                "memory/saved", {"path": str(path), "project": str(project.root)}
            )
        return problem

    async def _report_silent_failure(self, result: AgentResult, written: list[Path]) -> None:
        """An extraction that wrote nothing although the model meant to is an error."""
        if result.stop_reason == "error":
            self.counts["failed"] += 1
            return
        if written or result.stop_reason != "end_turn":
            return
        if result.attempted_writes:
            message = (
                f"extraction wrote nothing: all {result.attempted_writes} write(s) the model "
                "made failed or were refused"
            )
        elif prompts.NOTHING_MARKER not in result.final_text:
            message = (
                "extraction wrote nothing, but the model did not say there was nothing to save: "
                f"{result.final_text[:200]!r}"
            )
        else:
            return
        self.counts["failed"] += 1
        await self.host.report_worker_error(WORKER, message)

    # -- status ------------------------------------------------------------------------------
    def feature_status(self) -> dict[str, Any]:
        configured = self.host.model.configured
        reason = None if configured else (self.host.model.reason or "no model configured")
        return {
            "extraction": {
                "enabled": configured,
                "reason": reason if reason else self.skip_reason,
                "running": sum(1 for r in self._runs.values() if r.task is not None),
                **self.counts,
                "last_run": self.last_run,
            }
        }

    async def close(self) -> None:
        for run in self._runs.values():
            for entry in run.pending.values():
                _cancel(entry.check)
            run.pending.clear()
            if run.task is not None:
                run.task.cancel()


def _in_thread(
    check: Callable[[Path, float], Path | None], memory_dir: Path, since: float
) -> asyncio.Future[Path | None]:
    # Submitted now (not when a task first runs), so the thread starts right away.
    return asyncio.get_running_loop().run_in_executor(None, check, memory_dir, since)


def _cancel(check: asyncio.Future[Path | None] | None) -> None:
    if check is not None:
        check.cancel()
