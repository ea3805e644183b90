"""Two races at the daemon's socket: a client handed over once the stop has begun, and the
stale-socket probe of a busy daemon on macOS (its full backlog refuses, as nobody does)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from memoryd.daemon import server as server_module
from memoryd.daemon.app import Daemon
from memoryd.daemon.config import DaemonConfig
from memoryd.daemon.rpc import NoParams, method
from memoryd.daemon.server import Server, socket_is_live
from memoryd_client import Client
from tests.conftest import daemon_config
from tests.daemon.conftest import TEST_METHODS


async def _serve(daemon: Daemon, listener: socket.socket, methods: bool = False) -> Server:
    """A daemon on a copy of `listener`, as systemd hands each daemon its socket; with the
    test methods when `methods`."""
    if methods:
        daemon.methods.update((spec.name, spec) for spec in TEST_METHODS)
    server = Server(daemon, listener.dup())
    await server.start()
    await daemon.on_start()
    return server


@pytest.fixture(autouse=True)
def _long_late_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """A late client's window long enough that a loaded machine's slow thread start does not
    close it before its request comes (the window's own test sets its own)."""
    monkeypatch.setattr(server_module, "LATE_CLIENT_WINDOW_S", 60.0)


async def test_a_client_handed_over_once_the_stop_began_is_answered_stopping_and_retries(
    short_tmp: Path,
) -> None:
    # Found by a bug hunt: a client accepted just before the stop, which asyncio hands over
    # only once `stop` has begun, was closed unserved: memoryd_client saw "memoryd closed the
    # connection" and gave up, though under socket activation the next daemon was coming on
    # the same socket. Its request is now answered -32006 and the client's one retry, on a new
    # connection, waits in the socket for the next daemon, which answers it.
    config = daemon_config(short_tmp)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # what systemd holds
    listener.bind(str(config.socket_path))
    listener.listen(16)
    first = await _serve(Daemon(config), listener)  # no test methods: only the next has them
    second: Server | None = None
    stopping: asyncio.Task[None] | None = None
    client = Client(config.socket_path, timeout=60)
    try:
        client.connect()  # queued in the socket: `first` accepts it at its next loop turn
        loop = asyncio.get_running_loop()
        first.stop_deadline = loop.time() + 60  # the stop has begun (as `stop` sets it)
        async with asyncio.timeout(30):
            while not first._late:  # handed over, in the stop
                await asyncio.sleep(0.01)
        stopping = asyncio.create_task(first.stop())  # stops accepting, waits for that client
        call = asyncio.create_task(asyncio.to_thread(client.call, "test.sleep", {"seconds": 0}))
        await asyncio.wait_for(asyncio.shield(stopping), 60)  # the client closed it on -32006
        assert not call.done(), call.result() if call.done() else None
        second = await _serve(Daemon(config), listener, methods=True)
        assert await asyncio.wait_for(call, 60) == {"slept": 0}
    finally:
        client.close()
        if stopping is not None:
            await stopping
        else:
            await first.stop()
        if second is not None:
            await second.stop()
        listener.close()


def _holding(daemon: Daemon) -> asyncio.Event:
    """`daemon` with `test.hold`, which answers once the event returned is set: a request
    that holds the stop's drain."""
    release = asyncio.Event()

    async def hold(_daemon: object, _params: NoParams) -> bool:
        await release.wait()
        return True

    daemon.methods["test.hold"] = method("test.hold", NoParams, hold)
    return release


async def _hold_the_drain(daemon: Daemon, path: Path) -> asyncio.StreamWriter:
    """A connection whose `test.hold` is running, once it is."""
    _reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(b'{"jsonrpc":"2.0","id":1,"method":"test.hold"}\n')
    await writer.drain()
    async with asyncio.timeout(60):
        while not daemon.inflight:
            await asyncio.sleep(0.01)
    return writer


async def test_a_request_on_a_connection_open_before_the_stop_is_answered_stopping_and_retried(
    short_tmp: Path,
) -> None:
    # Found by a bug hunt (4 writers under SIGTERM): a request sent, once the stop began, on
    # a connection opened before it was read and dropped; memoryd_client got only the close
    # at the drain's end, "memoryd closed the connection", and did not send it again. It is
    # answered -32006, and the client's retry reaches the next daemon while the first still
    # drains (its drain held here by a request that waits for `release`).
    config = daemon_config(short_tmp, drain_timeout_s=120.0)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # what systemd holds
    listener.bind(str(config.socket_path))
    listener.listen(16)
    first_daemon = Daemon(config)
    release = _holding(first_daemon)
    first = await _serve(first_daemon, listener)  # no test.sleep: only the next has it
    second: Server | None = None
    stopping: asyncio.Task[None] | None = None
    client = Client(config.socket_path, timeout=60)
    await asyncio.to_thread(client.call, "status")  # the connection is open, served
    held_writer = await _hold_the_drain(first_daemon, config.socket_path)
    try:
        stopping = asyncio.create_task(first.stop())
        async with asyncio.timeout(60):
            while first.stop_deadline is None:
                await asyncio.sleep(0.01)
        call = asyncio.create_task(asyncio.to_thread(client.call, "test.sleep", {"seconds": 0}))
        second = await _serve(Daemon(config), listener, methods=True)
        # Before: no answer until the first daemon's drain ended, then DaemonUnavailable.
        assert await asyncio.wait_for(call, 60) == {"slept": 0}
        assert not stopping.done()  # answered while the first one still drained
    finally:
        release.set()
        client.close()
        if stopping is not None:
            await asyncio.wait_for(stopping, 60)
        else:
            await first.stop()
        held_writer.close()
        if second is not None:
            await second.stop()
        listener.close()


async def test_a_client_flooding_requests_during_the_stop_cannot_hold_its_close(
    short_tmp: Path,
) -> None:
    # Each request sent on an open connection during the stop is answered -32006 (above)
    # until the connection's close begins; then no more are: answering a client that sends
    # as fast as it reads held the close (and the exit) until the drain cap's end.
    config = daemon_config(short_tmp, drain_timeout_s=600.0)
    server = Server(Daemon(config))
    release = _holding(server.daemon)
    await server.start()
    await server.daemon.on_start()
    held_writer = await _hold_the_drain(server.daemon, config.socket_path)
    reader, writer = await asyncio.open_unix_connection(str(config.socket_path))
    answers: list[bytes] = []

    async def flood() -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while True:
                writer.write(b'{"jsonrpc":"2.0","id":1,"method":"status"}\n' * 200)
                await writer.drain()

    async def read() -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while line := await reader.readline():
                answers.append(line)

    flooding, reading = asyncio.create_task(flood()), asyncio.create_task(read())
    stopping: asyncio.Task[None] | None = None
    try:
        async with asyncio.timeout(60):
            while not answers:  # served: taken in before the stop (not a late one)
                await asyncio.sleep(0.01)
        stopping = asyncio.create_task(server.stop())
        async with asyncio.timeout(60):
            while not any(b"-32006" in line for line in answers):  # answered in the stop
                await asyncio.sleep(0.01)
        release.set()  # the drain ends: the close begins with the flood going on
        await asyncio.wait_for(asyncio.shield(stopping), 120)  # not the 600 s drain cap
        await asyncio.wait_for(reading, 60)
    finally:
        release.set()
        flooding.cancel()
        reading.cancel()
        await asyncio.gather(flooding, reading, return_exceptions=True)
        writer.transport.abort()
        held_writer.close()
        await asyncio.wait_for(stopping or server.stop(), 600)


@contextlib.asynccontextmanager
async def _stop_begun(config: DaemonConfig) -> AsyncIterator[Server]:
    """A daemon on an activated socket, still listening, whose stop has begun (its deadline
    set, as `stop` sets it, a drain cap ahead): each client it is handed now is a late one."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(config.socket_path))
    listener.listen(16)
    server = await _serve(Daemon(config), listener)
    try:
        server.stop_deadline = asyncio.get_running_loop().time() + config.drain_timeout_s
        yield server
    finally:
        await asyncio.wait_for(server.stop(), 120 + config.drain_timeout_s)
        listener.close()


async def test_each_request_of_a_client_handed_over_once_the_stop_began_is_answered(
    short_tmp: Path,
) -> None:
    # A notification gets nothing, a batch one answer per request, a line that is no JSON its
    # parse error; lines split across writes are answered when whole. Then the connection
    # closes by the drain cap's end, or sooner when the client closes it.
    config = daemon_config(short_tmp, drain_timeout_s=60.0)
    async with _stop_begun(config):
        reader, writer = await asyncio.open_unix_connection(str(config.socket_path))
        writer.write(b'{"jsonrpc":"2.0","id":1,"method":"status"}\n{"jsonrpc":"2.0","method":"st')
        await writer.drain()
        assert b'"id":1' in await asyncio.wait_for(reader.readline(), 30)
        writer.write(b'atus"}\n[{"jsonrpc":"2.0","id":2,"method":"status"}]\nnot json\n')
        await writer.drain()
        batch = await asyncio.wait_for(reader.readline(), 30)
        assert batch.startswith(b"[")
        assert b"-32006" in batch
        assert b'"id":2' in batch
        assert b"-32700" in await asyncio.wait_for(reader.readline(), 30)
        writer.write_eof()
        assert await asyncio.wait_for(reader.read(), 30) == b""  # closed once the client did
        writer.close()


async def test_a_client_handed_over_once_the_stop_began_that_sends_nothing_is_closed_soon(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by the session 23 review: one that sent nothing (an editor's idle reconnect) held
    # the exit for the whole drain cap; its requests are read for LATE_CLIENT_WINDOW_S only.
    monkeypatch.setattr(server_module, "LATE_CLIENT_WINDOW_S", 0.2)
    config = daemon_config(short_tmp, drain_timeout_s=600.0)
    async with _stop_begun(config) as first:
        reader, writer = await asyncio.open_unix_connection(str(config.socket_path))
        async with asyncio.timeout(60):
            while not first._late:
                await asyncio.sleep(0.01)
        # closed by the window, not the 600 s drain cap
        assert await asyncio.wait_for(reader.read(), 120) == b""
        writer.close()


async def test_clients_handed_over_once_the_stop_began_count_against_the_connection_cap(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by the session 23 review: late clients were not counted in the cap, so a burst
    # accepted as the stop began held every descriptor the cap leaves the daemon for its
    # own files while the stop wrote them. Past the cap a late one is told -32004 and closed.
    monkeypatch.setattr(server_module, "connection_cap", lambda: 1)
    config = daemon_config(short_tmp, drain_timeout_s=60.0)
    async with _stop_begun(config) as first:
        _late_reader, late_writer = await asyncio.open_unix_connection(str(config.socket_path))
        async with asyncio.timeout(60):
            while not first._late:  # the one the cap leaves room for
                await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_unix_connection(str(config.socket_path))
        writer.write(b'{"jsonrpc":"2.0","id":1,"method":"status"}\n')
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        reply = await asyncio.wait_for(reader.readline(), 60)
        assert b"-32004" in reply, reply  # not -32006: it was not taken in
        assert b"serving 1 clients" in reply
        writer.close()
        late_writer.close()


class _Clock:
    """time.monotonic and time.sleep for the probe: sleeping moves the clock, and the first
    sleep may run `on_first_sleep` (the daemon's backlog drains)."""

    def __init__(self, on_first_sleep: object = None) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.on_first_sleep = on_first_sleep

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        if not self.sleeps and callable(self.on_first_sleep):
            self.on_first_sleep()
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def refusing(short_tmp: Path) -> Iterator[socket.socket]:
    """A socket file whose connects are refused (bound, not listening: what macOS says of a
    daemon whose accept backlog is full, and of a socket nobody listens on)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(short_tmp / "d.sock"))
    yield sock
    sock.close()


def _clock(monkeypatch: pytest.MonkeyPatch, clock: _Clock) -> None:
    # The probe module's own `time`, not the global one.
    monkeypatch.setattr(
        server_module, "time", SimpleNamespace(monotonic=clock.monotonic, sleep=clock.sleep)
    )


def test_on_macos_a_refused_probe_is_tried_again_and_a_daemon_that_accepts_is_live(
    short_tmp: Path, refusing: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by a bug hunt: on macOS a busy daemon's full backlog refuses the probe
    # (ECONNREFUSED), and the probe called that stale at once: a second daemon replaced the
    # busy one's socket file. Refused, it is tried again within its timeout.
    clock = _Clock(on_first_sleep=lambda: refusing.listen(1))
    _clock(monkeypatch, clock)
    assert socket_is_live(short_tmp / "d.sock", platform="darwin")
    assert len(clock.sleeps) == 1


def test_on_macos_a_socket_refused_throughout_the_timeout_is_stale(
    short_tmp: Path, refusing: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _Clock()
    _clock(monkeypatch, clock)
    assert not socket_is_live(short_tmp / "d.sock", timeout=1.0, platform="darwin")
    assert sum(clock.sleeps) == pytest.approx(1.0)  # refused throughout its timeout
    assert len(clock.sleeps) > 1


def test_elsewhere_a_refused_probe_is_stale_at_once(
    short_tmp: Path, refusing: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Linux says a full backlog with EAGAIN; its ECONNREFUSED is nobody listening.
    clock = _Clock(on_first_sleep=lambda: refusing.listen(1))
    _clock(monkeypatch, clock)
    assert not socket_is_live(short_tmp / "d.sock", platform="linux")
    assert clock.sleeps == []


def test_on_macos_a_file_that_is_no_socket_is_not_waited_for(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = short_tmp / "notes.txt"
    notes.write_text("mine\n")
    clock = _Clock()
    _clock(monkeypatch, clock)
    assert not socket_is_live(notes, platform="darwin")
    assert clock.sleeps == []


def test_the_probe_reads_the_platform_when_not_given(
    short_tmp: Path, refusing: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _Clock(on_first_sleep=lambda: refusing.listen(1))
    _clock(monkeypatch, clock)
    monkeypatch.setattr(server_module, "sys", SimpleNamespace(platform="darwin"))  # its own
    assert socket_is_live(short_tmp / "d.sock")
    assert len(clock.sleeps) == 1


def test_a_stale_socket_removed_while_the_probe_ran_is_bound_anew(
    short_tmp: Path, refusing: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by the session 23 review: on macOS the probe of a stale socket retries for 1 s;
    # a socket file removed meanwhile (a tmp cleaner, another user's `rm`) made start-up
    # fail "cannot listen on PATH: No such file"; nothing is left to replace, it binds.
    path = short_tmp / "d.sock"
    real_probe = socket_is_live

    def probe_then_removed(probed: Path, timeout: float = 1.0) -> bool:
        live = real_probe(probed, timeout)
        probed.unlink()  # removed by someone else as the probe ends
        return live

    monkeypatch.setattr(server_module, "socket_is_live", probe_then_removed)
    sock, _identity = server_module.bind_socket(path)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(str(path))  # the new daemon's socket listens there
    finally:
        sock.close()
