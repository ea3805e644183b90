"""TeamSync: the daemon service that keeps each project's `team/` folder in step with the
team server, one SyncRunner per folder.

A folder starts syncing the first time its project is seen with a team server configured
(`MEMORYD_TEAM_URL`): after a turn, on a `team.*` call, or at daemon start for every folder
that synced before (its SyncState is on disk). Without a git remote the folder is permanently
`no_repo`, without a token `no_oauth`: shown in `team.status`, and never a request.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from memoryd.automem.service import AutoMemory
from memoryd.core.model_config import shown_url, usable_credential, usable_http_url
from memoryd.errors import FeatureUnavailable

# The remote URL forms gitfacts reads the slug with: the full path is read the same way.
from memoryd.gitfacts import parse_repo_slug, repo_path_parts
from memoryd.team.protocol import canonical_repo
from memoryd.team.sync.client import Permanent, Retryable, TeamClient, TeamHTTPError
from memoryd.team.sync.engine import SyncEngine, SyncSuppressed
from memoryd.team.sync.localfs import LocalFolder
from memoryd.team.sync.state import StateStore, SyncState, saved_states, state_path
from memoryd.team.sync.watcher import SyncRunner, Tuning

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

    from memoryd.core.host import Host
    from memoryd.core.project import Project
    from memoryd.core.team_config import TeamConfig

log = structlog.get_logger("memoryd.team")

NOT_CONFIGURED = (
    "team sync is not configured: set MEMORYD_TEAM_URL (the memoryd-team server) and "
    "MEMORYD_TEAM_TOKEN (from `memoryd-team token create --repo owner/repo`), then restart memoryd"
)


# Why a folder's sync is off from the start, for a reply to say in words.
SUPPRESSED_BECAUSE = {
    "no_repo": "the project has no git remote naming its owner/repo, which team memory is keyed by",
    "no_oauth": "MEMORYD_TEAM_TOKEN is not set",
    "bad_url": "MEMORYD_TEAM_URL is not an http(s) URL",
    "bad_token": "MEMORYD_TEAM_TOKEN is not a usable token",
}


# What the server's refusal of the token means, and what fixes it: 401 is a token the server
# does not know (revoked, mistyped, another server's), 403 one not bound to the repository.
REFUSED_BECAUSE = {
    "http_401": "MEMORYD_TEAM_TOKEN was not accepted (revoked, mistyped, or another server's); "
    "set a valid one (`memoryd-team token create --repo owner/repo`) and restart memoryd",
    "http_403": "MEMORYD_TEAM_TOKEN is not bound to this repository; bind it on the server "
    "(`memoryd-team token create --repo owner/repo` for this repo) and restart memoryd",
    # httpx takes the proxy from HTTPS_PROXY/HTTP_PROXY in memoryd's environment.
    "http_407": "a proxy between memoryd and the team server wants credentials; give them in "
    "the proxy setting memoryd runs with (HTTPS_PROXY=http://user:password@proxy:port) and "
    "restart memoryd",
}


def why_off(code: str, op: str | None = None) -> str:
    """What a folder's suppression code means to the user, and what lifts it: a setting fixed
    and a restart, a git remote added (picked up live), or, after the server's refusal, a
    file in team/ deleted or a restart. A deleted file never lifts the first kinds. `op`: the
    request the server refused ("pull" or "push"), when known (`refused_op`)."""
    because = SUPPRESSED_BECAUSE.get(code)
    if because is None:
        what = f"a {op}" if op in ("pull", "push") else "a request"
        refused = REFUSED_BECAUSE.get(code)
        if refused is not None:
            return (
                f"team sync is stopped ({code}): the server refused {what}: {refused} (or "
                "delete a file in team/ to try again)"
            )
        return (
            f"team sync is stopped ({code}): the server refused {what} (`team.status` says "
            "how); delete a file in team/ or restart memoryd to try again once the cause is fixed"
        )
    fix = "add one" if code == "no_repo" else "fix it and restart memoryd"
    return f"team sync is off for this folder ({code}): {because}; {fix}"


def refused_op(state: SyncState) -> str | None:
    """The request ("pull" or "push") whose failure suppressed the folder, when the state's last
    result is that failure."""
    last = state.last_result
    if state.suppressed is None or not last or last.get("ok") is not False:
        return None
    op = last.get("op")
    return op if isinstance(op, str) else None


def find_secret(content: str) -> tuple[str, str] | None:
    """The first secret finding as (rule id, description); never the secret itself."""
    from memoryd.team.secrets import first_finding

    finding = first_finding(content)
    return None if finding is None else (finding.rule_id, finding.description)


# Team folders syncing at once. Each watches its folder (an inotify instance and two threads:
# Linux allows 128 instances per user, shared with every program), so one kept for every
# project ever opened ran out of both. The least recently used idle one stops first; its
# project's next turn, `get_context` or team write starts it again (pull, then a push of
# what changed meanwhile).
MAX_SYNCING_FOLDERS = 16


@dataclass
class Folder:
    project_root: Path
    runner: SyncRunner
    # The worktree it was made for (`Project.settings_root`): what resolves back to its
    # project, a linked worktree's own memory dir included.
    worktree_root: Path
    start_task: asyncio.Task[None] | None = None
    # The remote's full path (`group/sub/repo`) while the folder is keyed by its last two
    # parts and it is not yet known whether the server takes it: asked before each pull
    # until the server answers; meanwhile the folder sends nothing (`engine.unsettled`).
    full_path: str | None = None
    # One question at a time (the runner's pull and a `team.*` call may both ask).
    asking: asyncio.Lock = field(default_factory=asyncio.Lock)
    handed_over: bool = False  # replaced by the folder keyed by the full path

    @property
    def engine(self) -> SyncEngine:
        return self.runner.engine


class TeamSync:
    def __init__(
        self,
        host: Host,
        automem: AutoMemory,
        resolve_project: Callable[[Path], Project],
        *,
        config: TeamConfig,
    ) -> None:
        self.host = host
        self.automem = automem
        self.resolve_project = resolve_project  # a project root back to its Project
        self.config = config
        self.tuning = Tuning(debounce_s=config.debounce_s)
        self.timeout_s = 30.0
        # Whether the server serves the full path: one cheap GET (a one-row read), so bounded
        # well below a request's deadline (2 x timeout_s): a server stalling on it held a
        # `team.push` for that deadline, twice (the start's question, then its own).
        self.question_timeout_s = 10.0
        self._folders: dict[Path, Folder] = {}
        self._closed = False
        self._scan_pool: ProcessPoolExecutor | None = None
        # Per (project root, worktree), as auto memory chooses a memory dir: a worktree whose
        # settings name a dir of its own has a team folder of its own.
        self._folders_by_root: dict[tuple[Path, Path], Folder] = {}
        self._retiring: set[asyncio.Task[None]] = set()  # folders replaced, still closing
        self._shedding: set[asyncio.Task[None]] = set()  # waiting for a folder to go idle
        self.refresh_interval_s = 60.0
        self._stopping = False
        self._shutdown_watch: asyncio.Task[None] | None = None
        # Per full path (`group/sub/repo`): whether the server serves it to our token.
        self._takes_full_path: dict[str, bool] = {}
        # Per (team folder, full path): whether a state saved under the full path exists
        # (the folder synced with it before). Looked up once: `_repo_for` runs on every turn.
        self._saved_full_path: dict[tuple[Path, str], bool] = {}

    @property
    def configured(self) -> bool:
        return self.config.url is not None

    def team_dir(self, project: Project) -> Path:
        """The project's team folder; FeatureUnavailable when team sync or auto memory is off."""
        if not self.configured:
            raise FeatureUnavailable(NOT_CONFIGURED)
        return self.automem.team_dir(project)

    # -- folders --------------------------------------------------------------------------
    def folder(self, project: Project) -> Folder:
        """The project's folder, created (and its first pull started) on first use — and
        made anew when the project's git remote now names another repository than the one
        it was set up with (a remote added after `git init`, a repository moved to another
        owner): kept, a project first seen without a remote stayed `no_repo`, and a moved
        one synced with the old repository, until the daemon restarted."""
        team_dir = self.team_dir(project)
        existing = self._folders.get(team_dir)
        repo = self._repo_for(project, team_dir)
        if existing is not None and not _remote_changed(existing, project, repo):
            self._used(existing)
            return existing
        folder = self._make_folder(project, team_dir, repo)
        self._folders[team_dir] = folder
        retiring: asyncio.Task[None] | None = None
        if existing is not None:
            for key, known in list(self._folders_by_root.items()):
                if known is existing:
                    self._folders_by_root[key] = folder
            log.info(
                "team sync follows the project's new remote",
                project=str(project.root),
                old=existing.engine.repo or None,
                new=folder.engine.repo,
            )
            retiring = asyncio.create_task(self._retire(existing))
            self._retiring.add(retiring)
            retiring.add_done_callback(self._retiring.discard)
        if not self._closed:
            folder.start_task = asyncio.create_task(self._start(folder, after=retiring))
        self._shed_idle()
        return folder

    def _shed_idle(self) -> None:
        """Stop the least recently used idle folders beyond MAX_SYNCING_FOLDERS (one with
        something to push, or started not long enough to be idle, is kept)."""
        for team_dir, folder in list(self._folders.items()):
            if len(self._folders) <= MAX_SYNCING_FOLDERS:
                return
            started = folder.start_task is None or folder.start_task.done()
            if not started or not folder.runner.idle:
                continue
            del self._folders[team_dir]
            for key, known in list(self._folders_by_root.items()):
                if known is folder:
                    del self._folders_by_root[key]
            log.info("team folder idle: stopped watching", team_dir=str(team_dir))
            retiring = asyncio.create_task(self._retire(folder))
            self._retiring.add(retiring)
            retiring.add_done_callback(self._retiring.discard)

    def _used(self, folder: Folder) -> None:
        """`folder` was just used: the last to stop when folders are shed."""
        team_dir = folder.engine.folder.team_dir
        if self._folders.get(team_dir) is folder:
            self._folders[team_dir] = self._folders.pop(team_dir)

    async def _retire(self, folder: Folder) -> None:
        """Stop a folder's runner and close its client; the folder that replaces it starts
        once this is done, and pushes what is pending to the repository the remote names
        now (a final push here would send an edit made just after the change to the old)."""
        if folder.start_task is not None and not folder.start_task.done():
            folder.start_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await folder.start_task
        try:
            await folder.runner.close(final_push=False)
        except Exception as exc:
            log.warning("team sync did not close cleanly", repo=folder.engine.repo, error=str(exc))
        if folder.engine.client is not None:
            await folder.engine.client.close()

    def _repo_for(self, project: Project, team_dir: Path) -> str | None:
        """The repository the project's folder syncs with: `owner/repo` from its remote, or,
        for a GitLab subgroup's project, its full path `group/sub/repo` once the server is
        known to serve it to our token (asked before the folder's pulls until the server
        answers, or the folder synced with it before: its state is saved). Keyed by the last
        two parts alone, two groups' `sub/repo` shared one team memory; a server or a token
        from before session 20 knows only those, and the folder keeps them."""
        slug = project.facts.repo_slug
        full = full_repo_path(project.facts.remote_url)
        if slug is None or full is None:
            return slug
        takes = self._takes_full_path.get(full)
        url = self.config.url
        if takes is None and url is not None:
            saved = self._saved_full_path.get((team_dir, full))
            if saved is None:
                saved = state_path(url, full, team_dir).exists()
                self._saved_full_path[(team_dir, full)] = saved
            if saved:
                takes = self._takes_full_path[full] = True
        return full if takes else slug

    def _make_folder(self, project: Project, team_dir: Path, repo: str | None) -> Folder:
        config = self.config
        assert config.url is not None
        store = StateStore(state_path(config.url, repo or "-", team_dir))
        state = store.load(repo=repo or "", server=config.url, team_dir=team_dir)
        state.project_root = str(project.root)
        worktree = project.settings_root
        state.worktree_root = str(worktree) if worktree != project.root else None
        client: TeamClient | None = None
        if repo is None:
            state.suppressed = "no_repo"
        elif not config.token:
            state.suppressed = "no_oauth"
        elif not usable_http_url(config.url):
            state.suppressed = "bad_url"  # e.g. no http(s) scheme: no request could succeed
        elif not usable_credential(config.token):
            state.suppressed = "bad_token"
        else:
            client = TeamClient(config.url, config.token, timeout_s=self.timeout_s)
        memory_dir = team_dir.parent
        engine = SyncEngine(
            state=state,
            store=store,
            folder=LocalFolder(team_dir),
            client=client,
            notify=self.host.notify,
            find_secret=find_secret,
            write_lock=self.automem.writer_lock(memory_dir),
            on_pulled=lambda _keys: self.automem.invalidate(project),
            scan_pool=self.scan_pool,
        )
        runner = SyncRunner(engine, tuning=self.tuning, report_error=self._report_error)
        self._follow_host_shutdown()
        if self._stopping:  # made while the daemon drains (a saved folder resuming)
            runner.stopping()
        full = full_repo_path(project.facts.remote_url)
        unknown = (
            client is not None and full not in (None, repo) and full not in self._takes_full_path
        )
        folder = Folder(
            project.root,
            runner,
            worktree_root=project.settings_root,
            full_path=full if unknown else None,
        )
        if full is not None and unknown:
            engine.unsettled = Retryable(f"not yet asked whether the server serves {full}")
            runner.before_pull = lambda: self._moved_to_full_path(folder)
        return folder

    def stopping(self) -> None:
        """The daemon was asked to stop: it drains its requests, then closes this service.
        Every folder's requests end within the shutdown budget from now (SyncRunner.stopping):
        a `team.push` waiting on a stalled server held the drain for 30 s, and close then
        waited for the watcher's push another 10 s."""
        self._stopping = True
        for folder in self._folders.values():
            folder.runner.stopping()

    def _follow_host_shutdown(self) -> None:
        """Call `stopping` when the daemon is asked to stop, before it drains."""
        if self._shutdown_watch is not None:
            return

        async def follow(requested: asyncio.Event) -> None:
            await requested.wait()
            self.stopping()

        self._shutdown_watch = asyncio.create_task(
            follow(self.host.shutdown_requested), name="team-sync:stopping"
        )

    async def _start(self, folder: Folder, *, after: asyncio.Task[None] | None = None) -> None:
        try:
            if after is not None:  # the folder this one replaces, stopped first
                await asyncio.shield(after)
            # Its first pull may hand over to the folder keyed by the full path, which starts
            # instead (`runner.before_pull`).
            await folder.runner.start()
        except Exception as exc:
            await self._report_error("team.start", f"{type(exc).__name__}: {exc}")
        # Folders busy when the last one was made may be idle now: at start-up every saved
        # folder resumes at once, and they all kept watching. One still pushing what changed
        # meanwhile is looked at again once that is done.
        if not self._closed:
            self._shed_idle()
        if not self._closed and len(self._folders) > MAX_SYNCING_FOLDERS:
            task = asyncio.create_task(self._shed_when_idle(folder))
            self._shedding.add(task)
            task.add_done_callback(self._shedding.discard)

    async def _moved_to_full_path(self, folder: Folder) -> bool:
        """Before a folder keyed `sub/repo` pulls while it is not known whether the server
        serves the remote's full path `group/sub/repo` to our token: ask, and on a yes hand
        the folder over to one keyed by the full path (as for a remote that changed: nothing
        is pulled from or pushed to the two-part name). An old server or a token bound to
        `sub/repo` only: the folder keeps it for this run. No answer (the server down, a 5xx):
        the Retryable is raised, the folder sends nothing, and the next pull asks again (taken
        as a no, the folder synced with `sub/repo` until the daemon restarted, though its team
        had moved). A refusal that is no answer (401, a proxy's 407: `TeamClient.takes_repo`)
        stops the folder as any refusal does, saying why (`team.status`), and the question is
        asked again once that stop is lifted (a file in team/ deleted, or a restart: new
        credentials); SyncSuppressed meanwhile, with no request. True when the folder was
        handed over (or the service closed)."""
        async with folder.asking:
            if folder.handed_over:
                return True
            engine = folder.engine
            full, client = folder.full_path, engine.client
            if full is None or client is None:
                return False
            takes = self._takes_full_path.get(full)  # another folder of this remote asked
            if takes is None:
                if engine.state.suppressed is not None:
                    raise SyncSuppressed(engine.state.suppressed)
                try:
                    takes = await client.takes_repo(
                        full, timeout_s=min(self.question_timeout_s, self.timeout_s)
                    )
                except TeamHTTPError as exc:
                    # Taken as a no, a stray 401 (a token rotated) or a proxy's 407 sent the
                    # folder to `sub/repo` for the daemon's run.
                    log.info("no answer whether the server serves the full path", repo=full)
                    asked = (
                        f"whether the server serves {full} (asked: {exc}); nothing is sent "
                        f"to {engine.repo} meanwhile"
                    )
                    engine.unsettled = Retryable(f"not yet known {asked}", exc.status)
                    failure: TeamHTTPError = engine.unsettled
                    if not isinstance(exc, Retryable):  # a refusal stops the folder, saying why
                        failure = Permanent(f"no answer {asked}", exc.status)
                    # team.status says why nothing syncs, as for a pull that failed.
                    await engine.record_failure("pull", failure)
                    raise
                self._takes_full_path[full] = takes
            folder.full_path = None
            if not takes:
                folder.engine.unsettled = None
                return False
            folder.handed_over = True
            if self._closed:
                return True
            log.info("team sync keys the folder by its full path", old=folder.engine.repo, new=full)
            with contextlib.suppress(FeatureUnavailable):  # auto memory off now: no folder
                # The remote's repository is now the full path: made anew, as for a moved remote.
                self.folder(self.resolve_project(folder.worktree_root))
            return True

    async def _shed_when_idle(self, folder: Folder) -> None:
        await folder.runner.wait_idle()
        if not self._closed:
            self._shed_idle()

    def scan_pool(self) -> ProcessPoolExecutor:
        """One worker process for the secret scan of large pushes, started on first need
        ("spawn": a fork of a threaded asyncio daemon is not safe)."""
        if self._scan_pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self._scan_pool = ProcessPoolExecutor(
                max_workers=1, mp_context=multiprocessing.get_context("spawn")
            )
        return self._scan_pool

    async def _report_error(self, worker: str, message: str) -> None:
        await self.host.report_worker_error(worker, message)

    async def started(self, project: Project) -> Folder:
        """The project's folder once started; asked again first whether the server serves
        the remote's full path when its start got no answer (still none: the folder sends
        nothing, and a pull or push on it fails saying so)."""
        folder = self.folder(project)
        while True:
            # A start still under way asks the question itself: not asked twice in a row.
            starting = folder.start_task is not None and not folder.start_task.done()
            if folder.start_task is not None:
                await asyncio.shield(folder.start_task)
            if folder.full_path is not None and not self._closed and not starting:
                with contextlib.suppress(TeamHTTPError, SyncSuppressed):
                    await self._moved_to_full_path(folder)
            # Its start may have handed over to a folder keyed by the remote's full path.
            now = self.folder(project)
            if now is folder:
                return folder
            folder = now

    def not_shared_because(self, project: Project) -> str | None:
        """Why the project's team folder does not sync (after `ensure`), or None while it does:
        set up without a repo or a token, or suppressed by the server's refusal."""
        known = self._folders_by_root.get(_folder_key(project))
        code = None if known is None else known.engine.state.suppressed
        if known is None or code is None:
            return None
        return why_off(code, refused_op(known.engine.state))

    def on_server(self, project: Project, path: Path) -> bool:
        """Whether the team memory at `path` is on the team server as far as the project's
        syncing folder knows (after `ensure`): one a pull would bring back if deleted here.
        Not one never pushed (new, waiting in the debounce) nor one the secret scan kept back."""
        folder = self._folders_by_root.get(_folder_key(project))
        if folder is None or folder.engine.state.suppressed is not None:
            return False
        key = folder.engine.folder.key_of(path)  # NFC, as a scan keys it
        if key is None:
            return False
        state = folder.engine.state
        known = key in state.server_checksums or key in state.synced  # pulled, or pushed
        return known and key not in state.skipped

    def written(self, project: Project, path: Path) -> None:
        """The daemon just wrote `path` in the project's team folder (after `ensure`): pending
        at once in `team.status`, and pushed within the debounce even if the watcher missed it.
        A folder whose sync is off has nothing pending (nothing would be sent)."""
        folder = self._folders_by_root.get(_folder_key(project))
        if folder is None or folder.engine.client is None or folder.engine.state.suppressed:
            return
        key = folder.engine.folder.key_of(path)
        if key is None:
            return
        folder.engine.mark_pending(key)
        if folder.runner.started.is_set():  # else its start pushes what is there
            folder.runner.trigger()

    def ensure(self, project: Project, *, refresh: bool = False) -> None:
        """Start syncing the project's folder if it is not yet (quick; never raises). With
        `refresh` (a session starting) an already-syncing folder pulls again, at most once
        per `refresh_interval_s` — a 304 when nothing changed."""
        if not self.configured or self._closed:
            return
        known = self._folders_by_root.get(_folder_key(project))
        if known is not None and not _remote_changed(
            known, project, self._repo_for(project, known.engine.folder.team_dir)
        ):
            # the fast path of every turn and get_context
            self._used(known)
            if refresh:
                known.runner.refresh(self.refresh_interval_s)
            return
        try:
            self._folders_by_root[_folder_key(project)] = self.folder(project)
        except FeatureUnavailable:
            return  # auto memory is off for this project: no team folder
        except Exception as exc:
            log.warning("team sync not started", project=str(project.root), error=str(exc))

    async def resume_saved(self) -> int:
        """At daemon start: resume every folder that synced with this server before."""
        url = self.config.url
        if url is None:
            return 0
        resumed = 0
        for state in saved_states():
            if state.server != url or not state.project_root:
                continue
            # The worktree it was made for first: resolved from the main worktree's root, a
            # linked worktree's own team folder is another folder, and was never resumed.
            # Then the project's root (a state saved before session 22 names no worktree):
            # a folder the main worktree shares with a linked one made from there outlives
            # that worktree's removal, and was then skipped.
            for root in dict.fromkeys((state.worktree_root, state.project_root)):
                project = await self._project_of_saved_folder(root, Path(state.team_dir))
                if project is not None:
                    self.ensure(project)
                    resumed += 1
                    break
        return resumed

    async def _project_of_saved_folder(self, root: str | None, team_dir: Path) -> Project | None:
        """The project at `root` when it is still there and its team folder is `team_dir`."""
        if root is None or not await asyncio.to_thread(Path(root).is_dir):
            return None
        project = self.resolve_project(Path(root))
        try:
            return project if self.team_dir(project) == team_dir else None
        except FeatureUnavailable:
            return None

    # -- status ---------------------------------------------------------------------------
    async def describe(self, project: Project) -> dict[str, Any]:
        """The folder's sync state now; never waits on the network (a pull or push in
        flight leaves the last known pending keys in place)."""
        folder = self.folder(project)
        engine = folder.engine
        if engine.client is not None:
            await engine.refresh_pending()
        return describe_state(folder)

    def feature_status(self) -> dict[str, Any]:
        if not self.configured:
            return {"team_sync": {"enabled": False, "reason": NOT_CONFIGURED}}
        if self.config.problem:  # a URL without a token, `notaurl`: no folder can sync
            return {"team_sync": {"enabled": False, "reason": self.config.problem}}
        reasons = {
            str(f.engine.state.repo or f.project_root): f.engine.state.suppressed
            for f in self._folders.values()
        }
        return {
            "team_sync": {
                "enabled": True,
                "reason": None,
                "folders": len(self._folders),
                "suppressed": {k: v for k, v in reasons.items() if v is not None},
            }
        }

    async def close(self) -> None:
        self._closed = True
        if self._shutdown_watch is not None:
            self._shutdown_watch.cancel()
        for task in self._shedding:
            task.cancel()
        if self._retiring:
            await asyncio.gather(*self._retiring, return_exceptions=True)
        folders = list(self._folders.values())
        for folder in folders:
            if folder.start_task is not None and not folder.start_task.done():
                folder.start_task.cancel()
        closed = await asyncio.gather(*(f.runner.close() for f in folders), return_exceptions=True)
        for folder, outcome in zip(folders, closed, strict=True):
            if isinstance(outcome, BaseException):  # e.g. the final push hit a disk error
                log.warning(
                    "team sync did not close cleanly",
                    repo=folder.engine.repo,
                    team_dir=str(folder.engine.folder.team_dir),
                    error=f"{type(outcome).__name__}: {outcome}",
                )
        for folder in folders:
            if folder.engine.client is not None:
                await folder.engine.client.close()
        if self._scan_pool is not None:
            await asyncio.to_thread(self._scan_pool.shutdown, True, cancel_futures=True)


def _folder_key(project: Project) -> tuple[Path, Path]:
    return (project.root, project.settings_root)


def _remote_changed(folder: Folder, project: Project, repo: str | None) -> bool:
    """Whether the project's git remote now names another repository (`repo`, chosen by
    `TeamSync._repo_for`) than the folder syncs with. Only for the folder's own project: with
    one memory dir for every project (MEMORYD_AUTO_MEMORY_DIR), another project's remote must
    not make the folder flip."""
    return folder.project_root == project.root and folder.engine.repo != (repo or "")


def full_repo_path(remote_url: str | None) -> str | None:
    """A GitLab subgroup project's full path (`group/sub/repo`, lower case) from its remote
    URL; None for a two-part `owner/repo` (the slug says it all), a path the team server would
    refuse, or no remote."""
    parts = repo_path_parts(remote_url)
    if parse_repo_slug(remote_url) is None or parts is None:
        return None
    full = canonical_repo("/".join(parts))
    return full if full is not None and full.count("/") > 1 else None


def describe_state(folder: Folder) -> dict[str, Any]:
    engine = folder.engine
    state = engine.state
    runner = folder.runner
    return {
        "repo": state.repo or None,
        # Never a token swapped into MEMORYD_TEAM_URL, nor a password in it.
        "server": shown_url(state.server),
        "team_dir": state.team_dir,
        "etag": state.etag,
        "last_result": state.last_result,
        "suppressed": state.suppressed,
        # What `suppressed` means and what lifts it, in words: every client shows this text
        # rather than keeping its own copy of why_off's (the editors' had drifted).
        **(
            {}
            if state.suppressed is None
            else {"why": why_off(state.suppressed, refused_op(state))}
        ),
        "pending": list(state.pending),
        "entries": len(state.server_checksums),
        "max_entries": state.max_entries,
        "skipped": [
            {
                "key": key,
                "path": str(Path(state.team_dir).joinpath(*key.split("/"))),
                **_drop_none(vars(s)),
            }
            for key, s in sorted(state.skipped.items())
        ],
        "refused_keys": [{"key": k, "reason": v} for k, v in sorted(state.refused_keys.items())],
        "conflicts": [
            vars(c) | {"path": str(Path(state.team_dir).joinpath(*c.key.split("/")))}
            for c in state.conflicts
        ],
        # `conflicts` holds the newest MAX_CONFLICTS_KEPT; this counts every one, so a cut
        # list is seen to be cut (the copies themselves stay in the folder).
        "conflicts_total": state.conflicts_total,
        "retrying": runner.failures > 0,
        "requests": engine.client.requests if engine.client is not None else 0,
    }


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}
