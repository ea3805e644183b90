"""Fixtures: a real PostgreSQL cluster (session), a database per test, and the team server
running under uvicorn on a loopback port — in a thread, or as `memoryd-team serve` processes."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import uvicorn

from memoryd.team.protocol import TEAM_MEMORY_PATH
from memoryd_team import auth
from memoryd_team.app import make_app
from memoryd_team.connection import DeadlineH11Protocol, protocol_for
from memoryd_team.settings import ServerSettings
from memoryd_team.storage import open_storage
from memoryd_team.storage.base import Storage
from tests.team_server.pg import PgCluster, find_pg_bin, free_port, missing_message

T = TypeVar("T")


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """One PostgreSQL for the whole session; missing binaries fail under CI, skip otherwise."""
    bin_dir = find_pg_bin()
    if bin_dir is None:
        if os.environ.get("CI"):
            pytest.fail(missing_message())
        pytest.skip(missing_message())
    cluster = PgCluster(bin_dir).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database: a SQLite file, or a new database in the session's cluster."""
    if request.param == "sqlite":
        yield f"sqlite://{tmp_path / 'team.sqlite3'}"
        return
    cluster: PgCluster = request.getfixturevalue("pg_cluster")
    name = f"t_{uuid.uuid4().hex[:12]}"
    url = cluster.create_database(name)
    try:
        yield url
    finally:
        cluster.drop_database(name)


class ThreadedServer:
    """uvicorn serving `make_app(storage, settings)` on 127.0.0.1, its loop in a thread."""

    def __init__(
        self,
        database_url: str,
        settings: ServerSettings,
        storage: Storage | None = None,
        protocol: type[DeadlineH11Protocol] = DeadlineH11Protocol,
    ) -> None:
        self.database_url = database_url
        self.storage: Storage = storage or open_storage(database_url)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self.port = int(self._sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            make_app(self.storage, settings),
            log_config=None,
            log_level="warning",
            # as `memoryd-team serve` runs: the settings' connection deadlines
            http=protocol_for(settings, protocol),
            ws="none",
            lifespan="on",
        )
        self._server = uvicorn.Server(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._serve, name="team-server", daemon=True)
        self._clients: list[httpx.Client] = []

    def _serve(self) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._server.serve(sockets=[self._sock]))
        finally:
            self._loop.close()

    def start(self) -> ThreadedServer:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the team server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        for client in self._clients:
            client.close()
        self._server.should_exit = True
        self._thread.join(30)
        self._sock.close()

    @property
    def open_connections(self) -> int:
        """HTTP connections the server holds now."""
        return len(self._server.server_state.connections)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the server's loop (its storage is bound to that loop)."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    def token(self, *repos: str, name: str = "tester") -> str:
        return self.run(auth.create_token(self.storage, tuple(repos), name)).secret

    def client(self, token: str | None = None) -> httpx.Client:
        """An HTTP client for this server; closed by `stop()` if the test does not close it."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        client = httpx.Client(base_url=self.url, headers=headers, timeout=30)
        self._clients.append(client)
        return client


@pytest.fixture
def team_server_factory(
    database_url: str,
) -> Iterator[Callable[..., ThreadedServer]]:
    started: list[ThreadedServer] = []

    def start(settings: ServerSettings | None = None) -> ThreadedServer:
        server = ThreadedServer(database_url, settings or ServerSettings()).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def team_server(team_server_factory: Callable[..., ThreadedServer]) -> ThreadedServer:
    return team_server_factory()


@dataclass
class Repo:
    """One repository on a server, and an authorised client for it."""

    server: ThreadedServer
    name: str
    token: str
    http: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.http = self.server.client(self.token)

    def get(self, **headers: str) -> httpx.Response:
        return self.http.get(TEAM_MEMORY_PATH, params={"repo": self.name}, headers=headers)

    def hashes(self, **headers: str) -> httpx.Response:
        return self.http.get(
            TEAM_MEMORY_PATH, params={"repo": self.name, "view": "hashes"}, headers=headers
        )

    def put(self, entries: dict[str, str], if_match: str | None = None) -> httpx.Response:
        headers = {"If-Match": if_match} if if_match is not None else {}
        return self.http.put(
            TEAM_MEMORY_PATH,
            params={"repo": self.name},
            json={"entries": entries},
            headers=headers,
        )


@pytest.fixture
def repo(team_server: ThreadedServer) -> Repo:
    return Repo(team_server, "acme/widgets", team_server.token("acme/widgets", name="alice"))


@dataclass
class ServerProcess:
    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


def start_server_process(database_url: str, log: Path, *extra: str) -> ServerProcess:
    """`memoryd-team serve` as its own process; returns once /healthz answers."""
    port = free_port()
    handle = log.open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memoryd_team.cli",
            "serve",
            "--port",
            str(port),
            "--database",
            database_url,
            "--log-level",
            "warning",
            *extra,
        ],
        stdout=handle,
        stderr=subprocess.STDOUT,
    )
    handle.close()
    server = ServerProcess(process, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"memoryd-team serve exited: {log.read_text(errors='replace')}")
        try:
            if httpx.get(f"{server.url}/healthz", timeout=1).status_code == 200:
                return server
        except httpx.TransportError:
            time.sleep(0.05)
    server.stop()
    raise RuntimeError(f"memoryd-team serve did not start: {log.read_text(errors='replace')}")


def _with_storage(database_url: str, work: Callable[[Storage], Coroutine[Any, Any, T]]) -> T:
    """Run `work` on a short-lived storage of its own (for tests without a threaded server)."""

    async def run() -> T:
        storage = open_storage(database_url)
        await storage.open()
        try:
            return await work(storage)
        finally:
            await storage.close()

    return asyncio.run(run())


def create_token(database_url: str, *repos: str, name: str = "tester") -> str:
    return _with_storage(
        database_url, lambda storage: auth.create_token(storage, tuple(repos), name)
    ).secret


def history_checksums(database_url: str, repo: str) -> dict[str, list[str]]:
    """Every stored version's checksum per key, in version order."""
    versions = _with_storage(database_url, lambda storage: storage.history(repo))
    result: dict[str, list[str]] = {}
    for version in versions:
        result.setdefault(version.key, []).append(version.checksum)
    return result
