"""`SessionMemory`: the daemon service behind Layer 3 (session summary and `compact`).

Per session it keeps the token counter (cached per-message estimates + usage correction),
the thresholds state (persisted, see `state`), and at most one running summary update. An
update copies the summary to a draft, lets an agent that may edit only that draft bring it up
to date, then replaces the summary atomically — so a crash mid-update leaves the previous
summary whole. Turns that qualify while an update runs are coalesced into one follow-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import json
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from memoryd import fsutil, paths
from memoryd.agent.policy import AccessPolicy, Denied
from memoryd.automem.settings_cache import SettingsCache
from memoryd.core.turn import Turn
from memoryd.llm.prompt_cache import count_breakpoints
from memoryd.llm.tokens import TokenCounter, estimate_text
from memoryd.session import compaction, prompts, state, thresholds
from memoryd.session.template import Template, is_empty_summary, load_template, lost_headings

if TYPE_CHECKING:
    from memoryd.agent.secret_screen import WriteScreen
    from memoryd.agent.tools import WriteOp
    from memoryd.core.host import Host
    from memoryd.core.project import Project

log = structlog.get_logger("memoryd.session")

FEATURE = "session_memory"
WAIT_FOR_UPDATE_S = 15.0
DEAD_UPDATE_S = 60.0
# The notes an update may leave (estimated tokens): each update sends them next to up to
# UPDATE_INPUT_TOKENS (120,000) of transcript and the main conversation's system prompt and
# tools, which must fit a 200,000-token context; ten sections at SPEC's ~2,000 tokens are
# 20,000. At 400,000 characters (~100,000 tokens) a draft the agent filled with the pasted
# conversation was kept, and every later update of the session was over the context.
MAX_NOTES_TOKENS = 40_000
# Notes over it an older daemon kept are cut this far under compact's bounds (a cut's note,
# naming the file that holds them whole, is ~40 tokens).
NOTE_ROOM_TOKENS = 100
# compact reads at most this much of a summary (it is cut to ~24k tokens anyway).
MAX_SUMMARY_READ_BYTES = 4 * 1024 * 1024
MAX_SESSIONS_IN_MEMORY = 256
# Usage corrections of sessions evicted with nothing else worth a record, kept in memory
# (a few dozen bytes each) for when they come back.
MAX_EVICTED_OFFSETS = 4096
LINKED = (
    "memoryd reads and replaces only a file there (the update would replace the link, and its "
    "target would stop getting the notes); put the file itself in its place"
)
# Why a secret in the notes matters, in the warning when the refusal is off.
IN_THE_NOTES = (
    "the session notes are plain text, sent back to the model when the session is compacted"
)
AGENT_MAX_TURNS = 5
AGENT_MAX_TOKENS = 4_096
# Transcripts this long are counted in a thread (about 5 ms of counting per 5,000 messages).
COUNT_IN_THREAD = 5_000


# A transcript compact hands back unchanged (session memory not used) is echoed in `messages`
# (PROTOCOL.md: the result has it) whenever the reply fits the daemon's reply cap; only one
# that would not (a -32004, its reason lost) is left out, `messages_omitted` saying so. This
# is the room the rest of the reply takes at most: the envelope, an id of up to 1,024
# characters, `summary_path`, `reason` and `waited`, each escaped at worst (6 bytes a byte).
REPLY_ROOM = 64 * 1024


def _json_size_and_digest(messages: list[dict[str, Any]]) -> tuple[int, bytes]:
    """The transcript's size as JSON, as the reply echoes it, and a digest of it."""
    import orjson

    try:
        encoded = orjson.dumps(messages)
    except TypeError:
        # What orjson refuses (an integer beyond 64 bits, read by the stdlib next to half a
        # surrogate pair) the reply's encoder takes so: measured as 0 bytes, such a transcript
        # was echoed over the reply cap (-32004, the reason lost), and compacted again when
        # repeated.
        encoded = json.dumps(messages, separators=(",", ":"), default=str).encode()
    # sha256: the fastest of hashlib here (CPU instructions), ~20 ms for 20 MB, in a thread.
    return len(encoded), hashlib.sha256(encoded).digest()


@dataclass(frozen=True)
class DoneCompaction:
    """The session's last compaction, what a second `compact` of the same transcript gets:
    run again, it read the first one's index of summarised messages (which counts the
    compacted transcript) against the old transcript, kept another window, and counted a
    second compaction (extraction's cursor moved twice)."""

    digest: bytes  # of the transcript compacted
    # Of the notes as read: the notes themselves (up to MAX_SUMMARY_READ_BYTES) were kept per
    # session, 256 sessions up to 1 GiB, to compare one text a repeat reads again anyway.
    summary_digest: bytes
    generation: int  # the session's, after it
    summarized: int | None  # the record's, after it
    start: int  # messages[start:] were kept
    reply: dict[str, Any]  # its reply, `messages` holding the two head messages only


class NotesNotCreated(Exception):
    """The session notes could not be created from the template (a folder that cannot be
    made, a full disk): not a notes file that cannot be read, so the reason says so."""

    def __init__(self, path: Path, error: OSError) -> None:
        super().__init__(f"cannot create the session notes {path} from the template: {error}")


@dataclass
class Session:
    project: Project
    record: state.SessionRecord
    counter: TokenCounter
    summary_path: Path
    running: asyncio.Task[Any] | None = None
    update_started: float | None = None  # monotonic start of the update in progress
    # The latest turn that asked for an update while one ran, with the generation it was
    # counted in (a compaction may come between its turn and its update).
    pending: tuple[Turn, int] | None = None
    waiters: int = 0  # compact calls working on this session (it must not be evicted)
    # Bumped by each compaction: an update that started before one must not record its
    # message index, which counts messages of the transcript that was replaced.
    generation: int = 0
    # One count at a time: a count in a thread and one on the loop would interleave their
    # updates of the counter's cache.
    counting: asyncio.Lock = field(default_factory=asyncio.Lock)
    # One compaction at a time; the last one, for a call that repeats it.
    compacting: asyncio.Lock = field(default_factory=asyncio.Lock)
    compacted: DoneCompaction | None = None

    async def per_message(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        return (await self.count(messages, None))[1]

    async def count(
        self, messages: Sequence[Mapping[str, Any]], usage: Mapping[str, Any] | None
    ) -> tuple[int, list[int]]:
        """`counter.count`, in a thread for a long transcript: fingerprinting 257,000 messages
        held the loop 0.2-0.35 s on every turn."""
        async with self.counting:
            if len(messages) < COUNT_IN_THREAD:
                return self.counter.count(messages, usage)
            return await asyncio.to_thread(self.counter.count, messages, usage)

    @property
    def busy(self) -> bool:
        return self.running is not None and not self.running.done()


class SessionMemory:
    def __init__(
        self,
        host: Host,
        *,
        on_compacted: Callable[[Path], object],
        reply_limit: int,
        settings: SettingsCache | None = None,
    ) -> None:
        self.host = host
        # A transcript over this many bytes of JSON is not echoed (see REPLY_ROOM).
        self._echo_limit = reply_limit - REPLY_ROOM
        # The user's settings (`memorydRefuseSecrets`); the daemon passes auto memory's cache.
        self.settings = settings if settings is not None else SettingsCache(None)
        # Told a project's root after a compaction (the daemon drops its cached
        # instruction files, so the compacted session reloads them).
        self._on_compacted = on_compacted
        self._sessions: OrderedDict[tuple[str, str], Session] = OrderedDict()
        self._evicted_offsets: OrderedDict[tuple[str, str], int] = OrderedDict()

    # -- sessions -------------------------------------------------------------------------
    def summary_path(self, project: Project, session_id: str) -> Path:
        return (
            paths.config_dir()
            / "projects"
            / project.key
            / session_id
            / "session-memory"
            / "summary.md"
        )

    def session(self, project: Project, session_id: str) -> Session:
        """The in-memory session, loaded from its persisted record on first use."""
        key = (project.key, session_id)
        found = self._sessions.get(key)
        if found is not None:
            self._sessions.move_to_end(key)
            return found
        record, problem = state.load(project.key, session_id)
        if problem is not None:
            log.warning("session state reset", session_id=session_id, problem=problem)
        offset = self._evicted_offsets.pop(key, None)
        if offset is not None and not state.worth_keeping(record):
            record.token_offset = offset
        found = Session(
            project=project,
            record=record,
            counter=TokenCounter(offset=record.token_offset),
            summary_path=self.summary_path(project, session_id),
        )
        self._sessions[key] = found
        self._evict()
        return found

    def _evict(self) -> None:
        # Least recently used first; a session with an update running or a waiter stays.
        for key in list(self._sessions):
            if len(self._sessions) <= MAX_SESSIONS_IN_MEMORY:
                break
            candidate = self._sessions[key]
            if not candidate.busy and candidate.waiters == 0:
                if state.worth_keeping(candidate.record):
                    self._persist(candidate)  # keeps the latest usage correction
                elif candidate.counter.offset:
                    # No file for it: written, every session id a client names left one on
                    # disk (docs/session-memory.md: a record is written when its state changes).
                    self._evicted_offsets[key] = candidate.counter.offset
                    self._evicted_offsets.move_to_end(key)
                    while len(self._evicted_offsets) > MAX_EVICTED_OFFSETS:
                        self._evicted_offsets.popitem(last=False)
                del self._sessions[key]

    def _persist(self, session: Session) -> None:
        session.record.token_offset = session.counter.offset
        try:
            state.save(session.record)
        except OSError as exc:
            # Losing the thresholds state costs at most one early or late update: log, go on.
            log.warning(
                "cannot save session state", session_id=session.record.session_id, error=str(exc)
            )

    # -- after_turn -----------------------------------------------------------------------
    async def count_tokens(
        self,
        project: Project,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        usage: Mapping[str, Any] | None,
    ) -> int:
        """The conversation's corrected size; per-message estimates are cached per session."""
        session = self.session(project, session_id)
        session.compacted = None  # a turn came: a later compact is a new one
        tokens, _ = await session.count(messages, usage)
        return tokens

    async def on_turn(self, turn: Turn) -> bool:
        """Bookkeeping for one finished turn; starts an update when the thresholds say so
        (True when it did)."""
        session = self.session(turn.project, turn.session_id)
        covered = covered_messages(session.record, turn.messages)
        if covered != session.record.summarized_messages:
            # Read against this transcript later (grown back past it), the old count made
            # compact keep as covered messages the notes never saw.
            session.record.summarized_messages = covered
            session.record.summarized_in_compacted = False
            self._persist(session)
        if not self.host.model.configured:
            return False
        before = session.record.thresholds
        decision = thresholds.decide(before, turn.messages, turn.tokens)
        if decision.state != before:
            session.record.thresholds = decision.state
            self._persist(session)
        if not decision.update:
            return False
        queued = (turn, session.generation)
        if session.busy:
            session.pending = queued  # the running update picks up the latest turn next
        else:
            session.running = self.host.spawn(
                self._run_updates(session, queued), worker=FEATURE, writes=True
            )
        return True

    async def _run_updates(self, session: Session, queued: tuple[Turn, int]) -> None:
        next_turn: tuple[Turn, int] | None = queued
        while next_turn is not None:
            session.pending = None
            session.update_started = time.monotonic()
            try:
                await self.update_summary(session, *next_turn)
            finally:
                session.update_started = None
            next_turn = session.pending

    # -- the update -----------------------------------------------------------------------
    def ensure_summary(self, session: Session) -> Template:
        """Create the summary from the template when missing (dirs 0700, file 0600)."""
        template = load_template()
        if template.warning is not None:
            log.warning("session template not used", reason=template.warning)
        path = session.summary_path
        if not path.exists():
            try:
                _private_dirs(paths.config_dir() / "projects", path.parent)
                fsutil.create_exclusive(path, template.text)
            except OSError as exc:
                raise NotesNotCreated(path, exc) from exc
        return template

    async def update_summary(
        self, session: Session, turn: Turn, generation: int | None = None
    ) -> bool:
        """Run one update of the turn's transcript, counted in `generation` (by default the
        session's now); True when the summary changed."""
        record = session.record
        if generation is None:
            generation = session.generation
        path = session.summary_path
        try:
            current, template = await asyncio.to_thread(self._current_summary, session)
        except NotesNotCreated as exc:
            await self._failed(session, str(exc))
            return False
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                # Read through and then replaced by a file, the link's target silently stopped
                # getting the notes; compact refuses the link too.
                await self._failed(
                    session, f"the session notes {path} are a symbolic link: " + LINKED
                )
            else:
                await self._failed(session, f"cannot read the session notes {path}: {exc}")
            return False
        size = estimate_text(current)
        if size > MAX_NOTES_TOKENS:
            # Sent, the request is over the context (HTTP 400) at every threshold, and the
            # agent could not condense them (an Edit repeats the text it replaces): notes an
            # older daemon let grow stopped every update of the session. Cut as compact cuts
            # them, the whole notes kept beside.
            try:
                trimmed = await asyncio.to_thread(_trim_notes, path, current)
            except OSError as exc:
                await self._failed(
                    session,
                    f"the session notes {path} are ~{size:,} tokens, over the "
                    f"{MAX_NOTES_TOKENS:,} an update sends with the transcript, and cannot "
                    f"be cut: {exc}",
                )
                return False
            if trimmed is None:
                await self._failed(session, _kept_their_change(path))
                return False
            current = trimmed
        draft = path.with_name(".summary.draft.md")
        try:
            await asyncio.to_thread(fsutil.atomic_write_text, draft, current)
        except OSError as exc:
            await self._failed(
                session, f"cannot write the agent's copy {draft} of the notes: {exc}"
            )
            return False
        try:
            per = await session.per_message(turn.messages)
            from memoryd.agent.loop import run_agent  # loaded when a summary is written
            from memoryd.agent.secret_screen import secret_screen

            tools = _agent_tools(turn.tools)
            secrets = secret_screen(
                self.settings.get(session.project.settings_root), where=IN_THE_NOTES
            )
            screen = _keeping_headings(template.text, current, secrets)
            result = await run_agent(
                self.host,
                feature=FEATURE,
                policy=AccessPolicy(read_roots=(), write_files=(draft,), allow_shell=False),
                system=turn.system,
                messages=prompts.agent_messages(
                    turn.messages,
                    per,
                    prompts.update_prompt(str(draft), current),
                    breakpoints_used=count_breakpoints(turn.system) + count_breakpoints(tools),
                ),
                model=turn.model,
                max_turns=AGENT_MAX_TURNS,
                max_tokens=AGENT_MAX_TOKENS,
                tools=tools,
                screen_write=screen,
            )
            if result.stop_reason in ("error", "cancelled"):
                record.last_error = result.error or result.stop_reason
                self._persist(session)
                return False
            try:
                # Bytes, decoded: read_text's universal newlines made notes saved with CRLF
                # (a Windows editor) LF, so an update that changed nothing rewrote them.
                updated = (await asyncio.to_thread(draft.read_bytes)).decode("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                # The notes' folder removed meanwhile took the copy with it: no crash.
                await self._failed(
                    session,
                    _kept_their_change(path)
                    if not path.exists()
                    else f"cannot read the agent's copy {draft} of the notes: {exc}",
                )
                return False
            changed = updated != current
            if not changed and result.attempted_writes and not result.written:
                # Every write refused (a heading taken out, a secret) or failed: the notes do
                # not hold this transcript. Counted as summarised, compact dropped messages
                # the notes never saw. (A write that went through and left the notes as they
                # were is the agent's "nothing new": summarised.)
                await self._failed(
                    session,
                    f"none of the agent's {result.attempted_writes} write(s) went through "
                    "(refused or failed): the notes are as they were, this transcript not "
                    "counted as summarised",
                )
                return False
            # Empty: nothing at all, or (of notes that held some) the bare template again.
            emptied = not updated.strip() or (
                is_empty_summary(updated, (template.text,))
                and not is_empty_summary(current, (template.text,))
            )
            if changed and (emptied or estimate_text(updated) > MAX_NOTES_TOKENS):
                record.last_error = (
                    f"the agent left the notes empty or over {MAX_NOTES_TOKENS:,} tokens; "
                    "kept the old ones"
                )
                self._persist(session)
                await self.host.report_worker_error(FEATURE, record.last_error)
                return False
            try:
                replaced = not changed or await asyncio.to_thread(
                    _replace_if_same, path, current, updated
                )
            except OSError as exc:
                await self._failed(session, f"cannot write the session notes {path}: {exc}")
                return False
            if not replaced:
                # Edited (or removed) by hand while the agent worked on its copy: the edit
                # wins; the transcript is summarised again at the next threshold.
                await self._failed(session, _kept_their_change(path))
                return False
            if generation == session.generation:
                record.summarized_messages = len(turn.messages)
                record.summarized_in_compacted = False
            record.updates += 1
            record.last_update_at = time.time()
            record.last_error = None
            self._persist(session)
        finally:
            with contextlib.suppress(OSError):
                draft.unlink()
        if changed:
            self.host.counters[f"{FEATURE}.updates"] += 1
            await self.host.notify(
                "session/summary_updated",
                {"session_id": record.session_id, "path": str(path)},
            )
        return changed

    async def _failed(self, session: Session, reason: str) -> None:
        session.record.last_error = reason
        self._persist(session)
        await self.host.report_worker_error(FEATURE, reason)

    def _current_summary(self, session: Session) -> tuple[str, Template]:
        """The summary's text, created from the template when missing, and the template. A
        file that is not UTF-8 is moved aside (kept for the user, named in the log) and the
        notes start again from the template: otherwise no update could ever run for this
        session again."""
        template = self.ensure_summary(session)
        path = session.summary_path
        raw = fsutil.read_regular_file(path, MAX_SUMMARY_READ_BYTES)
        if len(raw) > MAX_SUMMARY_READ_BYTES:
            # An update would write back only the part it read.
            raise OSError(errno.EFBIG, f"over {MAX_SUMMARY_READ_BYTES} bytes")
        try:
            return raw.decode("utf-8"), template
        except UnicodeDecodeError:
            aside = _unused_name(path.with_name("summary.unreadable.md"))
            os.replace(path, aside)
            log.warning("session notes not UTF-8: moved aside", path=str(path), to=str(aside))
            self.ensure_summary(session)
            return fsutil.read_regular_file(path, MAX_SUMMARY_READ_BYTES).decode("utf-8"), template

    async def wait_idle(self, session: Session, wait_s: float = WAIT_FOR_UPDATE_S) -> str:
        """Wait for the update in flight: "idle", "waited", "timeout", or "dead" (too old)."""
        task = session.running
        if task is None or task.done():
            return "idle"
        started = session.update_started
        if started is not None and time.monotonic() - started > DEAD_UPDATE_S:
            return "dead"
        done, _ = await asyncio.wait({task}, timeout=wait_s)
        return "waited" if done else "timeout"

    # -- compact --------------------------------------------------------------------------
    async def compact(
        self,
        project: Project,
        session_id: str,
        messages: list[dict[str, Any]],
        on_compacted: Callable[[dict[str, Any]], object] | None = None,
    ) -> dict[str, Any]:
        """Compact `messages`; `on_compacted` is told the reply of a compaction done (not of
        a call that repeats the last one) before another compaction of the session starts."""
        session = self.session(project, session_id)
        session.waiters += 1  # pinned: not evicted while compact works on it
        try:
            # Two calls at once (a retry, two clients) get the same as one call: the second
            # waits for the first and, given the same transcript, gets its compaction.
            async with session.compacting:
                return await self._compact(session, messages, on_compacted)
        finally:
            session.waiters -= 1
            # Every compaction, with the summary or not, reloads edited instruction files; the
            # session's touched paths are kept, so conditional and nested rules stay active.
            self._on_compacted(project.root)

    async def _compact(
        self,
        session: Session,
        messages: list[dict[str, Any]],
        on_compacted: Callable[[dict[str, Any]], object] | None,
    ) -> dict[str, Any]:
        path = session.summary_path
        unchanged: dict[str, Any] = {"used_session_memory": False, "summary_path": str(path)}
        size, digest = await asyncio.to_thread(_json_size_and_digest, messages)
        if size > self._echo_limit:
            # The client's own list stands: echoed, a transcript this long made the reply
            # go over the reply cap (-32004) and the reason never came back.
            unchanged["messages_omitted"] = True
        else:
            unchanged["messages"] = messages
        waited = await self.wait_idle(session)  # every reply says it, an empty transcript's too
        if not messages:
            return {**unchanged, "reason": "empty_transcript", "waited": waited}
        try:
            summary, summary_digest = await asyncio.to_thread(_read_summary, path)
        except FileNotFoundError:
            return {**unchanged, "reason": "no_summary", "waited": waited}
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("cannot read session summary", path=str(path), error=str(exc))
            return {**unchanged, "reason": "unreadable_summary", "waited": waited}
        template = await asyncio.to_thread(load_template)
        if is_empty_summary(summary, (template.text,)):
            return {**unchanged, "reason": "empty_summary", "waited": waited}

        record = session.record
        done = session.compacted
        if (
            done is not None
            and done.digest == digest
            and done.summary_digest == summary_digest
            and done.generation == session.generation
            and done.summarized == record.summarized_messages
        ):
            # What this call waited for, not the first's (it said "waited" to every repeat).
            head = done.reply["messages"]
            return {**done.reply, "messages": [*head, *messages[done.start :]], "waited": waited}
        per = await session.per_message(messages)
        covered = covered_messages(record, messages)
        plan = compaction.plan_compaction(messages, per, summary, str(path), covered)
        # The summary covers the head; kept messages it already covered count as covered.
        summarized = 2 + (max(0, covered - plan.window.start) if covered is not None else 0)
        record.thresholds = thresholds.after_compaction(
            session.counter.corrected(plan.tokens_after), summarized
        )
        record.summarized_messages = summarized
        record.summarized_in_compacted = True
        record.compactions += 1
        session.generation += 1
        self._persist(session)
        self.host.counters[f"{FEATURE}.compactions"] += 1
        reply = {
            "messages": plan.messages,
            "used_session_memory": True,
            "reason": None,
            "summary_path": str(path),
            "waited": waited,
            "tokens_before": plan.tokens_before,
            "tokens_after": plan.tokens_after,
            "kept_messages": len(messages) - plan.window.start,
            "summary": plan.summary,
            "cut_sections": list(plan.cut_sections),
        }
        session.compacted = DoneCompaction(
            digest,
            summary_digest,
            session.generation,
            summarized,
            plan.window.start,
            {**reply, "messages": plan.messages[:2]},
        )
        if on_compacted is not None:
            on_compacted(reply)
        return reply

    # -- status ---------------------------------------------------------------------------
    def feature_status(self) -> dict[str, Any]:
        model = self.host.model
        return {
            FEATURE: {
                "enabled": model.configured,
                "reason": None if model.configured else model.reason,
                "compact": True,
            }
        }

    def status_extra(self) -> dict[str, int]:
        return {
            "sessions": len(self._sessions),
            "session_updates_running": sum(1 for s in self._sessions.values() if s.busy),
        }


def _read_summary(path: Path) -> tuple[str, bytes]:
    """The summary text, of an oversized file only the head, cut at a line boundary (at a
    character boundary when its head holds no newline); and a digest of it (hashed here, off
    the event loop)."""
    raw = fsutil.read_regular_file(path, MAX_SUMMARY_READ_BYTES)
    if len(raw) > MAX_SUMMARY_READ_BYTES:
        line_end = raw.rfind(b"\n", 0, MAX_SUMMARY_READ_BYTES)
        # Notes of one long line were cut to nothing and answered "empty_summary".
        raw = raw[: line_end + 1] if line_end >= 0 else _utf8_head(raw, MAX_SUMMARY_READ_BYTES)
    return raw.decode("utf-8"), hashlib.sha256(raw).digest()


def _utf8_head(raw: bytes, limit: int) -> bytes:
    """`raw` cut to at most `limit` bytes, not inside a UTF-8 character (bytes that are not
    UTF-8 stay as they are, for the decode to refuse)."""
    end = limit
    # A continuation byte (0b10xxxxxx) at the cut: back up to its character's first byte.
    while end > max(0, limit - 3) and raw[end] & 0xC0 == 0x80:
        end -= 1
    return raw[:end]


def _replace_if_same(path: Path, expected: str, text: str) -> bool:
    """Replace the summary with `text` unless it no longer holds `expected` (False then),
    also when it is saved while the new text is staged: the rename goes ahead only if the
    file is still the one compared (an editor's save in that window was overwritten)."""
    before = fsutil.save_stamp(path)
    try:
        now = fsutil.read_regular_file(path, MAX_SUMMARY_READ_BYTES)
    except FileNotFoundError:
        # Removed meanwhile: the removal stands as an edit would (written back, notes the
        # user deleted, a secret in them perhaps, came back with the agent's changes).
        return False
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return False  # a link put in its place meanwhile: the user's change, it stands
        raise
    if now != expected.encode("utf-8"):
        return False
    try:
        fsutil.atomic_write_bytes(
            path, text.encode("utf-8"), still=lambda: fsutil.save_stamp(path) == before
        )
    except fsutil.ChangedMeanwhile:
        return False
    return True


def covered_messages(record: state.SessionRecord, messages: Sequence[Any]) -> int | None:
    """How many leading `messages` the notes cover, as far as is known (None: no count).

    The record's count is of the transcript it was taken in. Shorter than it, or without
    memoryd's compaction head when the count was taken in the compacted list, the transcript
    is another one (the client compacted on its own): none of it is known to be covered."""
    covered = record.summarized_messages
    if covered is None:
        return None
    if len(messages) < covered or (
        record.summarized_in_compacted and compaction.compacted_head(messages) == 0
    ):
        return 0
    return covered


def _kept_their_change(path: Path) -> str:
    """`last_error` for notes changed by hand during an update, which keeps the change."""
    if not path.exists():
        return "the notes were removed during the update; left removed"
    return "the notes were edited during the update; kept the edit"


def _trim_notes(path: Path, text: str) -> str | None:
    """Cut each section of the notes at `path` (which hold `text`) as compact cuts them, after
    copying them whole to `summary.full.md` (or `summary.full (2).md` …), which the cut notes
    name; the cut text, or None when the notes were edited meanwhile (nothing cut then)."""
    aside = _unused_name(path.with_name("summary.full.md"))
    # Cut with room for the note each cut adds, so that compact does not cut them again.
    trimmed = compaction.cut_long_sections(
        text,
        str(aside),
        compaction.MAX_SECTION_TOKENS - NOTE_ROOM_TOKENS,
        compaction.MAX_SUMMARY_TOKENS - NOTE_ROOM_TOKENS,
    ).text
    if not fsutil.create_exclusive(aside, text):
        raise FileExistsError(errno.EEXIST, "a file appeared in its place", str(aside))
    if not _replace_if_same(path, text, trimmed):
        aside.unlink()  # the edit stands, whole: no second copy of it
        return None
    log.warning(
        "session notes over the bound: each section cut, the whole notes kept",
        path=str(path),
        whole=str(aside),
    )
    return trimmed


def _unused_name(path: Path) -> Path:
    candidate, number = path, 1
    while candidate.exists() or candidate.is_symlink():
        number += 1
        candidate = path.with_name(f"{path.stem} ({number}){path.suffix}")
    return candidate


# How many of the headings a write would take out its refusal names, and how much of each.
SHOWN_HEADINGS, SHOWN_HEADING_CHARS = 3, 80


def _keeping_headings(template: str, notes: str, screen: WriteScreen) -> WriteScreen:
    """`screen`, behind a refusal of any write of the draft that takes out a section heading
    of the template the notes have (`template.lost_headings`). Before, a draft the agent
    rewrote as one paragraph replaced the notes, and every later update and compaction had
    no sections left to keep or cut. Refused at the write, the agent is told which heading
    and can write again within its turns."""

    def keep(path: Path, op: WriteOp) -> str | None:
        lost = lost_headings(template, notes, op.text)
        if lost:
            shown = ", ".join(
                repr(h[:SHOWN_HEADING_CHARS] + ("…" if len(h) > SHOWN_HEADING_CHARS else ""))
                for h in lost[:SHOWN_HEADINGS]
            )
            more = f" and {len(lost) - SHOWN_HEADINGS} more" if len(lost) > SHOWN_HEADINGS else ""
            # A heading line still there is inside a code block left open above it: told only
            # "keep every heading", the agent saw its headings kept and wrote the same again.
            written = {line.strip() for line in op.text.splitlines()}
            fenced = (
                "; a code block opened above it (``` or ~~~) is never closed, which takes in "
                "every line below: close it"
                if any(h in written for h in lost)
                else ""
            )
            raise Denied(
                f"not written: this would take the section heading(s) {shown}{more} out of "
                f"the notes; keep every heading line and the italic line under it as they "
                f"are, and write beneath them{fenced}"
            )
        return screen(path, op)

    return keep


def _agent_tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """The main conversation's tools (prompt-cache reuse) when they include Edit, else None
    (the daemon's own definitions): the agent cannot do its job without Edit."""
    if tools and any(isinstance(t, Mapping) and t.get("name") == "Edit" for t in tools):
        return tools
    return None


def _private_dirs(base: Path, leaf: Path) -> None:
    """Create `leaf` and its missing parents below `base`, each 0700 (existing ones untouched
    except the session's own dirs, which are tightened)."""
    fsutil.make_private_dirs(base)
    relative = leaf.relative_to(base)
    current = base
    for index, part in enumerate(relative.parts):
        current = current / part
        if index == 0:
            fsutil.make_private_dirs(current)  # projects/<key>: shared with auto memory
        else:
            fsutil.ensure_private_dir(current)
