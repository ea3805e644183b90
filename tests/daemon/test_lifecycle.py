"""The daemon as a real process: one per socket, stale sockets, status file, signals, activation."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.daemon.server import socket_is_live
from memoryd_client import Client, DaemonUnavailable
from tests.conftest import DaemonHandle, daemon_config, start_daemon, stop_daemon
from tests.daemon.conftest import TEST_METHODS
from tests.fakes.full_disk import SmallDisks
from tests.fakes.messages_api import FakeMessagesAPI, gated, text_reply

SECRET = "sk-ant-api03-" + "Z" * 40


def spawn_daemon(
    sock: Path, *extra: str, env: dict[str, str] | None = None, capture: bool = False
) -> subprocess.Popen[str]:
    out = subprocess.PIPE if capture else subprocess.DEVNULL
    return subprocess.Popen(
        [sys.executable, "-m", "memoryd", "--socket", str(sock), *extra],
        stdout=out,
        stderr=out,
        text=True,
        env={**os.environ, **(env or {})},
    )


def wait_healthy(sock: Path, timeout: float = 60) -> dict[str, object]:
    # A daemon's start (the interpreter, its imports) took 10-14 s on a loaded 2-core
    # machine: 15 s failed tests that have nothing to do with how fast it starts.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with Client(sock, timeout=2) as conn:
                return dict(conn.call("status"))
        except (DaemonUnavailable, OSError):
            time.sleep(0.05)
    raise AssertionError(f"daemon on {sock} never became healthy")


def start_healthy(sock: Path, *extra: str, capture: bool = False) -> subprocess.Popen[str]:
    """spawn_daemon, then wait_healthy; a daemon that never became healthy is killed (left
    running, it held its socket and home lock into the tests after)."""
    proc = spawn_daemon(sock, *extra, capture=capture)
    try:
        wait_healthy(sock)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    return proc


def exit_stderr(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    """The stderr of a daemon expected to exit by itself (a refused start: its interpreter and
    imports alone took 10-14 s on a loaded machine); one still running then is killed."""
    try:
        _out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    return err or ""  # None when not captured


def terminated_stderr(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    """SIGTERM, then the daemon's stderr once it exited; killed if it has not by `timeout`."""
    if proc.poll() is None:
        proc.terminate()
    return exit_stderr(proc, timeout)


@pytest.fixture
def running(short_tmp: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    sock = short_tmp / "run" / "d.sock"
    proc = start_healthy(sock)
    yield proc, sock
    terminated_stderr(proc)


def test_a_daemon_whose_health_wait_failed_is_not_left_running(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fixtures spawned a daemon, then waited for it outside any `try`: a wait that failed
    # on a loaded machine left the daemon running, holding its socket and home lock.
    spawned: list[subprocess.Popen[str]] = []
    real_spawn = spawn_daemon

    def spawn(sock: Path, *extra: str, capture: bool = False) -> subprocess.Popen[str]:
        spawned.append(real_spawn(sock, *extra, capture=capture))
        return spawned[-1]

    def never_healthy(sock: Path, timeout: float = 60) -> dict[str, object]:
        raise AssertionError(f"daemon on {sock} never became healthy")

    monkeypatch.setattr(sys.modules[__name__], "spawn_daemon", spawn)
    monkeypatch.setattr(sys.modules[__name__], "wait_healthy", never_healthy)
    with pytest.raises(AssertionError, match="never became healthy"):
        start_healthy(short_tmp / "d.sock")
    (proc,) = spawned
    assert proc.poll() is not None  # stopped before the failure went on


def test_socket_and_status_file_are_private_and_describe_the_daemon(
    running: tuple[subprocess.Popen[str], Path],
) -> None:
    proc, sock = running
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
    status_file = sock.with_name(sock.name + ".status.json")
    info = json.loads(status_file.read_text())
    assert info["pid"] == proc.pid
    assert info["socket"] == str(sock)
    assert info["version"]
    assert info["protocol_version"] >= 1


def test_second_start_on_a_live_socket_refuses(running: tuple[subprocess.Popen[str], Path]) -> None:
    _proc, sock = running
    second = spawn_daemon(sock, capture=True)
    err = exit_stderr(second)
    assert second.returncode == 2
    assert "already serving" in err
    assert wait_healthy(sock)["pid"] == _proc.pid


def test_stale_socket_is_replaced(short_tmp: Path) -> None:
    sock = short_tmp / "d.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(sock))
    stale.close()  # the file stays, nobody listens
    assert sock.exists()
    proc = spawn_daemon(sock)
    try:
        assert wait_healthy(sock)["pid"] == proc.pid
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_socket_whose_accept_backlog_is_full_is_live_not_stale(short_tmp: Path) -> None:
    # Before: its connect's EAGAIN read as "nobody listens", so a second daemon unlinked the
    # busy one's socket file and bound its own, leaving the first running unreachable.
    sock = short_tmp / "d.sock"
    busy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    busy.bind(str(sock))
    busy.listen(0)
    queued: list[socket.socket] = []
    second: subprocess.Popen[str] | None = None
    try:
        while True:  # never accepted: fill the backlog until the kernel refuses one more
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.setblocking(False)
            queued.append(client)
            try:
                client.connect(str(sock))
            except BlockingIOError:
                break
        identity = sock.lstat().st_ino
        second = spawn_daemon(sock, capture=True)
        err = exit_stderr(second)
        assert second.returncode == 2
        assert "already serving" in err
        assert sock.lstat().st_ino == identity
    finally:
        if second is not None and second.poll() is None:  # it took the socket: stop it
            second.kill()
            second.wait(10)
        for client in queued:
            client.close()
        busy.close()


def test_a_file_that_is_not_a_socket_is_never_replaced(short_tmp: Path) -> None:
    # Before: a --socket pointing at an ordinary file took it for a stale socket and deleted it.
    notes = short_tmp / "notes.txt"
    notes.write_text("keep me\n")
    proc = spawn_daemon(notes, capture=True)
    err = exit_stderr(proc)
    assert proc.returncode == 2
    assert "is not a socket" in err
    assert notes.read_text() == "keep me\n"


@pytest.mark.parametrize("where", ["too long", "under a file"])
def test_a_socket_the_system_cannot_give_is_one_line_not_a_traceback(
    short_tmp: Path, where: str
) -> None:
    # Found by a bug hunt: a long HOME or XDG_RUNTIME_DIR gave `OSError: AF_UNIX path too
    # long` as a traceback in the log; a socket folder under a file, NotADirectoryError.
    if where == "too long":
        sock = short_tmp / ("x" * 120) / "memoryd.sock"
        expected = "set --socket or MEMORYD_SOCKET"
    else:
        (short_tmp / "afile").write_text("")
        sock = short_tmp / "afile" / "memoryd.sock"
        expected = "cannot listen on"
    proc = spawn_daemon(sock, capture=True)
    err = exit_stderr(proc)
    assert proc.returncode == 2
    assert expected in err
    assert "Traceback" not in err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signal_exits_zero_and_cleans_up(
    running: tuple[subprocess.Popen[str], Path], sig: signal.Signals
) -> None:
    proc, sock = running
    proc.send_signal(sig)
    assert proc.wait(20) == 0
    assert not sock.exists()
    assert not sock.with_name(sock.name + ".status.json").exists()


def test_a_fifo_in_place_of_the_status_file_does_not_hold_the_exit(
    running: tuple[subprocess.Popen[str], Path],
) -> None:
    # Found by a bug hunt: the exit read the status file to see whether it was its own, and a
    # FIFO put there blocked that read (and the daemon) for ever.
    proc, sock = running
    status_file = sock.with_name(sock.name + ".status.json")
    status_file.unlink()
    os.mkfifo(status_file)
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert stat.S_ISFIFO(status_file.lstat().st_mode)  # not its own: left for the user


@pytest.mark.parametrize("text", ["[" * 20_000, '{"pid": ' + "9" * 5_000 + "}"])
def test_a_status_file_json_cannot_read_does_not_break_the_exit(
    running: tuple[subprocess.Popen[str], Path], text: str
) -> None:
    # A damaged status file nested deeper than json recurses: its RecursionError got out of
    # the exit's check, and the daemon exited 1 without draining or removing its socket file.
    # A pid of more digits than Python converts is none either.
    proc, sock = running
    status_file = sock.with_name(sock.name + ".status.json")
    status_file.write_text(text)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0
    assert not sock.exists()
    assert status_file.read_text() == text  # not its own: left for the user


def test_shutdown_method_exits_zero(running: tuple[subprocess.Popen[str], Path]) -> None:
    proc, sock = running
    with Client(sock) as conn:
        assert conn.call("shutdown") == {"shutting_down": True}
    assert proc.wait(20) == 0
    assert not sock.exists()


async def test_shutdown_drains_in_flight_requests(daemon: DaemonHandle) -> None:
    client = await daemon.client()
    slow = asyncio.create_task(client.call("test.sleep", {"seconds": 0.5}))
    await asyncio.sleep(0.05)
    await daemon.call("shutdown")
    await daemon.server.stop()
    assert (await slow) == {"slept": 0.5}
    await client.close()


def test_systemd_socket_activation(short_tmp: Path) -> None:
    sock_path = short_tmp / "activated.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock_path))
    listener.listen(16)
    fd = listener.fileno()
    # What systemd does: the listening socket as fd 3, LISTEN_PID naming the exec'd process.
    script = (
        f"import os, sys; os.dup2({fd}, 3); "
        "os.environ['LISTEN_PID'] = str(os.getpid()); os.environ['LISTEN_FDS'] = '1'; "
        f"os.execv(sys.executable, [sys.executable, '-m', 'memoryd', '--socket', {str(sock_path)!r}])"
    )
    err = open(short_tmp / "err.txt", "w")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen([sys.executable, "-c", script], pass_fds=(fd,), stderr=err)
    listener.close()
    try:
        try:
            status = wait_healthy(sock_path)
        except AssertionError:
            err.flush()
            raise AssertionError((short_tmp / "err.txt").read_text()) from None
        assert status["pid"] == proc.pid
        info = json.loads(sock_path.with_name(sock_path.name + ".status.json").read_text())
        assert info["socket_activated"] is True
    finally:
        proc.terminate()
        code = proc.wait(20)
        err.close()
    assert code == 0, (short_tmp / "err.txt").read_text()
    assert sock_path.exists()  # systemd owns the socket file, the daemon leaves it


def test_no_secret_reaches_the_log_file(short_tmp: Path) -> None:
    sock = short_tmp / "d.sock"
    log_file = short_tmp / "memoryd.log"
    proc = spawn_daemon(
        sock,
        "--log-file",
        str(log_file),
        "--log-level",
        "debug",
        env={"ANTHROPIC_API_KEY": SECRET, "MEMORYD_TEAM_TOKEN": "tok-" + "q" * 30},
    )
    try:
        wait_healthy(sock)
        with Client(sock) as conn:
            conn.call("settings.get")
    finally:
        proc.terminate()
        proc.wait(20)
    text = log_file.read_text()
    lines = [json.loads(line) for line in text.splitlines()]
    assert any(line["event"] == "memoryd listening" for line in lines)
    assert SECRET not in text
    assert "q" * 30 not in text


async def test_a_worker_cancelled_before_its_first_step_closes_its_coroutine(
    daemon: DaemonHandle,
) -> None:
    async def work() -> None:
        await asyncio.sleep(0)

    coroutine = work()
    task = daemon.daemon.spawn(coroutine, worker="test")
    task.cancel()  # before the loop ran it: the coroutine never started
    await asyncio.gather(task, return_exceptions=True)
    assert coroutine.cr_frame is None  # closed, not left to warn "never awaited"


async def test_a_daemon_that_finishes_draining_leaves_its_successors_socket(
    short_tmp: Path,
) -> None:
    # Found by a bug hunt: daemon A, draining after SIGTERM, unlinked the socket path when it
    # was done, though daemon B had replaced A's (no longer listening) socket meanwhile: B
    # ran on, unreachable. A now removes the file only if it is still the one it bound.
    config = daemon_config(short_tmp)
    first = await start_daemon(config, TEST_METHODS)
    client = await first.client()
    slow = asyncio.create_task(client.call("test.sleep", {"seconds": 1.0}))
    await asyncio.sleep(0.1)
    stopping = asyncio.create_task(first.server.stop())
    # A stops listening at once and drains; its socket file is stale from then on.
    async with asyncio.timeout(5):
        while socket_is_live(config.socket_path):
            await asyncio.sleep(0.02)
    second = await start_daemon(config, TEST_METHODS)
    try:
        assert await asyncio.wait_for(slow, 5) == {"slept": 1.0}
        await asyncio.wait_for(stopping, 15)
        await first._client.close()
        await client.close()
        assert config.socket_path.exists()
        fresh = await asyncio.wait_for(second.client(), 5)
        assert (await asyncio.wait_for(fresh.call("status", {}), 5))["pid"] == os.getpid()
        await fresh.close()
    finally:
        await stop_daemon(second)
    assert not config.socket_path.exists()  # B removes its own


async def test_a_client_that_writes_during_the_drain_still_gets_its_reply(
    daemon: DaemonHandle,
) -> None:
    # Found by a bug hunt: stopping fed the connection's reader EOF, so the next byte the
    # client sent broke the connection ("feed_data after feed_eof") and the reply to its
    # request in flight was lost. Input during the drain is read: each request answered
    # -32006 (session 24; dropped before), an unfinished line dropped at the close.
    reader, writer = await asyncio.open_unix_connection(str(daemon.socket_path))
    writer.write(b'{"jsonrpc":"2.0","id":7,"method":"test.sleep","params":{"seconds":0.5}}\n')
    await writer.drain()
    await asyncio.sleep(0.1)
    stopping = asyncio.create_task(daemon.server.stop())
    await asyncio.sleep(0.05)
    writer.write(b'{"jsonrpc":"2.0","id":8,"method":"status"}\n{"jsonrpc":"2.0","id":9,')
    await writer.drain()
    replies = [json.loads(await asyncio.wait_for(reader.readline(), 5)) for _ in range(2)]
    assert {"jsonrpc": "2.0", "id": 7, "result": {"slept": 0.5}} in replies
    assert [r["error"]["code"] for r in replies if r["id"] == 8] == [-32006]
    await asyncio.wait_for(stopping, 15)
    assert await asyncio.wait_for(reader.read(), 5) == b""  # nothing started after the stop
    writer.close()


async def test_a_client_that_does_not_read_cannot_hold_up_shutdown(short_tmp: Path) -> None:
    # Found by a bug hunt: SIGTERM or `shutdown` waited for ever to close a connection whose
    # client had stopped reading its replies. It waits out the drain cap, then aborts it.
    handle = await start_daemon(daemon_config(short_tmp, drain_timeout_s=1.0))
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.setblocking(False)
    raw.connect(str(handle.socket_path))
    _reader, writer = await asyncio.open_unix_connection(sock=raw)
    writer.write(b'{"jsonrpc":"2.0","id":1,"method":"status"}\n' * 3000)  # never read
    try:
        await asyncio.sleep(0.5)
        # Held for ever before; now the 1 s drain cap, then an abort. 60 s tells them apart
        # on any machine (a bound of 5 s did not on a loaded one).
        await asyncio.wait_for(stop_daemon(handle), 60)
        assert not handle.socket_path.exists()
    finally:
        writer.transport.abort()


async def test_the_idle_timeout_counts_from_the_last_connection_closed(short_tmp: Path) -> None:
    # Found by a bug hunt: the idle clock started when a connection arrived, so a client that
    # stayed (and called) longer than --idle-timeout made the daemon exit the moment it left.
    handle = await start_daemon(daemon_config(short_tmp, idle_timeout_s=2.0))
    await handle._client.close()
    waiting = asyncio.create_task(handle.server.wait_for_shutdown())
    try:
        client = await handle.client()
        # 2.5 s of calls, past the idle timeout: a clock started at the connection has run
        # out by the close, and the daemon checks once a second, so 1.5 s after it tells.
        for _ in range(5):
            await asyncio.wait_for(client.call("status"), 5)
            await asyncio.sleep(0.5)
        await client.close()
        await asyncio.sleep(1.5)
        assert not handle.daemon.shutdown_requested.is_set()
        await asyncio.wait_for(waiting, 5)  # idle 2 s after the close: it does go
    finally:
        waiting.cancel()
        await handle.server.stop()


async def test_a_background_write_running_keeps_the_daemon_from_going_idle(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by a bug hunt: a MagicDocs update (or an extraction) that outlived its client was
    # not counted, so --idle-timeout began the stop under it and the drain's cap cancelled it.
    handle = await start_daemon(daemon_config(short_tmp, idle_timeout_s=1.0))
    await handle._client.close()
    checks = 0
    idle_seconds = handle.server.idle_seconds

    def counted() -> float | None:
        nonlocal checks
        checks += 1
        return idle_seconds()

    monkeypatch.setattr(handle.server, "idle_seconds", counted)
    release = asyncio.Event()
    writer = handle.daemon.spawn(release.wait(), worker="test_writer", writes=True)
    waiting = asyncio.create_task(handle.server.wait_for_shutdown())
    try:
        async with asyncio.timeout(30):
            while handle.daemon.connections:  # the handle's own client has gone
                await asyncio.sleep(0.05)
            handle.daemon.last_activity = time.monotonic() - 1_000  # long past the timeout
            start = checks
            while checks < start + 2 and not handle.daemon.shutdown_requested.is_set():
                await asyncio.sleep(0.05)
        assert not handle.daemon.shutdown_requested.is_set()
        release.set()
        await writer
        await asyncio.wait_for(waiting, 30)  # idle once the write is done: it does go
    finally:
        release.set()
        waiting.cancel()
        await handle.server.stop()


async def test_reading_the_idle_time_does_not_change_it_and_a_write_counts_from_its_end(
    short_tmp: Path,
) -> None:
    # Found by the session 23 review: idle_seconds() moved last_activity each time it was
    # asked while a background write ran (a reader that writes: `status` or a test asking
    # would have reset the idle clock). The write's end now sets it, once.
    handle = await start_daemon(daemon_config(short_tmp, idle_timeout_s=1.0))
    await handle._client.close()
    release = asyncio.Event()
    try:
        async with asyncio.timeout(30):
            while handle.daemon.connections:  # the handle's own client has gone
                await asyncio.sleep(0.05)
        writer = handle.daemon.spawn(release.wait(), worker="test_writer", writes=True)
        await asyncio.sleep(0)  # running
        handle.daemon.last_activity = before = time.monotonic() - 1_000
        assert handle.server.idle_seconds() is None  # not idle while it writes
        assert handle.daemon.last_activity == before
        ended = time.monotonic()
        release.set()
        await writer
        assert handle.daemon.last_activity >= ended  # idle from the write's end
        idle = handle.server.idle_seconds()
        assert idle is not None
        assert idle < 1_000
    finally:
        release.set()
        await handle.server.stop()


class _StderrLines:
    """A daemon's stderr read as it comes: an event for the first line holding each text
    (also set at EOF, so a daemon that died wakes whoever waits), and the whole text."""

    def __init__(self, proc: subprocess.Popen[str], *texts: str) -> None:
        self.seen = {text: threading.Event() for text in texts}
        self._lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self._lines.append(line)
            for text, event in self.seen.items():
                if text in line:
                    event.set()
        proc.stderr.close()
        for event in self.seen.values():
            event.set()

    def wait(self, text: str) -> None:
        assert self.seen[text].wait(30), f"no {text!r} within 30 s: {self.text()}"

    def text(self) -> str:
        self._thread.join(30)
        return "".join(self._lines)


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT])
def test_a_second_signal_during_the_drain_does_not_cut_it_short(
    short_tmp: Path, fake_model: FakeMessagesAPI, second: signal.Signals
) -> None:
    # Found by a bug hunt: the handlers were removed before the drain, so a second SIGTERM
    # killed the daemon at once, a second SIGINT with a traceback, and the socket file stayed.
    fake_model.handler = lambda _body: text_reply(
        '{"type": "user", "name": "warm", "description": "d"}'
    )
    project = short_tmp / "proj"
    project.mkdir()
    sock = short_tmp / "d.sock"
    env = {
        "ANTHROPIC_BASE_URL": fake_model.base_url,
        "ANTHROPIC_API_KEY": "sk-test",
        "MEMORYD_MODEL_RETRIES": "0",
    }
    proc = spawn_daemon(sock, "--no-watch", env=env, capture=True)
    stderr = _StderrLines(proc, "draining in-flight requests", "already stopping")
    # The model's reply waits for the second signal's effect: no guess of how long it takes.
    answer = threading.Event()
    try:
        wait_healthy(sock)
        with Client(sock, timeout=30) as conn:  # the first model call imports the SDK
            conn.call("memory.remember", {"cwd": str(project), "text": "warm up"})
        fake_model.handler = lambda _body: gated(
            answer, text_reply('{"type": "user", "name": "bazel", "description": "d"}')
        )
        asked = len(fake_model.requests)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
            raw.settimeout(30)
            raw.connect(str(sock))
            raw.sendall(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": 5,
                        "method": "memory.remember",
                        "params": {"cwd": str(project), "text": "the build uses bazel"},
                    }
                ).encode()
                + b"\n"
            )
            deadline = time.monotonic() + 30
            while len(fake_model.requests) == asked:  # the request waits on the model
                assert time.monotonic() < deadline, "the remember never asked the model"
                time.sleep(0.01)
            proc.send_signal(signal.SIGTERM)
            stderr.wait("draining in-flight requests")  # the drain is under way
            proc.send_signal(second)
            stderr.wait("already stopping")  # or the daemon died of it
            answer.set()
            reply = json.loads(raw.makefile("rb").readline())
        assert reply["id"] == 5
        assert "result" in reply
        proc.wait(30)
    finally:
        answer.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        assert proc.stdout is not None
        proc.stdout.close()
    err = stderr.text()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "already stopping" in err
    assert not sock.exists()


@pytest.mark.parametrize("where", ["a folder", "under a file"])
def test_a_log_file_that_cannot_be_opened_is_one_line_not_a_traceback(
    short_tmp: Path, where: str
) -> None:
    (short_tmp / "afile").write_text("")
    log_file = short_tmp if where == "a folder" else short_tmp / "afile" / "memoryd.log"
    proc = spawn_daemon(short_tmp / "d.sock", "--log-file", str(log_file), capture=True)
    err = exit_stderr(proc)
    assert proc.returncode == 2
    assert "Traceback" not in err
    assert err.strip().splitlines() == [err.strip()]
    assert f"cannot write the log file {log_file}" in err
    assert not (short_tmp / "d.sock").exists()


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("MEMORYD_MODEL_RETRIES", "three", "MEMORYD_MODEL_RETRIES='three' is not a whole number"),
        ("MEMORYD_MODEL_RETRIES", "-1", "MEMORYD_MODEL_RETRIES='-1' must be 0 or more"),
        ("MEMORYD_TEAM_DEBOUNCE", "2s", "MEMORYD_TEAM_DEBOUNCE='2s' is not a number of seconds"),
        ("MEMORYD_MODEL_TIMEOUT", "0", "MEMORYD_MODEL_TIMEOUT='0' must be a finite number"),
        ("MEMORYD_MODEL_RETRY_DELAY", "nan", "MEMORYD_MODEL_RETRY_DELAY='nan' must be a finite"),
        # Out of range, found by a bug hunt: taken, a debounce of 1e300 s never pushed, and
        # a rate limit was retried without end.
        ("MEMORYD_TEAM_DEBOUNCE", "1e300", "MEMORYD_TEAM_DEBOUNCE='1e300' must be at most 3600"),
        ("MEMORYD_MODEL_RETRIES", "99999999999", "MEMORYD_MODEL_RETRIES='99999999999' must be at"),
        ("MEMORYD_MODEL_TIMEOUT", "86400", "MEMORYD_MODEL_TIMEOUT='86400' must be at most 3600"),
        ("MEMORYD_MODEL_RETRY_DELAY", "601", "MEMORYD_MODEL_RETRY_DELAY='601' must be at most 600"),
    ],
)
def test_a_mistyped_number_in_the_environment_is_one_line_not_a_traceback(
    short_tmp: Path, name: str, value: str, expected: str
) -> None:
    # Found by a bug hunt: int()/float() of the variable raised at start-up, a traceback
    # and exit 1, team sync on or off; a service restarted it in a loop.
    proc = spawn_daemon(short_tmp / "d.sock", env={name: value}, capture=True)
    err = exit_stderr(proc)  # one that started, taking the value, is killed
    assert proc.returncode == 2
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith(f"memoryd: {expected}")
    assert not (short_tmp / "d.sock").exists()


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "soon"])
def test_idle_timeout_takes_a_finite_number_of_seconds(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from memoryd.daemon.main import parse_args

    with pytest.raises(SystemExit) as exited:
        parse_args(["--idle-timeout", value])
    assert exited.value.code == 2
    assert "--idle-timeout" in capsys.readouterr().err


def test_a_status_file_that_cannot_be_written_does_not_stop_the_start(short_tmp: Path) -> None:
    # Found by a bug hunt: the advisory status file's write failure was fatal, a traceback at
    # start-up (under socket activation a crash loop), though the socket was bound.
    sock = short_tmp / "d.sock"
    status_file = sock.with_name(sock.name + ".status.json")
    status_file.mkdir()  # what no rename can replace: a real OSError, no root needed
    proc = spawn_daemon(sock, capture=True)
    try:
        assert wait_healthy(sock)["pid"] == proc.pid
    finally:
        err = terminated_stderr(proc)
    assert "Traceback" not in err
    assert "status file not written" in err


def test_a_full_socket_folder_does_not_stop_the_start(
    short_tmp: Path, small_disks: SmallDisks
) -> None:
    # Binding a socket needs no room on the disk; the status file's write hit ENOSPC.
    folder = small_disks.mount(short_tmp / "run", kib=8)
    small_disks.fill(folder)
    sock = folder / "d.sock"
    proc = spawn_daemon(sock, capture=True)
    try:
        assert wait_healthy(sock)["pid"] == proc.pid
    finally:
        err = terminated_stderr(proc)
    assert "No space left on device" in err
    assert "Traceback" not in err
