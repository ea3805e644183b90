"""Fixtures for the team sync client: a real team server (SQLite, in a thread), the faulty
proxy in front of it, and sync engines for separate team folders ("sides")."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from memoryd.core.team_config import TeamConfig
from memoryd.team.service import find_secret
from memoryd.team.sync.client import TeamClient
from memoryd.team.sync.engine import SyncEngine
from memoryd.team.sync.localfs import LocalFolder
from memoryd.team.sync.state import StateStore, state_path
from memoryd.team.sync.watcher import Tuning
from memoryd_team.settings import ServerSettings
from tests.conftest import DaemonHandle, daemon_config, start_daemon, stop_daemon
from tests.fakes.faulty_proxy import FaultyProxy
from tests.team_server.conftest import ThreadedServer

REPO = "acme/widgets"


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., ThreadedServer]]:
    started: list[ThreadedServer] = []

    def start(settings: ServerSettings | None = None, name: str = "team") -> ThreadedServer:
        server = ThreadedServer(f"sqlite://{tmp_path / name}.sqlite3", settings or ServerSettings())
        started.append(server.start())
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def server(server_factory: Callable[..., ThreadedServer]) -> ThreadedServer:
    return server_factory()


@pytest.fixture
def proxy(server: ThreadedServer) -> Iterator[FaultyProxy]:
    fake = FaultyProxy(server.url).start()
    try:
        yield fake
    finally:
        fake.stop()


@dataclass
class Side:
    """One client: its team folder, engine and the notifications it sent."""

    team_dir: Path
    engine: SyncEngine
    notes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # A client for this side's server with the given timeout (None without a token).
    client_with: Callable[[float], TeamClient | None] = lambda _timeout_s: None

    def write(self, key: str, text: str) -> Path:
        path = self.team_dir / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def read(self, key: str) -> str:
        return (self.team_dir / key).read_text(encoding="utf-8")

    def events(self, name: str) -> list[dict[str, Any]]:
        return [params for event, params in self.notes if event == name]

    def conflict_copies(self) -> dict[str, str]:
        return {
            str(p.relative_to(self.team_dir)): p.read_text(encoding="utf-8")
            for p in self.team_dir.rglob("*.conflict-*")
        }

    async def set_timeout(self, timeout_s: float) -> None:
        """A fresh client with `timeout_s`: a test that gave a short one to make a stalled
        request time out gives the next requests a long one, which a loaded machine meets."""
        old = self.engine.client
        self.engine.client = self.client_with(timeout_s)
        if old is not None:
            await old.close()

    async def close(self) -> None:
        if self.engine.client is not None:
            await self.engine.client.close()


SideFactory = Callable[..., Side]


async def seed_server(
    make_side: SideFactory, server: ThreadedServer, token: str, files: dict[str, str]
) -> None:
    """Put `files` on the team server, pushed by a side of their own (as a teammate would)."""
    seed = make_side("seed", server.url, token)
    for key, text in files.items():
        seed.write(key, text)
    await seed.engine.push()


async def remember_deploy_freeze(
    handle: DaemonHandle, root: Path, body: str = "No deploys on Fridays.\n"
) -> dict[str, Any]:
    """`memory.write` of one team memory, "deploy freeze", in `root`: the daemon's reply."""
    written: dict[str, Any] = await handle.call(
        "memory.write",
        cwd=str(root),
        type="project",
        name="deploy freeze",
        description="no deploys on fridays",
        body=body,
        team=True,
    )
    return written


@pytest.fixture
async def daemons() -> Any:
    """Daemons a test starts (in its loop), stopped at its end."""
    handles: list[DaemonHandle] = []
    yield handles
    for handle in handles:
        await stop_daemon(handle)


async def start(short_tmp: Path, name: str, **team: Any) -> DaemonHandle:
    """A daemon on `short_tmp/<name>.sock` with `team` settings and short sync timings."""
    config = daemon_config(short_tmp, socket_path=short_tmp / f"{name}.sock")
    handle = await start_daemon(replace(config, team=TeamConfig(**team)))
    handle.daemon.services.team.tuning = Tuning(
        debounce_s=team.get("debounce_s", 0.1), backoff_base_s=0.05, backoff_cap_s=0.5
    )
    return handle


TeamDaemon = Callable[..., Awaitable[DaemonHandle]]


@pytest.fixture
def team_daemon(short_tmp: Path, daemons: list[DaemonHandle]) -> TeamDaemon:
    """`start` for this test: each daemon is stopped at its end (or `daemons.pop()` earlier)."""

    async def run(name: str, **team: Any) -> DaemonHandle:
        handle = await start(short_tmp, name, **team)
        daemons.append(handle)
        return handle

    return run


@pytest.fixture
async def make_side(tmp_path: Path) -> Any:
    sides: list[Side] = []

    def make(
        name: str,
        url: str,
        token: str | None,
        *,
        repo: str = REPO,
        timeout_s: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> Side:
        team_dir = tmp_path / name / "memory" / "team"
        team_dir.mkdir(parents=True, exist_ok=True)
        store = StateStore(state_path(url, repo, team_dir))
        state = store.load(repo=repo, server=url, team_dir=team_dir)

        def client_with(timeout_s: float) -> TeamClient | None:
            if token is None:
                return None
            return TeamClient(url, token, timeout_s=timeout_s, transport=transport)

        client = client_with(timeout_s)
        if client is None:
            state.suppressed = "no_oauth"
        side_notes: list[tuple[str, dict[str, Any]]] = []

        async def notify(event: str, params: dict[str, Any]) -> None:
            side_notes.append((event, params))

        engine = SyncEngine(
            state=state,
            store=store,
            folder=LocalFolder(team_dir),
            client=client,
            notify=notify,
            find_secret=find_secret,
        )
        side = Side(team_dir, engine, side_notes, client_with)
        sides.append(side)
        return side

    yield make
    for side in sides:
        await side.close()


def server_history(server: ThreadedServer, repo: str = REPO) -> dict[str, list[str]]:
    """Every stored version's content, per key, oldest first."""

    async def collect() -> dict[str, list[str]]:
        versions: dict[str, list[str]] = {}
        for info in await server.storage.history(repo):
            _, content = await server.storage.get_version(repo, info.key, info.version)
            versions.setdefault(info.key, []).append(content)
        return versions

    return server.run(collect())


async def eventually(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    """Wait until `condition()` holds (polling); fail the test after `timeout` seconds (long:
    a loaded 2-core CI takes seconds to start a daemon; the wait costs only on failure)."""
    import asyncio
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)
