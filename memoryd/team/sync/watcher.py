"""When a team folder syncs: the first pull, the watcher, the debounce, backoff, shutdown.

    start():  pull (before the watcher, so its writes trigger nothing) → watch → push pending
    change in team/  → (re)arm the debounce timer → push when it fires
    events lost      → (the OS queue overflowed) as a deletion: anything may have changed
    deletion in team/ → also lifts a permanent-failure suppression (SPEC.md)
    retryable failure → one retry after exponential backoff with jitter, or after the server's
                        Retry-After when longer (capped like the backoff); triggers meanwhile
                        only mark the folder dirty (no request until the retry)
    permanent failure → suppressed: no request at all until a deletion or a restart
    stopping(): the daemon was asked to stop: requests in flight or to come end within the
              budget (Tuning.shutdown_push_timeout_s), while the daemon still drains its own
    close():  cancel the timers, close the watcher, await the push in flight, push what is pending
              — all within one budget; a push still in flight then is cancelled, what it did
              not send stays pending for the next start, and so it does when a request was
              cut short: the server stalled, and a final push would only wait out the budget

So a failing server sees at most one request per trigger, never a loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

from memoryd import fswatch
from memoryd.fsutil import ensure_private_dir
from memoryd.team.sync import delta
from memoryd.team.sync.client import Permanent, Retryable, Stopping, TeamHTTPError
from memoryd.team.sync.engine import SyncEngine, SyncSuppressed
from memoryd.team.sync.localfs import is_ignored

log = structlog.get_logger("memoryd.team")

ReportError = Callable[[str, str], Awaitable[None]]

# The watch limit met (ENOSPC): the first new try after 5 s, then doubling up to a minute.
WATCH_LIMIT_RETRY_S = 5.0
WATCH_LIMIT_RETRY_CAP_S = 60.0


@dataclass(frozen=True)
class Tuning:
    debounce_s: float = 2.0
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 300.0
    # The whole of a folder's shutdown: the push in flight, then the push of what is pending.
    # Counted from the stop request too: the daemon drains its requests (up to 30 s) before
    # it closes services, and one waiting on a stalled server held that drain.
    shutdown_push_timeout_s: float = 5.0
    watch_step_ms: int = 50


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


async def _finished(task: asyncio.Task[None], deadline: float) -> bool:
    """Wait for `task` until `deadline`; cancel it then. True when it finished by itself."""
    if not task.done():
        await asyncio.wait({task}, timeout=_left(deadline))
    if task.done():
        return True
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    return False


class SyncRunner:
    def __init__(
        self,
        engine: SyncEngine,
        *,
        tuning: Tuning,
        report_error: ReportError,
        rng: random.Random | None = None,
    ) -> None:
        self.engine = engine
        self.tuning = tuning
        self._report_error = report_error
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not a secret
        self._stop = asyncio.Event()
        self._watch_task: asyncio.Task[None] | None = None
        self._timer: asyncio.Task[None] | None = None
        self._retry: asyncio.Task[None] | None = None
        self._push_task: asyncio.Task[None] | None = None
        self._dirty = False
        self._closing = False
        self.failures = 0  # consecutive retryable failures
        self.started = asyncio.Event()
        self.triggers = 0
        self._last_pull = float("-inf")
        self._server_wait_until = float("-inf")  # a Retry-After's end (monotonic)
        self._refresh_task: asyncio.Task[bool] | None = None
        # Awaited before each pull (TeamSync: is the folder's repository known yet?). True:
        # the folder is handed to another runner, and this one sends nothing more. A
        # TeamHTTPError from it fails the pull (a Retryable is retried, and asked again).
        self.before_pull: Callable[[], Awaitable[bool]] | None = None
        self._asking = False  # before_pull under way: a pull is, so the folder is not idle
        # Batches of relevant changes the watcher handed over, and whether it holds more:
        # together they tell `team.status` the folder is as its last scan found it.
        self.changes_seen = 0
        self._backlog = fswatch.Backlog()
        engine.unchanged_since = self.unchanged_token

    @property
    def team_dir(self) -> Path:
        return self.engine.folder.team_dir

    @property
    def idle(self) -> bool:
        """Nothing waits to be sent or is being sent: no debounce, retry, push or pull."""
        return (
            self._timer is None
            and self._retry is None
            and (self._push_task is None or self._push_task.done())
            and (self._refresh_task is None or self._refresh_task.done())
            and not self._asking
            and not self._dirty
            and not self.engine.busy
            and not self.engine.state.pending
        )

    def unchanged_token(self) -> tuple[int, int] | None:
        """A token equal to an earlier one only if nothing in the folder changed between the
        two calls (as inotify sees it: within the very call that made a change); None while
        that cannot be said (no watch in place, or changes not yet handed over)."""
        if not self._backlog.clear():
            return None
        return (self._backlog.epoch, self.changes_seen)

    # -- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        """The first pull, then the watcher, then a push of what changed while we were away."""
        if self.engine.client is None:  # no_repo / no_oauth: nothing to talk to, ever
            self.started.set()
            return
        await self._pull()
        if self._closing:
            return
        ensure_private_dir(self.team_dir)
        ready = asyncio.Event()
        watching = asyncio.create_task(self._watch(ready), name=f"team-watch:{self.engine.repo}")
        self._watch_task = watching
        # The push below compares every file: only once the watch is in place (set up in a
        # thread), or an edit between the push's scan and the watch went unseen.
        waiting = asyncio.ensure_future(ready.wait())
        try:
            await asyncio.wait({watching, waiting}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
        self.started.set()
        if self._retry is None:
            self._push_now()

    def stopping(self) -> None:
        """The daemon was asked to stop and drains its requests before it closes services:
        every request of this folder, in flight (the watcher's push, a `team.push` a client
        awaits, one waiting on the other daemon's state lock) or to come, ends within the
        shutdown budget. Unbounded, one stuck on a stalled
        server held the drain for its 30 s, then `close` waited its budget again."""
        if self.engine.client is not None:
            when = asyncio.get_running_loop().time() + self.tuning.shutdown_push_timeout_s
            self.engine.client.stop_by(when)

    async def close(self, *, final_push: bool = True) -> None:
        """Stop, and push what is pending — all of it within `shutdown_push_timeout_s`, the
        one budget of the folder's shutdown. A push still in flight at the budget (a server
        dripping its reply) is cancelled: what it had not sent stays pending in the folder
        and the state, pushed by the next start. Unbounded, it held the daemon's exit past
        systemd's stop timeout. Without `final_push` (the folder now syncs with another
        repository) what is pending is left to the runner that replaces this one."""
        self._closing = True
        deadline = time.monotonic() + self.tuning.shutdown_push_timeout_s
        for task in (self._timer, self._retry, self._refresh_task):
            if task is not None:
                task.cancel()
        self._stop.set()
        if self._watch_task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._watch_task, timeout=min(5.0, _left(deadline)))
        if self._push_task is not None and not await _finished(self._push_task, deadline):
            log.warning(
                "team push in flight cancelled at shutdown; what it did not send stays pending",
                repo=self.engine.repo,
                budget_s=self.tuning.shutdown_push_timeout_s,
            )
            return
        client = self.engine.client
        if not final_push or client is None or self.engine.state.suppressed is not None:
            return
        if client.cut_short:
            # A request was ended by the shutdown deadline: the server stalled, and one more
            # push would wait out the budget again. The next start pushes what is pending.
            log.warning(
                "team push at shutdown skipped: the server did not answer in time; what is "
                "pending stays pending",
                repo=self.engine.repo,
            )
            return
        if self._retry is not None and time.monotonic() < self._server_wait_until:
            # The server said "not before then": a push now would be one more 429. What is
            # pending stays in the folder, pushed by the next start.
            log.info(
                "team push at shutdown skipped: the server asked to wait", repo=self.engine.repo
            )
            return
        # The final push has this close's budget, whatever the drain before it took.
        client.stop_by(asyncio.get_running_loop().time() + _left(deadline))
        try:
            await asyncio.wait_for(self.engine.push(), _left(deadline))
        except (TeamHTTPError, SyncSuppressed, TimeoutError) as exc:
            log.warning("team push at shutdown failed", repo=self.engine.repo, error=str(exc))

    async def wait_idle(self) -> None:
        """Until no push is in flight (a push that follows up on itself included)."""
        while self._push_task is not None and not self._push_task.done():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.shield(self._push_task)

    # -- triggers -------------------------------------------------------------------------
    def trigger(self, *, deletion: bool = False) -> None:
        """A change in team/: (re)arm the debounce timer."""
        if self._closing:
            return
        self.triggers += 1
        if deletion and self.engine.lift_suppression():
            log.info("team push suppression lifted by a deletion", repo=self.engine.repo)
            if self._retry is not None:
                self._retry.cancel()
                self._retry = None
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.create_task(self._debounced())

    async def _debounced(self) -> None:
        await asyncio.sleep(self.tuning.debounce_s)
        self._timer = None
        self._push_now()

    def _push_now(self) -> None:
        if self._closing:
            return
        if self._retry is not None or (self._push_task is not None and not self._push_task.done()):
            self._dirty = True  # the retry / the push in flight picks it up
            return
        self._push_task = asyncio.create_task(self._push())

    async def _push(self) -> None:
        self._dirty = False
        # The folder's repository is not known yet (a push would fail at once, sending
        # nothing): ask, and pull, first. A push's retry never asked again, so a folder
        # whose question was refused, then lifted by a deletion, retried pushes for ever.
        unsettled = self.engine.unsettled is not None and self.before_pull is not None
        if unsettled and (self.engine.state.suppressed is not None or not await self._pull()):
            return
        try:
            report = await self.engine.push()
        except SyncSuppressed:
            return  # suppressed: no request, nothing to retry
        except TeamHTTPError as exc:
            await self._failed("push", exc)
            return
        except Exception as exc:
            await self._report_error("team.push", f"{type(exc).__name__}: {exc}")
            return
        self.failures = 0
        if report.pull_needed and not self._closing and not await self._pull():
            return
        if self._dirty and not self._closing:
            self._push_task = asyncio.create_task(self._push())

    async def _failed(self, op: str, exc: TeamHTTPError) -> None:
        if isinstance(exc, Stopping):
            # The daemon is stopping: no retry, no worker/error; close() says what stays.
            log.info("team request ended by the shutdown", op=op, repo=self.engine.repo)
            return
        if isinstance(exc, Permanent):
            await self._report_error(f"team.{op}", f"{exc}; pushing is suppressed")
            return
        self.failures += 1
        if self.failures == 1:  # loud once per streak, not at every backoff step
            await self._report_error(f"team.{op}", str(exc))
        wait = delta.backoff_delay(
            self.failures,
            base=self.tuning.backoff_base_s,
            cap=self.tuning.backoff_cap_s,
            jitter=self._rng.uniform(0.5, 1.5),
        )
        if isinstance(exc, Retryable) and exc.retry_after is not None:
            # The server said when (429/503 Retry-After): not before, within the backoff cap.
            asked = min(exc.retry_after, self.tuning.backoff_cap_s)
            # Spread past it: a server refusing a burst (a full write queue) tells every
            # client the same 5 s, and waited exactly, they all came back in the same instant.
            spread = min(asked * self._rng.uniform(1.0, 1.5), self.tuning.backoff_cap_s)
            wait = max(wait, spread)
            self._server_wait_until = time.monotonic() + asked
        log.info("team sync will retry", op=op, repo=self.engine.repo, in_s=round(wait, 3))
        if not self._closing:
            if self._retry is not None:  # a push and a refresh pull both failed: one retry
                self._retry.cancel()
            self._retry = asyncio.create_task(self._retry_after(wait, op))

    async def _retry_after(self, wait: float, op: str) -> None:
        await asyncio.sleep(wait)
        self._retry = None
        if self._closing:
            return
        if op == "pull" and not await self._pull():
            return
        self._push_now()

    def refresh(self, min_interval_s: float) -> bool:
        """Pull again (a session is starting) unless one ran within `min_interval_s`, one is
        due anyway (backoff), or the folder is suppressed. True when a pull was started."""
        if (
            self._closing
            or not self.started.is_set()
            or self.engine.client is None
            or self.engine.state.suppressed is not None
            or self._retry is not None
            or (self._refresh_task is not None and not self._refresh_task.done())
            or time.monotonic() - self._last_pull < min_interval_s
        ):
            return False
        self._refresh_task = asyncio.create_task(self._pull())
        return True

    async def _pull(self) -> bool:
        """One pull; failures handled (backoff or suppression). True when it succeeded."""
        self._last_pull = time.monotonic()
        try:
            if self.before_pull is not None:
                self._asking = True
                try:
                    handed_over = await self.before_pull()
                finally:
                    self._asking = False
                # Handed over (its retirement closes it), or closed while it asked (shed as
                # idle): nothing more from this runner, no pull into a folder another may own.
                if handed_over or self._closing:
                    self._closing = True
                    return False
            report = await self.engine.pull()
        except SyncSuppressed:
            return False
        except TeamHTTPError as exc:
            await self._failed("pull", exc)
            return False
        except Exception as exc:
            await self._report_error("team.pull", f"{type(exc).__name__}: {exc}")
            return False
        if report.limits_forgotten and self.started.is_set():
            self._push_now()  # what a learned limit withheld may fit now (start pushes anyway)
        return True

    # -- the watcher ----------------------------------------------------------------------
    async def _watch(self, ready: asyncio.Event | None = None) -> None:
        """Watch the folder for good; `ready` is set once the first watch is in place, or
        has failed (start() then pushes)."""
        ready = ready or asyncio.Event()
        failures = 0
        missing = False  # no folder to watch: a symlink whose folder was removed
        limited = False  # the user's inotify watch limit met: more folders than it allows
        while not self._stop.is_set():
            if missing and self.team_dir.is_dir():
                missing = False
                self.trigger(deletion=False)  # what was written before its watch was set up
            watch = fswatch.watch(
                self.team_dir,
                stop=self._stop,
                recursive=True,
                debounce_ms=self.tuning.watch_step_ms,
                step_ms=self.tuning.watch_step_ms,
                ready=ready,
                backlog=self._backlog,
            )
            try:
                # Closed at the break, not when collected: till then its backlog would still
                # vouch for a folder the old watch no longer sees (`unchanged_token`).
                async with contextlib.aclosing(watch):
                    async for changes in watch:
                        self._on_changes(changes)
                        if self._folder_gone(changes):
                            break  # the OS watch died with the folder: set up a new one
                failures = 0
            except Exception as exc:  # the watch must outlive any error of its own
                ready.set()  # start() pushes now: this watcher pushes again once it is up
                # watchfiles raises more than OSError: an ExceptionGroup for a file name that
                # is not UTF-8 ("Unable to decode path") ended this task, and sync with it.
                failures += 1
                if not self.team_dir.is_dir():
                    # ensure_private_dir cannot make a folder where a dangling symlink is: look
                    # again, backing off, and push once it is back (left waiting on a watch of
                    # nothing, the watcher never saw it come back).
                    if not missing:
                        log.info("team folder missing; waiting for it", repo=self.engine.repo)
                    missing = True
                elif isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
                    # The user's inotify watch limit (a tree with more folders than it allows):
                    # retried at 0.2..5 s, each try took every watch the user had left (the
                    # rules watcher's and editors' failed meanwhile), warned, and pushed, for
                    # ever. Said once; tried again less often; each try still pushes (a poll).
                    if not limited:
                        log.warning(
                            "team folder not watched: the inotify watch limit is reached "
                            "(raise fs.inotify.max_user_watches); what changed is pushed at each "
                            "new try meanwhile (at least once a minute)",
                            repo=self.engine.repo,
                            error=repr(exc),
                        )
                    limited = True
                    self.trigger(deletion=False)
                else:
                    log.warning("team watcher restarting", repo=self.engine.repo, error=repr(exc))
                    self.trigger(deletion=False)  # what changed while it was down is pushed
            else:
                limited = False
            if self._stop.is_set():
                return
            if limited:
                wait = min(WATCH_LIMIT_RETRY_S * 2 ** (failures - 1), WATCH_LIMIT_RETRY_CAP_S)
            else:
                wait = min(0.1 * 2**failures, 5.0) if failures else 0.1
            with contextlib.suppress(TimeoutError):  # a stop ends the wait (close waits 5 s)
                await asyncio.wait_for(self._stop.wait(), wait)
            if self._stop.is_set():
                return
            with contextlib.suppress(OSError):
                ensure_private_dir(self.team_dir)

    def _folder_gone(self, changes: fswatch.Changes) -> bool:
        """The watch no longer covers the folder: it was deleted or renamed, or its name now
        holds another one (a symlink retargeted, a folder made where a link was)."""
        root = str(self.team_dir)
        ends = (fswatch.Change.deleted, fswatch.Change.added)
        return any(change in ends and path == root for change, path in changes) or (
            not self.team_dir.is_dir()
        )

    def _on_changes(self, changes: fswatch.Changes) -> None:
        if fswatch.LOST in changes:
            # The OS dropped events (its queue overflowed): anything may have changed, a
            # deletion among them (which lifts a suppression), and a push compares it all.
            log.info("team watcher lost events; pushing what changed", repo=self.engine.repo)
            self.changes_seen += 1
            self.trigger(deletion=True)
            return
        relevant = [(change, path) for change, path in changes if not self._ignored(path)]
        if not relevant:
            return
        self.changes_seen += 1
        deletion = any(change == fswatch.Change.deleted for change, _ in relevant)
        self.trigger(deletion=deletion)

    def _ignored(self, path: str) -> bool:
        try:
            parts = Path(path).relative_to(self.team_dir).parts
        except ValueError:  # reported under another spelling of the folder (a symlink)
            parts = (Path(path).name,)
        return any(is_ignored(part) for part in parts)
