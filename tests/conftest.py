"""Fixtures every test can use: an isolated HOME, a real daemon, a fake model server."""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog._config import BoundLoggerLazyProxy

from memoryd.core.model_config import ModelConfig
from memoryd.core.team_config import TeamConfig
from memoryd.daemon import logging as daemon_logging
from memoryd.daemon.app import Daemon
from memoryd.daemon.config import DaemonConfig
from memoryd.daemon.rpc import MethodSpec
from memoryd.daemon.server import Server
from memoryd_client import AsyncClient
from tests.fakes.full_disk import SmallDisks
from tests.fakes.messages_api import FakeMessagesAPI

_CLEARED_PREFIXES = ("ANTHROPIC_", "MEMORYD_", "CLAUDE_", "XDG_", "GIT_", "LISTEN_")


@dataclass(frozen=True)
class IsolatedEnv:
    root: Path
    home: Path
    config_dir: Path
    managed_dir: Path
    state_dir: Path
    data_dir: Path


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> IsolatedEnv:
    """Every test gets a fresh HOME and XDG dirs under tmp_path, and no inherited config."""
    for key in list(os.environ):
        if key.startswith(_CLEARED_PREFIXES):
            monkeypatch.delenv(key, raising=False)
    root = tmp_path / "env"
    home = root / "home"
    managed = root / "managed"
    for path in (home, managed):
        path.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MEMORYD_MANAGED_DIR", str(managed))
    monkeypatch.setenv("XDG_STATE_HOME", str(root / "state"))
    monkeypatch.setenv("XDG_DATA_HOME", str(root / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(root / "cache"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("MEMORYD_EMBEDDINGS", "off")  # tests of hybrid recall turn it on
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    return IsolatedEnv(
        root=root,
        home=home,
        config_dir=home / ".claude",
        managed_dir=managed,
        state_dir=root / "state" / "memoryd",
        data_dir=root / "data" / "memoryd",
    )


@pytest.fixture(autouse=True)
def structlog_restored() -> Iterator[None]:
    """structlog as each test found it, whatever the test configured. `daemon.logging.configure`
    turns on cache_logger_on_first_use: a module's logger first used then keeps that
    configuration's processor list for good, and a later configuration (the next test's)
    leaves it out of `capture_logs`' reach (which edits the current list), so a test's capture
    passed or failed by which tests ran before it."""
    before = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    after = structlog.get_config()
    if all(after[key] is before[key] for key in before):
        return  # untouched (capture_logs edits the list in place and puts it back)
    while daemon_logging._OPENED:  # the log file a configuration opened
        daemon_logging._OPENED.pop().close()
    structlog.configure(**before)  # the very list: loggers cached before the test keep it
    root.handlers[:] = handlers  # configure() replaced them (basicConfig(force=True))
    root.setLevel(level)
    for module in list(sys.modules.values()):
        for value in list(getattr(module, "__dict__", {}).values()):
            if isinstance(value, BoundLoggerLazyProxy):
                # The cached logger is `bind` set on the proxy (structlog's _config): dropped,
                # the proxy builds its logger from the configuration of the moment again.
                vars(value).pop("bind", None)


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short directory for Unix sockets (AF_UNIX paths are capped near 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="md-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@dataclass
class DaemonHandle:
    daemon: Daemon
    server: Server
    socket_path: Path
    _client: AsyncClient

    async def call(self, method: str, **params: Any) -> Any:
        return await self._client.call(method, params)

    async def client(self) -> AsyncClient:
        return await AsyncClient(self.socket_path).connect()


async def start_daemon(config: DaemonConfig, methods: Iterable[MethodSpec] = ()) -> DaemonHandle:
    """A daemon serving its own methods and `methods` (test-only ones)."""
    daemon = Daemon(config)
    daemon.methods.update((spec.name, spec) for spec in methods)
    server = Server(daemon)
    await server.start()
    await daemon.on_start()
    client = await AsyncClient(config.socket_path).connect()
    return DaemonHandle(daemon, server, config.socket_path, client)


async def stop_daemon(handle: DaemonHandle) -> None:
    await handle._client.close()
    await handle.server.stop()


def daemon_config(short_tmp: Path, **changes: Any) -> DaemonConfig:
    base = DaemonConfig(
        socket_path=short_tmp / "d.sock",
        model=ModelConfig(),
        team=TeamConfig(),
        drain_timeout_s=10.0,
    )
    return replace(base, **changes)


@pytest.fixture
async def daemon(short_tmp: Path) -> AsyncIterator[DaemonHandle]:
    """A real daemon on a real Unix socket, in this test's event loop, with no model."""
    handle = await start_daemon(daemon_config(short_tmp))
    try:
        yield handle
    finally:
        await stop_daemon(handle)


@pytest.fixture
def small_disks() -> Iterator[SmallDisks]:
    """Tiny tmpfs mounts for a real full disk (tests/fakes/full_disk.py), unmounted after."""
    disks = SmallDisks()
    try:
        yield disks
    finally:
        disks.unmount_all()


@pytest.fixture
def fake_model() -> Iterator[FakeMessagesAPI]:
    server = FakeMessagesAPI().start()
    try:
        yield server
    finally:
        server.stop()


def fake_model_config(fake: FakeMessagesAPI) -> ModelConfig:
    return ModelConfig(
        api_key="sk-test-fake-key",
        base_url=fake.base_url,
        model="claude-fake-large",
        small_model="claude-fake-small",
        timeout_s=10.0,
        max_retries=3,
        retry_base_delay_s=0.01,
        retry_max_delay_s=0.05,
    )


@pytest.fixture
async def daemon_with_model(
    short_tmp: Path, fake_model: FakeMessagesAPI
) -> AsyncIterator[DaemonHandle]:
    """A real daemon whose model calls go to the scripted fake Messages API."""
    handle = await start_daemon(daemon_config(short_tmp, model=fake_model_config(fake_model)))
    try:
        yield handle
    finally:
        await stop_daemon(handle)
