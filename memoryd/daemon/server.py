"""Binding the socket, one daemon per socket, the status file, signals and draining.

Start-up order: resolve the socket (systemd's LISTEN_FDS or our own path) → refuse if a
live daemon answers there, replace a stale socket file → listen (dir 0700, socket 0600) →
write the status file. Shutdown order mirrors mypy's dmypy: the status file is removed
first (only if it still names us, so a dying daemon never deletes its successor's file),
then listening stops, in-flight requests drain, services close (pending team pushes,
summaries), and the socket file goes (only if it is still the file we bound, checked under
the same lock as start-up's, so a daemon that replaced us while we drained keeps its socket).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import signal
import socket
import stat
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import structlog

from memoryd import PROTOCOL_VERSION, __version__, jsonread
from memoryd.daemon.app import Daemon
from memoryd.daemon.config import DaemonConfig
from memoryd.daemon.limits import CLOSE_GRACE_S, LATE_CLIENT_WINDOW_S, READ_CHUNK
from memoryd.daemon.protocol.connection import Connection, InputBudget
from memoryd.fsutil import (
    atomic_write_text,
    ensure_private_dir,
    flock_within,
    open_lock_file,
    read_regular_file,
    remove_stale_staged,
)
from memoryd.paths import status_file_for
from memoryd_client import paths as client_paths
from memoryd_client.client import socket_path_too_long
from memoryd_client.peercred import peer_uid
from memoryd_client.private_files import folder_problem

log = structlog.get_logger("memoryd.server")

SD_LISTEN_FDS_START = 3


class StartupError(RuntimeError):
    """The daemon cannot take its socket; the message says why."""


class AlreadyRunning(StartupError):
    pass


def socket_is_live(path: Path, timeout: float = 1.0, *, platform: str | None = None) -> bool:
    """Whether a daemon listens at `path`. `platform` is `sys.platform` unless given.

    A full accept backlog (a loop stalled under a burst of clients) is live: Linux says so
    with EAGAIN, macOS with ECONNREFUSED, as it says of a socket nobody listens on. There a
    refused probe is tried again for up to `timeout` seconds, and the socket is stale only if
    refused throughout: taken for stale, a busy daemon's socket file was replaced and the
    daemon ran on unreachable."""
    darwin = (platform or sys.platform) == "darwin"
    deadline = time.monotonic() + timeout
    pause = 0.01  # doubling to 200 ms, as the clients' connect retry
    while True:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.settimeout(timeout)
        try:
            probe.connect(str(path))
        except (BlockingIOError, TimeoutError):
            return True  # someone listens but its backlog is full (Linux)
        except ConnectionRefusedError:
            left = deadline - time.monotonic()
            if not darwin or left <= 0 or not _is_socket(path):
                return False  # nobody listens there (a file that is no socket never will)
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.2)
            continue
        except OSError:  # ENOENT: nothing there
            return False
        finally:
            probe.close()
        return True


def _is_socket(path: Path) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def systemd_socket() -> socket.socket | None:
    """The listening socket handed over by systemd socket activation, if any."""
    if os.environ.get("LISTEN_PID") != str(os.getpid()):
        return None
    try:
        count = int(os.environ.get("LISTEN_FDS", "0"))
    except ValueError:
        return None
    if count < 1:
        return None
    names = os.environ.get("LISTEN_FDNAMES")  # read before it is cleared: the warning below
    for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        os.environ.pop(name, None)  # not inherited by anything we spawn
    fd = SD_LISTEN_FDS_START
    # A unit with `ListenStream=8787` (TCP) or `ListenDatagram=`, or LISTEN_* set by hand:
    # each was a traceback at start-up (ENOTSOCK, or asyncio's ValueError), under systemd in
    # a restart loop.
    unit = "the socket unit (memoryd.socket) must have ListenStream= set to a socket path"
    try:
        sock = socket.socket(fileno=fd)
    except OSError as exc:
        raise StartupError(
            f"LISTEN_FDS={count} names descriptor {fd}, which is no socket "
            f"({exc.strerror or exc}): {unit}"
        ) from exc
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
        kind = f"{sock.family.name} {sock.type.name}"
        sock.detach()  # systemd's descriptor: left open, not ours to close
        raise StartupError(
            f"the socket systemd handed over (descriptor {fd}) is {kind}, not a Unix stream "
            f"socket: {unit}"
        )
    try:
        listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
    except OSError:  # a system that cannot tell: taken as the listening socket it should be
        listening = 1
    if not listening:
        # A unit with `Accept=yes` hands over one client's connection, not the listening
        # socket: asyncio took it for a server, nothing was ever accepted and the daemon
        # (one per client connecting) never answered.
        sock.detach()
        raise StartupError(
            f"the socket systemd handed over (descriptor {fd}) is a connection, not a "
            "listening socket: the socket unit (memoryd.socket) must have Accept=no"
        )
    if count > 1:
        # A unit with two `ListenStream=` lines: descriptor 3 is served, and the clients of
        # the others wait for ever on a socket systemd keeps listening and nobody accepts on.
        log.warning(
            "systemd handed over more than one socket; only the first (descriptor 3) is "
            "served, clients of the others wait for ever: the socket unit (memoryd.socket) "
            "must have one ListenStream= (a drop-in that changes it starts with an empty "
            "`ListenStream=`, which clears the unit's)",
            count=count,
            names=names.split(":") if names else None,
        )
    return sock


def activated_config(config: DaemonConfig, sock: socket.socket) -> DaemonConfig:
    """`config` with the path of the socket systemd handed over when it is not `--socket`'s:
    a socket unit rewritten (another path) but not restarted still listens, and hands over, the
    old one. The daemon serves what it was given, so its status, status file and log name that
    (they named a path where nobody listened, and nothing said so)."""
    try:
        name = sock.getsockname()
    except OSError:
        return config
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    if not isinstance(name, str) or not name or name.startswith("\0"):
        return config  # unnamed or abstract: no file to name
    served = Path(name)
    if served == config.socket_path:
        return config
    with contextlib.suppress(OSError):
        if os.path.samefile(served, config.socket_path):
            return config
    log.warning(
        "systemd handed over a socket on another path than --socket; serving it (the socket "
        "unit changed since it started listening: `systemctl --user restart memoryd.socket`)",
        socket=str(served),
        configured_socket=str(config.socket_path),
    )
    return replace(config, socket_path=served)


def listen_backlog() -> int:
    """The system's maximum accept backlog: a burst of clients (hooks of many sessions starting
    at once) waits in the queue instead of getting EAGAIN. The kernel caps any larger value."""
    try:
        with open("/proc/sys/net/core/somaxconn", encoding="ascii") as handle:
            return max(int(handle.read()), socket.SOMAXCONN)
    except (OSError, ValueError):  # not Linux (macOS: kern.ipc.somaxconn, SOMAXCONN is 128)
        return socket.SOMAXCONN


# Descriptors kept for the daemon's own use (memory files, the watcher, the log, git and
# the worker threads' reads) when the open-files limit caps how many clients may be connected.
FD_RESERVE = 32
_MIN_CONNECTIONS = 8
BUSY_CODE = -32004  # "over a limit" (docs/protocol.md)


def connection_cap() -> int:
    """How many clients may be connected at once: the soft open-files limit (main.py raised it
    to the hard one) less FD_RESERVE, at least _MIN_CONNECTIONS. Past it, accept() would hit
    EMFILE (libuv then closes the client with no word) or the daemon could not open its own
    files (-32603 for the clients it did accept)."""
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return sys.maxsize
    return max(_MIN_CONNECTIONS, soft - FD_RESERVE)


def busy_reply(cap: int) -> bytes:
    """The one line a client past the connection cap gets before it is closed."""
    message = (
        f"memoryd is serving {cap} clients, all its open-files limit leaves room for; "
        "try again, or raise the limit (ulimit -n, LimitNOFILE=) and restart memoryd"
    )
    error = {"code": BUSY_CODE, "message": message}
    return json.dumps({"jsonrpc": "2.0", "error": error, "id": None}).encode() + b"\n"


def check_socket_folder(folder: Path) -> None:
    """Refuse a folder where someone else could swap the socket for their own."""
    problem = folder_problem(folder)
    if problem is not None:
        raise StartupError(f"refusing the socket folder: {problem}; use a folder of your own")


def bind_socket(path: Path) -> tuple[socket.socket, tuple[int, int]]:
    """A listening socket at `path` and the (st_dev, st_ino) of its file; StartupError, one
    line saying what to do, when the system will not give one (a path too long for AF_UNIX, a
    file where its folder goes)."""
    too_long = socket_path_too_long(path)
    if too_long is not None:
        raise StartupError(f"the socket path {path} cannot be used: {too_long}")
    try:
        return _bind(path)
    except StartupError:
        raise
    except OSError as exc:
        hint = runtime_dir_problem(path) or unwritable_socket_folder(path)
        why = f" ({hint})" if hint else ""
        raise StartupError(f"cannot listen on {path}: {exc.strerror or exc}{why}") from exc


def unwritable_socket_folder(path: Path) -> str | None:
    """Which folder refused the socket, its folder or its lock file (the nearest one of
    `path`'s that exists: the socket's own, or the one it was to be made in) and what to do,
    when the user cannot write in it: a folder of theirs made 0500, another user's, a
    read-only mount. The bare "Permission denied" named none of this (an $XDG_RUNTIME_DIR of
    the user's at 0500 passes the socket rule, which checks only that it is private)."""
    folder = path.parent
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    try:
        if os.access(folder, os.W_OK | os.X_OK):
            return None
        info = folder.stat()
        read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return None
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    named = f"XDG_RUNTIME_DIR={runtime}" if runtime and Path(runtime) == folder else str(folder)
    mode = stat.S_IMODE(info.st_mode)
    if read_only:
        why, fix = "it is on a read-only file system", ""
    elif info.st_uid == os.getuid():
        why, fix = f"its mode is {mode:04o}", f"make it writable (`chmod u+w {folder}`), or "
    else:
        why, fix = f"it belongs to uid {info.st_uid}, mode {mode:04o}", ""
    return (
        f"{named} cannot be written by you: {why}; {fix}set MEMORYD_SOCKET or --socket to a "
        "socket in a folder of your own"
    )


def runtime_dir_problem(path: Path) -> str | None:
    """What is wrong with $XDG_RUNTIME_DIR when it chose `path` (no MEMORYD_SOCKET) and is no
    runtime folder of the user's (the XDG spec: owned by the user, mode 0700): missing (the
    login session that made it ended, `su` without a login), another user's, or open to
    others. The bare "Permission denied" named none of this. None when it is fine. The checks
    are the socket rule's own (`memoryd_client.paths.runtime_dir_problem`), so both word a
    folder alike."""
    value = os.environ.get("XDG_RUNTIME_DIR", "")
    if os.environ.get("MEMORYD_SOCKET") or not os.path.isabs(value):
        return None
    if Path(value) not in path.parents:
        return None
    problem = client_paths.runtime_dir_problem(value)
    if problem is None:
        return None
    return (
        f"XDG_RUNTIME_DIR={value}: {problem}; set it to a folder of your own, mode 0700 (a "
        "login session's /run/user/<uid>), or set MEMORYD_SOCKET or --socket"
    )


# How long binding (or removing) the socket file waits for another daemon's: its check, unlink
# and bind take at most a second (a stale socket's probe), so only one stopped mid-way holds
# the lock this long. Well under `memctl start`'s wait (15 s), which then shows this refusal:
# at 30 s it said only "did not become healthy", and the daemon came up after it gave up.
SOCKET_LOCK_WAIT_S = 5.0


@contextlib.contextmanager
def _socket_lock(path: Path) -> Iterator[None]:
    """An exclusive flock on PATH.lock: who may unlink, bind or remove the socket file.
    OSError (EWOULDBLOCK, naming the lock) when another process holds it over
    SOCKET_LOCK_WAIT_S: a blocking flock waited for ever on a daemon stopped with Ctrl-Z."""
    lock = path.with_name(path.name + ".lock")
    lock_fd = open_lock_file(lock)
    try:
        if not flock_within(lock_fd, SOCKET_LOCK_WAIT_S):
            raise OSError(
                errno.EWOULDBLOCK,
                f"another memoryd has held {lock} over {SOCKET_LOCK_WAIT_S:.0f} s (stopped "
                "with Ctrl-Z?): let it go on or end it, or use another --socket",
                str(lock),
            )
        yield
    finally:
        os.close(lock_fd)  # closing releases the lock


def _bind(path: Path) -> tuple[socket.socket, tuple[int, int]]:
    if not path.parent.exists():
        # Only a folder memoryd creates is made 0700; one the user named keeps its mode (the
        # socket itself is 0600 either way).
        ensure_private_dir(path.parent)
    else:
        check_socket_folder(path.parent)
    # Two daemons starting at once must not both see a stale socket, unlink and bind: the
    # check-unlink-bind sequence runs under an exclusive lock next to the socket.
    with _socket_lock(path):
        sock = _bind_locked(path)
        try:
            info = path.lstat()
        except OSError:
            sock.close()
            raise
        return sock, (info.st_dev, info.st_ino)


def remove_socket_file_if_ours(path: Path, identity: tuple[int, int]) -> None:
    """Unlink the socket file only if it is still the one we bound: a daemon started while
    we drained has replaced it with its own (it found ours no longer listening)."""
    try:
        with _socket_lock(path):
            try:
                info = path.lstat()
            except FileNotFoundError:
                return
            if (info.st_dev, info.st_ino) == identity:
                path.unlink()
    except OSError as exc:  # the folder went away, or the lock cannot be opened
        log.warning("socket file not removed", socket=str(path), error=str(exc))


def _bind_locked(path: Path) -> socket.socket:
    if path.exists() or path.is_symlink():
        if socket_is_live(path):
            raise AlreadyRunning(f"a memoryd daemon is already serving {path}")
        try:
            mode: int | None = path.lstat().st_mode
        except FileNotFoundError:
            # Removed by someone else while the probe ran (on macOS it retries for up to 1 s):
            # nothing to replace; start-up failed "cannot listen on PATH: No such file".
            mode = None
        if mode is not None:
            if not (stat.S_ISLNK(mode) or stat.S_ISSOCK(mode)):
                # A mistyped --socket / MEMORYD_SOCKET must not cost the user the file there.
                raise StartupError(f"{path} exists and is not a socket; refusing to replace it")
            log.info("replacing stale socket", socket=str(path))
            with contextlib.suppress(FileNotFoundError):  # the same, between lstat and unlink
                path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        sock.bind(str(path))
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(listen_backlog())
    return sock


STATUS_FILE_MAX_BYTES = 64 * 1024  # ours is a few hundred bytes


def write_status_file(config: DaemonConfig, activated: bool) -> Path:
    path = status_file_for(config.socket_path)
    payload = {
        "pid": os.getpid(),
        "socket": str(config.socket_path),
        "version": __version__,
        "protocol_version": PROTOCOL_VERSION,
        "started_at": time.time(),
        "socket_activated": activated,
        "log_file": str(config.log_file) if config.log_file else None,
    }
    # What a daemon killed while writing it left (kill -9): only this file's temp files.
    remove_stale_staged(path.parent, names=(path.name,))
    atomic_write_text(path, json.dumps(payload) + "\n")
    return path


def remove_status_file_if_ours(config: DaemonConfig) -> None:
    path = status_file_for(config.socket_path)
    try:
        # Not a plain read: a FIFO put in its place would block the shutdown for ever.
        data = jsonread.loads(read_regular_file(path, STATUS_FILE_MAX_BYTES), long_ints="none")
    except (OSError, ValueError):
        # Not ours (damaged, nested too deep, which once stopped the exit before the drain,
        # exit 1 and the socket file left): left for the user.
        return
    if isinstance(data, dict) and data.get("pid") == os.getpid():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


class Server:
    def __init__(self, daemon: Daemon, activated: socket.socket | None = None) -> None:
        self.daemon = daemon
        self._activated = activated  # systemd's socket, when `serve` took it already
        self.config = daemon.config
        self._server: asyncio.AbstractServer | None = None
        self.input_budget: InputBudget | None = None
        # (st_dev, st_ino) of the socket file we bound; None for systemd's socket.
        self._socket_file: tuple[int, int] | None = None
        self.ready = asyncio.Event()
        # The loop time the drain cap ends, set as `stop` begins: a connection handed over
        # after that is answered -32006 per request until then.
        self.stop_deadline: float | None = None
        self._late: set[Connection] = set()  # such connections, being served
        # Every connection's handler, with its writer: `stop` waits for each (aborting what is
        # left past the drain cap), so none is cancelled with the loop.
        self._handlers: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._handlers_done = False  # set once `stop` has: a connection handed over is closed

    async def start(self) -> None:
        sock = self._activated if self._activated is not None else systemd_socket()
        activated = sock is not None
        if sock is None:
            sock, self._socket_file = bind_socket(self.config.socket_path)
        sock.setblocking(False)
        # One budget for the unfinished lines of every connection (limits.py).
        self.input_budget = input_budget = InputBudget(self.config.input_buffer_cap)
        max_connections = connection_cap()

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if self._handlers_done:
                # Accepted just before listening stopped, handed over once the stop had
                # waited for every connection: nothing is left to answer it.
                writer.transport.abort()
                return
            self.daemon.last_activity = time.monotonic()
            raw = writer.get_extra_info("socket")
            uid = peer_uid(raw) if raw is not None else None
            if uid is not None and uid != self.config.allowed_uid:
                log.warning("refused connection from another user", peer_uid=uid)
                self.daemon.counters["refused_peer"] += 1
                writer.close()
                with contextlib.suppress(ConnectionError, OSError):
                    await writer.wait_closed()
                return
            # Late ones (below) count: they hold their descriptors while the stop writes
            # the daemon's own files.
            if len(self.daemon.connections) + len(self._late) >= max_connections:
                # The descriptors left are the daemon's own: this client is told so and
                # closed, those connected are still answered.
                self.daemon.counters["refused_busy"] += 1
                with contextlib.suppress(ConnectionError, OSError):
                    writer.write(busy_reply(max_connections))
                    writer.close()
                    await writer.wait_closed()
                return
            if self.stop_deadline is not None:
                # Accepted just before listening stopped, handed over only now. Served, its
                # requests ran against services being closed; closed unserved, the client
                # saw "memoryd closed the connection" and gave up, where one still queued in
                # systemd's socket is served by the next daemon. Each request it sends is
                # answered STOPPING (the clients send it again on a new connection), and the
                # stop waits for it within the drain cap.
                now = asyncio.get_running_loop().time()
                until = min(self.stop_deadline, now + LATE_CLIENT_WINDOW_S)
                late = Connection(self.daemon, reader, writer, input_budget, until=until)
                self._late.add(late)
                try:
                    await late.serve()
                finally:
                    self._late.discard(late)
                return
            connection = Connection(self.daemon, reader, writer, input_budget)
            self.daemon.connections.add(connection)
            await connection.serve()

        def hand_over(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            # The handler's task is made here, not by asyncio's streams: `stop` must know
            # every handler to wait for it, and Python 3.11's streams log a handler's task
            # that ends cancelled as "Exception in callback ... CancelledError".
            task = asyncio.create_task(on_connect(reader, writer))
            self._handlers[task] = writer
            task.add_done_callback(self._handler_done)

        # asyncio listens again on the socket it is given, with its own default backlog (100)
        # unless told: pass the maximum, for our own socket and for systemd's alike.
        self._server = await asyncio.start_unix_server(
            hand_over, sock=sock, limit=READ_CHUNK, backlog=listen_backlog()
        )
        try:
            write_status_file(self.config, activated)
        except OSError as exc:
            # Advisory (clients reach the daemon by its socket): a full socket folder, which
            # binding the socket did not need room in, must not keep memoryd from starting.
            # A status file a dead daemon left would name its pid: it goes (no room needed).
            status = status_file_for(self.config.socket_path)
            with contextlib.suppress(OSError):
                status.unlink()
            log.warning("status file not written", path=str(status), error=exc.strerror or str(exc))
        log.info(
            "memoryd listening",
            socket=str(self.config.socket_path),
            pid=os.getpid(),
            version=__version__,
            socket_activated=activated,
            model=self.daemon.model.configured,
        )
        self.ready.set()

    def _handler_done(self, task: asyncio.Task[None]) -> None:
        writer = self._handlers.pop(task)
        if task.cancelled():
            writer.transport.abort()  # cancelled before it could close it (the loop's end)
            return
        exc = task.exception()
        if exc is not None:
            log.error("connection handler failed", exc_info=exc)
            writer.transport.abort()

    async def _finish_handlers(self, until: float) -> None:
        """Wait until every connection's handler has ended (those handed over meanwhile too),
        then abort the connections still served at `until` (a loop time) and wait for their
        handlers: one left running was cancelled with the loop. A connection handed over
        after this is closed at once."""
        loop = asyncio.get_running_loop()
        while self._handlers and (left := until - loop.time()) > 0:
            await asyncio.wait(set(self._handlers), timeout=left)
        self._handlers_done = True
        if self._handlers:
            for writer in self._handlers.values():
                writer.transport.abort()
            await asyncio.wait(set(self._handlers), timeout=CLOSE_GRACE_S)

    async def wait_for_shutdown(self) -> None:
        if self.config.idle_timeout_s <= 0:
            await self.daemon.shutdown_requested.wait()
            return
        while not self.daemon.shutdown_requested.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.daemon.shutdown_requested.wait(), timeout=1.0)
            idle = self.idle_seconds()
            if idle is not None and idle > self.config.idle_timeout_s:
                log.info("idle timeout reached", idle_s=round(idle, 1))
                self.daemon.shutdown_requested.set()

    def idle_seconds(self) -> float | None:
        """How long the daemon has been idle, None while it is not: a connection open, a
        request running or a background write running (an extraction, a session summary, a
        MagicDocs update: work a client was told was scheduled). Counted from the last
        request, reply or closed connection (Connection sets it), or from the end of the last
        background write (`Daemon.spawn` sets it): a write that outlived its client was not
        counted, the daemon began to stop under it, and the drain's 30 s cap cancelled a
        longer one. It only reads: a check is no activity."""
        daemon = self.daemon
        if daemon.writers or daemon.connections or daemon.inflight:
            return None
        return time.monotonic() - daemon.last_activity

    async def stop(self) -> None:
        loop = asyncio.get_running_loop()
        self.stop_deadline = stop_deadline = loop.time() + self.config.drain_timeout_s
        remove_status_file_if_ours(self.config)
        if self._server is not None:
            self._server.close()
        # Stop reading: requests already received drain below, nothing new starts against
        # services that are about to close.
        for connection in list(self.daemon.connections):
            connection.stop_reading()
        deadline = time.monotonic() + self.config.drain_timeout_s
        current = asyncio.current_task()
        pending = [t for t in self.daemon.inflight if t is not current]
        if pending:
            log.info("draining in-flight requests", count=len(pending))
            _done, still = await asyncio.wait(pending, timeout=self.config.drain_timeout_s)
            for task in still:
                task.cancel()
        # Background writes a client was told were scheduled (an extraction, a session
        # summary) finish within what is left of the drain cap; a turn queued behind one
        # runs too. Timers and pulls are not waited for.
        while self.daemon.writers and (left := deadline - time.monotonic()) > 0:
            log.info("finishing background writes", count=len(self.daemon.writers))
            await asyncio.wait(set(self.daemon.writers), timeout=left)
        await self.daemon.close_services()
        workers = list(self.daemon.workers)
        for task in workers:
            task.cancel()
        if workers:
            await asyncio.gather(*workers, return_exceptions=True)
        # Replies still queued go out while the drain cap lasts (at least CLOSE_GRACE_S); a
        # client that does not read them is then aborted, not waited for.
        grace = max(deadline - time.monotonic(), CLOSE_GRACE_S)
        connections = list(self.daemon.connections)
        await asyncio.gather(*(c.close(flush_within=grace) for c in connections))
        # Late connections close by the drain cap's end (a client may close them sooner), the
        # others' handlers end as their connections closed above.
        await self._finish_handlers(max(stop_deadline, loop.time()) + CLOSE_GRACE_S)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), timeout=2)
        if self._socket_file is not None:
            remove_socket_file_if_ours(self.config.socket_path, self._socket_file)
        log.info("memoryd stopped")


async def serve(config: DaemonConfig, *, daemon: Daemon | None = None) -> int:
    """Run until SIGTERM, SIGINT, SIGHUP or the `shutdown` method; 0 on a clean exit."""
    try:
        activated = systemd_socket()
    except StartupError as exc:
        log.error(str(exc))
        return 2
    if activated is not None and daemon is None:
        config = activated_config(config, activated)
    daemon = daemon or Daemon(config)
    server = Server(daemon, activated)
    try:
        await server.start()
    except StartupError as exc:
        log.error(str(exc))
        return 2
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []

    def on_signal(sig: signal.Signals) -> None:
        if daemon.shutdown_requested.is_set():
            log.info("already stopping; the drain goes on", signal=sig.name)
        daemon.shutdown_requested.set()

    # SIGHUP (the terminal of a foreground `memoryd` closed) stops it as gracefully as
    # SIGTERM. The handlers stay while the daemon drains: a second signal must not kill it
    # half-way (SIGINT's default raised KeyboardInterrupt and left the socket file behind).
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal, sig)
            installed.append(sig)
    try:
        await daemon.on_start()
        await server.wait_for_shutdown()
    finally:
        try:
            await server.stop()
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
    return 0
