"""Auto dream: a background consolidation of one project's memory dir.

It merges duplicate memories, retires memories that newer ones contradict, and brings the
index in step with the files. It runs when `autoDreamEnabled` is on (off by default), at most
once a day per memory dir, once the dir has been idle (no `after_turn` of a worktree that uses
it) for `MEMORYD_DREAM_IDLE_S` seconds (default 600) — or at once on `memory.dream {cwd}`.
Every overwrite and every retirement keeps the old content in history (`AutoMemory.snapshot`,
`delete_memory`); the last run time per memory dir is persisted in memoryd's state dir.

Timers, runs in progress, last runs and failures are all kept per memory dir, not per project
root: a worktree whose own settings name another `autoMemoryDirectory` has a dir of its own,
and kept per root, turns alternating between two such worktrees re-armed one timer (only the
last one's dir was consolidated) and one's dream made the other's not due for a day.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from memoryd import jsonread, paths
from memoryd.agent.policy import Denied
from memoryd.agent.seen import SeenFiles
from memoryd.automem import naming
from memoryd.automem.agent_guards import keep_version, memory_screen_for, memory_writer_policy
from memoryd.automem.dirs import default_dir
from memoryd.automem.extraction import Extraction
from memoryd.automem.manifest import MemoryHeader, format_manifest
from memoryd.automem.service import AutoMemory
from memoryd.automem.taxonomy import NEVER_SAVE, describe_types
from memoryd.automem.writes import ProtectedMemory
from memoryd.core.turn import Turn
from memoryd.errors import MemorydError, NotFound
from memoryd.fsutil import atomic_write_text, save_stamp
from memoryd.llm.prompt_cache import cached_prompt

if TYPE_CHECKING:
    from memoryd.core.host import Host
    from memoryd.core.project import Project

log = structlog.get_logger("memoryd.dream")

WORKER = "dream"
DAY_S = 24 * 3600
DEFAULT_IDLE_S = 600.0
# A run that failed (the model refused, an API error) is not the day's, and the idle dream
# tries again, but no sooner than this after it: it ran again at every idle wait, a full
# prompt each time for as long as the model refused.
RETRY_AFTER_S = 3600.0
MAX_TURNS = 8
MAX_TOKENS = 8192
# Memories listed in the prompt (the newest): 10,000 one-line entries are ~400,000 tokens, past
# any model's context, and every dream of such a dir failed with HTTP 400. The agent can Grep
# and Glob the dir for the rest.
MANIFEST_LIMIT = 1_000
# And at most this many characters of them (~50,000 tokens): a line may hold a 1,000-character
# description, and 1,000 such lines were ~1,000,000 characters, again past the context.
MANIFEST_BUDGET_CHARS = 200_000

SYSTEM_PROMPT = """\
You are the memory consolidation agent of a coding assistant. While the user is away you tidy
one project's auto memory directory so future sessions get a small, true, non-redundant set of
memories. You never talk to the user.
"""

_INSTRUCTION = """\
Consolidate the auto memory directory `{memory_dir}`.

## The memories (file [type] (last modified) name: description)
{manifest}

## What to do
1. Read the memories that look related (several Read calls in one turn).
   Read a file before you Edit, Write or retire it; one that changed since you read it must
   be read again (the user may save memories while you work).
2. Merge duplicates: keep the better file, fold the other's facts into it with Edit, then
   retire the other with RetireMemory.
3. Contradictions: when a newer memory contradicts an older one, the newer one wins; correct
   or retire the older one.
4. Retire memories that should never have been saved:
{never}
5. Keep every file's frontmatter (name, description, type) valid; types are a closed set:
{types}
6. Leave `MEMORY.md` consistent: one line per memory, `- [Title](file.md) — one-line hook`.
   (Lines for retired files are removed for you.)

Change only what needs changing; when the directory is already tidy, change nothing. You have
at most {max_turns} turns. Finish with one line summarising what you merged, retired or fixed.
"""

RETIRE_TOOL = {
    "name": "RetireMemory",
    "description": (
        "Retire (delete) one memory file in the memory directory; its content is kept in "
        "history and its index line is removed."
    ),
    "input_schema": {
        "type": "object",
        "properties": {"file_path": {"type": "string"}, "reason": {"type": "string"}},
        "required": ["file_path", "reason"],
        "additionalProperties": False,
    },
}


def idle_seconds() -> float:
    raw = os.environ.get("MEMORYD_DREAM_IDLE_S")
    try:
        value = float(raw) if raw else DEFAULT_IDLE_S
    except ValueError:
        value = math.nan
    # "nan" parsed as a number: the idle timer slept forever and status showed idle_s null.
    if not math.isfinite(value):
        log.warning("ignoring MEMORYD_DREAM_IDLE_S: not a number", value=raw)
        return DEFAULT_IDLE_S
    return max(value, 0.0)


def dream_state_path() -> Path:
    return paths.state_dir() / "dream.json"


def _time_table(value: Any) -> dict[str, float]:
    """dream.json's `last_run` or `failed_at` (since session 19): an entry that is no time is
    dropped alone. A NaN last run was taken, and its dir was never due again (every comparison
    with it is false); a string or null made the whole file unreadable."""
    if not isinstance(value, dict):
        return {}
    return {
        str(k): float(v)
        for k, v in value.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    }


def _read_state(path: Path) -> tuple[dict[str, float], dict[str, float]] | None:
    """dream.json's (last runs, failures), or None when there is none or it is damaged."""
    try:
        # A number past any time (400 digits, 5,000) is read as none: its entry dropped alone.
        data = jsonread.loads(path.read_text(encoding="utf-8"), long_ints="none")
        given = data.get("last_run", {})
        last = _time_table(given)
        if not isinstance(given, dict) or len(last) < len(given):
            # Their dirs' dreams become due again: say why.
            ignored = sorted(set(given) - set(last)) if isinstance(given, dict) else [given]
            log.warning(
                "dream state: last runs that are no time ignored",
                path=str(path),
                ignored=[str(i)[:200] for i in ignored[:20]],
            )
        return last, _time_table(data.get("failed_at"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, AttributeError, TypeError) as exc:
        # Every dir's dream becomes due again (in a daemon that had not read it): say why.
        log.warning("dream state unreadable; starting afresh", path=str(path), error=str(exc))
        return None


def _manifest(memory_dir: Path, headers: list[MemoryHeader]) -> str:
    """The newest memories, one line each, as many as MANIFEST_LIMIT and
    MANIFEST_BUDGET_CHARS allow, and a note about the rest."""
    newest: list[MemoryHeader] = []
    used = 0
    for header in sorted(headers, key=lambda h: h.mtime, reverse=True)[:MANIFEST_LIMIT]:
        used += len(format_manifest([header])) + 1
        if used > MANIFEST_BUDGET_CHARS:
            break
        newest.append(header)
    text = format_manifest(sorted(newest, key=lambda h: h.file))
    if len(headers) > len(newest):
        text += (
            f"\n({len(headers) - len(newest)} older memories are not listed; Grep or Glob "
            f"`{memory_dir}` to find those related to the ones above.)"
        )
    return text


class Dream:
    def __init__(
        self,
        host: Host,
        automem: AutoMemory,
        extraction: Extraction,
    ) -> None:
        self.host = host
        self.automem = automem
        self.extraction = extraction  # shares its run lock: one writing agent per dir
        self.idle_s = idle_seconds()
        self.interval_s = float(DAY_S)
        self._timers: dict[Path, asyncio.Task[Any]] = {}  # per memory dir
        # Per memory dir, and per project root for the root's default dir, as a daemon before
        # session 21 wrote and reads it (`_times`, `_record_run`).
        self._last_runs: dict[str, float] | None = None
        self.counts = {"runs": 0, "idle_runs": 0, "on_demand_runs": 0, "retired": 0, "edited": 0}
        self.last: dict[str, Any] | None = None
        # Memory dirs whose dream runs now: `armed` dropped to 0 when an idle dream started,
        # and status had no word for a dream in progress (nor for one `memctl dream` ran).
        self._running: set[Path] = set()
        # Per memory dir, its last failed run's start; kept in dream.json with the last runs:
        # in memory only, every daemon (`memctl restart`, a crash, an --idle-timeout exit and
        # the next start) ran the refused dream again at its first idle wait.
        self._failed_at: dict[str, float] = {}
        self._state_stamp: tuple[int, ...] | None = None  # dream.json as last read or written

    # -- persisted last-run times ------------------------------------------------------------
    def last_runs(self) -> dict[str, float]:
        """The last run per memory dir, from dream.json: read again whenever the file changed
        since this daemon read or wrote it. A second daemon of the user (another socket)
        writes it too: read once, each daemon ran the dreams the other had run that day, and
        each save dropped the other's runs."""
        path = dream_state_path()
        stamp = save_stamp(path)
        if self._last_runs is not None and stamp == self._state_stamp:
            return self._last_runs
        self._state_stamp = stamp
        read = _read_state(path)
        if self._last_runs is None:
            self._last_runs, self._failed_at = read if read is not None else ({}, {})
        elif read is not None:  # another daemon's save: the later time of each wins
            for mine, theirs in ((self._last_runs, read[0]), (self._failed_at, read[1])):
                for key, at in theirs.items():
                    if at > mine.get(key, -math.inf):
                        mine[key] = at
        # A failure before the dir's last run is over (the run after it went well).
        self._failed_at = {
            key: at
            for key, at in self._failed_at.items()
            if at > self._last_runs.get(key, -math.inf)
        }
        return self._last_runs

    @staticmethod
    def _legacy_key(project: Project, memory_dir: Path, table: dict[str, float]) -> str | None:
        """The key of `project`'s root when `table` holds it and `memory_dir` is the root's
        default dir: what a daemon before session 21 recorded for that dir."""
        root = str(project.root)
        if root in table and memory_dir == default_dir(project):
            return root
        return None

    def _times(self, table: dict[str, float], project: Project, memory_dir: Path) -> float | None:
        """`memory_dir`'s time in `table`: its own entry or its root's older one, the later."""
        keys = [str(memory_dir), self._legacy_key(project, memory_dir, table)]
        return max((table[key] for key in keys if key in table), default=None)

    def _record_run(self, project: Project, memory_dir: Path, at: float) -> None:
        last_runs = self.last_runs()
        keys = [str(memory_dir)]
        if memory_dir == default_dir(project):
            # Under the root too, where a daemon before session 21 (one the user went back
            # to) looks: the root's entry taken out, it found no run and dreamt the dir again.
            keys.append(str(project.root))
        for key in keys:
            last_runs[key] = at
            self._failed_at.pop(key, None)
        self._save_state()

    def _record_failure(self, project: Project, memory_dir: Path, at: float) -> None:
        self.last_runs()  # read first: the file's failures are not lost to this one
        self._failed_at[str(memory_dir)] = at
        self._save_state()

    def _save_state(self) -> None:
        # An older daemon reads `last_run` only (and drops `failed_at` when it saves).
        state = {"last_run": self.last_runs(), "failed_at": self._failed_at}
        path = dream_state_path()
        try:
            atomic_write_text(path, json.dumps(state, indent=2, sort_keys=True))
            self._state_stamp = save_stamp(path)  # our own save is not read back
        except OSError as exc:
            # The run is done and counts in this daemon (`runs` holds it); with a full disk
            # the finished dream's answer was -32603, and what it edited and retired untold.
            log.warning("dream last run not saved", path=str(path), error=str(exc))

    def due(
        self, project: Project, now: float | None = None, *, memory_dir: Path | None = None
    ) -> bool:
        """Whether the dream of `memory_dir` (by default `project`'s) is due."""
        if memory_dir is None:
            memory_dir = self.automem.memory_dir(project)
        last = self._times(self.last_runs(), project, memory_dir)
        now = now or time.time()
        failed = self._times(self._failed_at, project, memory_dir)
        if failed is not None and 0 <= now - failed < RETRY_AFTER_S:
            return False
        # A time ahead of now was recorded by a clock that ran ahead (a restored VM, a dead
        # RTC battery): waited for, it held the project's dream off until the clock caught up.
        return last is None or last > now or now - last >= self.interval_s

    def enabled(self, project: Project) -> bool:
        # Asked on every turn: the settings are read again only when a settings file changed.
        return bool(self.automem.settings.get(project.settings_root).get("autoDreamEnabled"))

    # -- the idle trigger --------------------------------------------------------------------
    def on_turn(self, turn: Turn) -> None:
        """Every turn re-arms the project's idle timer (when auto dream is on and due)."""
        self.rearm(turn.project)

    def rearm(self, project: Project) -> None:
        """Activity in the project (a turn, or one tool call of a long turn: `after_tool`)
        starts the idle wait of the memory dir it uses again. Re-armed by turns alone, a turn
        working longer than the idle wait got a consolidation while the agent was busy."""
        if not self.host.model.configured:
            return  # none is ever armed
        # The dir before anything else is asked: a wait armed for it is let go either way.
        memory_dir = self._dir_of(project) if self.enabled(project) else None
        armed_for = memory_dir or self.automem.dirs.chosen(project)
        timer = self._timers.pop(armed_for, None) if armed_for is not None else None
        if timer is not None:
            timer.cancel()
        # Auto dream off, auto memory off, or a dir where memory must never be: nothing to
        # consolidate (every idle run failed).
        if memory_dir is None or not self.due(project, memory_dir=memory_dir):
            return
        self._timers[memory_dir] = self.host.spawn(
            self._when_idle(project, memory_dir), worker=WORKER
        )

    def _dir_of(self, project: Project) -> Path | None:
        if not self.automem.enabled(project):
            return None
        try:
            return self.automem.memory_dir(project)
        except MemorydError:
            return None

    def _wanted(self, project: Project, memory_dir: Path) -> bool:
        """Whether the idle dream of `memory_dir` should run for `project` (the worktree whose
        activity armed it): still its dir, auto dream on there, and the dir's dream due."""
        return (
            self._dir_of(project) == memory_dir
            and self.enabled(project)
            and self.due(project, memory_dir=memory_dir)
        )

    async def _when_idle(self, project: Project, memory_dir: Path) -> None:
        await asyncio.sleep(self.idle_s)
        self._timers.pop(memory_dir, None)
        if not self._wanted(project, memory_dir):
            return
        async with self.extraction.run_lock(memory_dir):
            # Asked again once the lock is ours: a dream run on demand while this waited for
            # it has made the day's, and the dir was consolidated twice in a row.
            if self._wanted(project, memory_dir):
                await self._run_locked(project, memory_dir, "idle")

    def start(self, project: Project) -> None:
        """`run` in the background (supervised, under the dream worker's name).

        What `run` would refuse at once (no model, auto memory off, a memory dir where memory
        must never be) is raised here, to the caller: `memory.dream wait=false` answered
        "started" and the dream failed in the background, seen only in `worker_errors`."""
        self.host.model.require()
        self.automem.memory_dir(project)
        self.host.spawn(self.run(project), worker=WORKER)

    # -- one run -----------------------------------------------------------------------------
    async def run(self, project: Project, *, trigger: str = "on_demand") -> dict[str, Any]:
        """Consolidate `project`'s memory dir now.

        It shares extraction's run lock: one writing agent at a time per memory dir.
        """
        self.host.model.require()
        am = self.automem
        memory_dir = am.memory_dir(project)
        async with self.extraction.run_lock(memory_dir):
            return await self._run_locked(project, memory_dir, trigger)

    async def _run_locked(self, project: Project, memory_dir: Path, trigger: str) -> dict[str, Any]:
        self._running.add(memory_dir)
        started = time.time()
        try:
            summary = await self._consolidate(project, memory_dir, trigger)
        except Exception:
            self._record_failure(project, memory_dir, started)
            raise
        finally:
            self._running.discard(memory_dir)
        if summary["stop_reason"] == "error":
            self._record_failure(project, memory_dir, started)
        return summary

    async def _consolidate(
        self, project: Project, memory_dir: Path, trigger: str
    ) -> dict[str, Any]:
        am = self.automem
        # Team memories are the team's: dream neither edits nor retires them (a retired one
        # came back with the next pull, and an edit went to every teammate).
        headers = [h for h in am.manifest(project) if not h.team]
        started = time.time()
        summary: dict[str, Any] = {
            "project": str(project.root),
            "memory_dir": str(memory_dir),
            "trigger": trigger,
            "memories": len(headers),
            "edited": [],
            "retired": [],
            "stop_reason": None,
            "turns": 0,
            "summary": "",
        }
        if len(headers) < 2:
            summary["stop_reason"] = "nothing_to_do"
            self._record_run(project, memory_dir, started)
            self.last = summary
            return summary
        policy = memory_writer_policy(memory_dir, team=False)
        seen = SeenFiles()  # a write or retirement needs a fresh Read (`agent.seen`)
        edited: list[str] = summary["edited"]
        retired: list[str] = summary["retired"]
        extraction = self.extraction

        async def on_write(path: Path) -> None:
            extraction.note_own_write(path)
            # An index (in any folder: never read as a memory) is no memory edited.
            if not naming.is_index_name(path.name) and str(path) not in edited:
                edited.append(str(path))

        async def retire(tool_input: dict[str, Any]) -> str:
            raw = tool_input.get("file_path")
            if not isinstance(raw, str):
                raise Denied("file_path must be a string")
            target = policy.check_write(raw)
            from memoryd.agent.tools import ToolError  # loaded with the loop, when a dream runs

            def unchanged() -> None:
                # Under the writer lock: a memory updated since the agent read it is not
                # retired on what it said before (the update would be gone). Named as the
                # model gave it: through a linked memory dir, not by its real path.
                problem = seen.problem(target, shown=policy.as_given(target))
                if problem is not None:
                    raise ToolError(problem)

            try:
                deleted = await am.delete_memory(
                    project, str(policy.as_given(target)), check=unchanged
                )
            except (NotFound, ProtectedMemory) as exc:
                raise ToolError(exc.message) from exc
            except MemorydError as exc:
                raise Denied(exc.message) from exc
            seen.note(target, None)
            retired.append(str(deleted))
            log.info("memory retired", path=str(deleted), reason=tool_input.get("reason"))
            return f"retired {deleted} (kept in history)"

        text = _INSTRUCTION.format(
            memory_dir=memory_dir,
            manifest=_manifest(memory_dir, headers),
            never="\n".join(f"   - {item}" for item in NEVER_SAVE),
            types="\n".join(f"   {line}" for line in describe_types().splitlines()),
            max_turns=MAX_TURNS,
        )
        from memoryd.agent.loop import ExtraTool, run_agent  # loaded when a dream runs

        try:
            result = await run_agent(
                self.host,
                feature=WORKER,
                policy=policy,
                system=SYSTEM_PROMPT,
                messages=[{"role": "user", "content": cached_prompt(text)}],
                max_turns=MAX_TURNS,
                max_tokens=MAX_TOKENS,
                before_write=keep_version(am),
                on_write=on_write,
                write_lock=am.writer_lock(memory_dir),
                extra_tools={"RetireMemory": ExtraTool(RETIRE_TOOL, retire)},
                screen_write=memory_screen_for(am, project),
                seen=seen,
            )
        finally:
            # Even when the run was stopped; a file it retired after editing is not announced.
            kept = [Path(raw) for raw in edited if raw not in retired]
            # Why the index could not be rebuilt (its lines over its cap), or None: it raised
            # out of the run once, and the answer lost what the run had edited and retired.
            index_error = await self.extraction.settle(project, memory_dir, kept, always=True)
        summary.update(
            stop_reason=result.stop_reason,
            turns=result.turns,
            summary=result.final_text[:500],
            denied=result.denied,
            error=result.error,
            usage=result.usage,
        )
        if index_error is not None:
            # A failed run (retried after RETRY_AFTER_S), told with what it edited and retired.
            summary.update(stop_reason="error", error=index_error)
        self.counts["runs"] += 1
        self.counts["idle_runs" if trigger == "idle" else "on_demand_runs"] += 1
        self.counts["retired"] += len(retired)
        self.counts["edited"] += len(edited)
        if summary["stop_reason"] != "error":
            self._record_run(project, memory_dir, started)
        self.last = summary
        return summary

    # -- status ------------------------------------------------------------------------------
    def feature_status(self) -> dict[str, Any]:
        return {
            "auto_dream": {
                "available": self.host.model.configured,
                "reason": self.host.model.reason,
                "idle_s": self.idle_s,
                "armed": len(self._timers),
                "running": len(self._running),
                **self.counts,
                "last_run": self.last,
            }
        }

    async def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
