"""The blocking JSON-RPC client over the daemon's Unix socket (NDJSON framing), and its errors.

The asyncio client is in `memoryd_client.aio`, imported only when asked for.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import itertools
import json
import math
import os
import re
import socket
import stat
import sys
import time
from pathlib import Path
from typing import Any, cast

from memoryd_client import paths
from memoryd_client.methods import SyncMethods
from memoryd_client.peercred import peer_pid, peer_uid
from memoryd_client.private_files import folder_problem


class DaemonUnavailable(ConnectionError):
    """Nobody answers on the socket (not started, stopped, or stale)."""


class UntrustedSocket(DaemonUnavailable):
    """The socket, or its folder, belongs to another user: nothing is sent there. A
    DaemonUnavailable (your daemon is not reachable there), which `memctl start` and `status`
    report as it is instead of starting a daemon next to it."""


class ProtocolError(DaemonUnavailable):
    """What answers on the socket does not speak memoryd's JSON-RPC: a reply line that is not
    JSON, a message that is not an object, an error without an integer code. The connection is
    dropped (the next call connects again); memctl reports it like a daemon that is down, with
    this message, not a traceback."""


def bad_reply(socket_path: Path, why: str, text: object) -> ProtocolError:
    shown = text if isinstance(text, bytes) else json.dumps(text, ensure_ascii=False, default=str)
    excerpt = repr(shown[:120]) + (" …" if len(shown) > 120 else "")
    return ProtocolError(
        f"what answers on {socket_path} is not memoryd (its reply {why}): {excerpt}"
    )


def strict_json(text: str | bytes) -> Any:
    """`text` as JSON, which has no NaN or Infinity: json.loads takes them (and 1e999 as inf),
    and what memctl then printed with `--json` no other JSON parser read. ValueError for them,
    and for JSON nested deeper than Python reads (json's RecursionError: every caller needed
    an except of its own, and one without it printed a traceback)."""
    try:
        return json.loads(text, parse_constant=_not_json, parse_float=_finite)
    except RecursionError:
        raise ValueError("it is nested deeper than Python reads") from None


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        raise ValueError(f"{text} is out of range")
    return value


def parse_reply(socket_path: Path, line: bytes) -> Any:
    """One reply line as JSON; ProtocolError for one that is not (or is not UTF-8, or holds
    NaN or Infinity, or nests deeper than Python's recursion limit)."""
    try:
        return strict_json(line)
    except ValueError:  # UnicodeDecodeError is one
        raise bad_reply(socket_path, "is not JSON", line.rstrip(b"\r\n")) from None


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message
        self.data = data


def default_socket_path(platform: str | None = None, *, runtime_dir: Path | None = None) -> Path:
    """The one socket rule, used by the daemon, every client and `memctl service install`.

    $MEMORYD_SOCKET (a leading `~` expanded: the variable is often set where no shell expands
    it, a unit's Environment= or an editor's settings; a relative one taken from the working
    directory and made absolute, as PROTOCOL.md has every path in results: the daemon reports
    it in `status.socket` and its status file); else on macOS ~/Library/Caches/memoryd/memoryd.sock (a LaunchAgent, GUI
    apps and shells all agree on it without setting anything); else $XDG_RUNTIME_DIR when it
    is a runtime folder of the user's (`paths.runtime_dir_problem`; one that is not is passed
    over with a warning on stderr, once a process, as the XDG spec asks), else $XDG_CACHE_HOME
    (when absolute), else a per-user directory in /tmp. `platform` is `sys.platform` unless
    given (to compute another system's path). `runtime_dir`, when given, is the user's runtime
    folder instead of $XDG_RUNTIME_DIR, taken as it is: the one logind gives them, which `memctl
    service status` from su or sudo -u looks in (it may not be there while no manager runs).
    """
    configured = os.environ.get("MEMORYD_SOCKET")
    if configured:
        # `~` is home(), which passes a relative HOME over (expanduser took it). Only `~` and
        # `~/`, as both editors: they cannot look up another user's home, so `~name/m.sock`
        # (expanded here by expanduser) was theirs relative, another socket than the daemon's.
        if configured == "~" or configured.startswith("~/"):
            configured = str(paths.home()) + configured[1:]
        try:
            return Path(configured).absolute()
        except FileNotFoundError:  # os.getcwd() of a deleted folder: it was a traceback
            raise _cwd_gone(f"a relative MEMORYD_SOCKET ({configured})") from None
    if (platform or sys.platform) == "darwin":
        return paths.home() / "Library" / "Caches" / "memoryd" / "memoryd.sock"
    if runtime_dir is not None:
        return runtime_dir / "memoryd" / "memoryd.sock"
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    problem = paths.runtime_dir_problem(runtime) if runtime else None
    if runtime and problem is None:
        return Path(runtime) / "memoryd" / "memoryd.sock"
    base = paths.xdg_dir("XDG_CACHE_HOME")
    if base is not None:
        sock = base / "memoryd" / "memoryd.sock"
    else:
        import tempfile  # only on this fallback path: it is slow to import

        try:
            temp = tempfile.gettempdir()
        except FileNotFoundError:  # os.getcwd(), for a relative TMPDIR
            raise _cwd_gone("a relative TMPDIR, TEMP or TMP") from None
        sock = Path(temp) / f"memoryd-{os.getuid()}" / "memoryd.sock"
    if problem is not None:
        _warn_once(f"XDG_RUNTIME_DIR={runtime} is passed over: {problem}; the socket is {sock}")
    return sock


def _cwd_gone(what: str) -> DaemonUnavailable:
    """Started from a folder that was deleted (a shell left in a removed checkout)."""
    return DaemonUnavailable(
        f"the working directory no longer exists, so {what} cannot be resolved: make it "
        "absolute, or run from a folder that exists"
    )


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    """A warning on stderr, once a process: the rule runs for every client a process makes."""
    if message not in _warned:
        _warned.add(message)
        print(f"memoryd: warning: {message}", file=sys.stderr)


# A daemon whose accept backlog is full (a burst of clients: EAGAIN on Linux, ECONNREFUSED on
# macOS) or that is restarting (its socket not listening yet: ECONNREFUSED) is there in a moment:
# connecting is retried for about this long before the daemon is reported down. A missing socket
# (ENOENT) is not retried: nobody is there, and `memctl` must say so at once.
CONNECT_RETRY_S = 1.0
# The daemon's answer to a request it read whole but did not start before it began to stop
# (docs/protocol.md): nothing was done, so both clients send it again once, on a new connection.
STOPPING = -32006
# The daemon refuses a request line over this (held to its own by a test): a request that
# could not fit is not built, and a line this long is not read whole into memory.
MAX_LINE_BYTES = 64 * 1024 * 1024
_BUSY = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.ECONNREFUSED})
_NOT_LISTENING = frozenset({errno.ECONNREFUSED, errno.ENOTSOCK})


class Connector:
    """Connect attempts to one socket with the retry rule above; the caller does the waiting
    (blocking sleep or asyncio), so both clients share it."""

    def __init__(self, path: Path, budget_s: float) -> None:
        self.path = path
        self._left = budget_s
        self._pause = 0.01  # doubling to 200 ms

    def attempt(self) -> socket.socket | float:
        """A connected non-blocking socket, or the seconds to wait before the next attempt;
        DaemonUnavailable once nobody is there or the budget is spent. A Unix socket connects
        at once or fails at once: the attempt never blocks."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(str(self.path))
        except OSError as exc:
            sock.close()
            too_long = socket_path_too_long(self.path)
            if too_long is not None:
                # Python refuses it before any system call ("AF_UNIX path too long", no errno):
                # said as "not running … start it", which no start could change.
                raise DaemonUnavailable(
                    f"memoryd is not running on {self.path}: {too_long}"
                ) from exc
            # A file that is no socket refuses too (ECONNREFUSED on Linux, ENOTSOCK on some
            # BSDs): no daemon is coming there, and retrying it cost every call a second.
            other = not_a_socket(self.path) if exc.errno in _NOT_LISTENING else None
            if other is not None:
                raise DaemonUnavailable(f"memoryd is not running on {self.path}: {other}") from exc
            if exc.errno not in _BUSY or self._left <= 0:
                raise DaemonUnavailable(
                    f"memoryd is not running on {self.path} ({exc.strerror or exc}); "
                    "start it with `memctl start`"
                ) from exc
            wait = min(self._pause, self._left)
            self._left -= wait
            self._pause = min(self._pause * 2, 0.2)
            return wait
        try:
            check_server(sock, self.path)
        except BaseException:
            sock.close()
            raise
        return sock


def socket_path_max(platform: str | None = None) -> int:
    """The longest path a Unix socket may have, in bytes: sun_path less its closing NUL, 107
    on Linux, 103 on macOS (`platform` is `sys.platform` unless given): the clients' check and
    `memctl service install`'s refusal; the daemon checks the same at its bind."""
    return 103 if (platform or sys.platform) == "darwin" else 107


def socket_path_too_long(path: Path) -> str | None:
    """Why no socket can be at `path` when it is longer than `socket_path_max()`, with what
    to do; None when it is not."""
    size, limit = len(os.fsencode(path)), socket_path_max()
    if size <= limit:
        return None
    return (
        f"its path is {size:,} bytes, over the {limit} a Unix socket's path may have; set "
        "--socket or MEMORYD_SOCKET (or XDG_RUNTIME_DIR) to a shorter one"
    )


def not_a_socket(path: Path) -> str | None:
    """What is at `path` when it is there and no socket (a folder, a regular file, a FIFO),
    said with what to do; None for a socket or nothing at all."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISSOCK(mode):
        return None
    kind = (
        "a folder"
        if stat.S_ISDIR(mode)
        else "a regular file"
        if stat.S_ISREG(mode)
        else "a FIFO"
        if stat.S_ISFIFO(mode)
        else "a special file"
    )
    return (
        f"it is {kind}, not a socket; is --socket or MEMORYD_SOCKET mistyped? (`memctl start` "
        "does not replace it)"
    )


def owned_by_you(uid: int) -> bool:
    """Whether a file of `uid` counts as the user's: their own, or root's."""
    return uid in (os.getuid(), 0)


def check_server(sock: socket.socket, path: Path) -> None:
    """Refuse a daemon that is not the user's own: another local user who made the socket's
    folder first (`/tmp/memoryd-<uid>`, any sticky folder) and listens there would otherwise
    get every prompt a hook sends and answer with text the agent takes as context.

    The folder follows the daemon's own rule (`check_socket_folder`): yours or root's, and not
    writable by others unless sticky. The peer's uid comes from the kernel (SO_PEERCRED,
    LOCAL_PEERCRED), or where it cannot tell, from the socket file's owner."""
    folder = path.parent
    try:
        problem = folder_problem(folder)
    except OSError as exc:
        raise DaemonUnavailable(f"cannot check the socket folder {folder}: {exc}") from exc
    if problem is not None:
        raise UntrustedSocket(
            f"refusing to connect to {path}: {problem}; set MEMORYD_SOCKET or "
            "XDG_RUNTIME_DIR to a folder of your own"
        )
    try:
        uid = peer_uid(sock)
        if uid is None:
            uid = os.stat(path).st_uid
    except OSError as exc:
        raise DaemonUnavailable(f"cannot tell who serves {path}: {exc}") from exc
    if not owned_by_you(uid):
        raise UntrustedSocket(
            f"refusing to connect to {path}: it is served by uid {uid}, not by you "
            f"(uid {os.getuid()}); another user's program is listening there"
        )


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def json_bytes(value: Any) -> bytes:
    """`value` as it goes on the wire: compact JSON in UTF-8.

    Characters go out as UTF-8, not as `\\uXXXX` escapes: escaped, a CJK or emoji transcript
    was two to three times the UTF-8 size its sender measured, and went over the daemon's line
    cap. Half a surrogate pair (a string cut inside an emoji, a file name that is not UTF-8)
    has no UTF-8: it goes out as its escape, `\\ud83d`, which is JSON. NaN and Infinity are
    not JSON: ValueError here, rather than the daemon's -32700 about a line the caller never
    wrote.
    """
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError as exc:
        raise ValueError(f"cannot send it as JSON: {exc} (NaN and Infinity are not JSON)") from None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # only strings hold surrogates, so each escape is inside one
        return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


def encode_line(payload: Any) -> bytes:
    """One request line as sent: `json_bytes` and a newline."""
    return json_bytes(payload) + b"\n"


def _rpc_error(err: Any, socket_path: Path) -> RpcError | ProtocolError:
    """The exception for a JSON-RPC error member (returned, for raising or for a future)."""
    code = err.get("code") if isinstance(err, dict) else None
    if not isinstance(code, int) or isinstance(code, bool):
        return bad_reply(socket_path, "has an error without an integer code", err)
    return RpcError(code, str(err.get("message", "")), err.get("data"))


def _unwrap(reply: Any, socket_path: Path) -> Any:
    if not isinstance(reply, dict):
        raise bad_reply(socket_path, "is not a JSON-RPC object", reply)
    if "error" in reply and reply["error"] is not None:
        raise _rpc_error(reply["error"], socket_path)
    return reply.get("result")


def refusal_in(sock: socket.socket, buffered: bytes, socket_path: Path) -> RpcError | None:
    """The error the daemon sent before it closed a connection that our send then found broken
    (EPIPE, ECONNRESET): a client past its connection cap is told -32004 why, which "connection
    to memoryd lost: Broken pipe" hid. Reads only what already arrived (`buffered`, then the
    socket without blocking); None when that is no error line with `id: null`."""
    data = buffered
    with contextlib.suppress(OSError):
        sock.setblocking(False)
        while b"\n" not in data and (chunk := sock.recv(1 << 16)):
            data += chunk
    try:
        message = json.loads(data.split(b"\n", 1)[0])
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("id") is not None:
        return None
    error = _rpc_error(message.get("error"), socket_path)
    return error if isinstance(error, RpcError) else None


_NOT_SUBSCRIBED = object()  # `subscribe` takes None (every event), so None cannot mean "not"


class Client(SyncMethods):
    """Blocking client: `with Client() as c: c.call("status")`."""

    def __init__(
        self,
        socket_path: Path | str | None = None,
        timeout: float | None = 30.0,
        connect_retry_s: float = CONNECT_RETRY_S,
    ) -> None:
        self.socket_path = Path(socket_path) if socket_path else default_socket_path()
        self.timeout = timeout
        self.connect_retry_s = connect_retry_s
        self._sock: socket.socket | None = None
        self._buffer = b""
        self._ids = itertools.count(1)
        # Notifications read while a call waited for its reply, oldest first. A deque: a flood
        # of thousands was taken one by one, and a list's pop(0) moved all the rest each time.
        self.notifications: collections.deque[dict[str, Any]] = collections.deque()
        # The params of this connection's last accepted `subscribe`, sent again on the
        # connection a STOPPING retry opens, so the retry does not lose the notifications.
        self._subscribed: object = _NOT_SUBSCRIBED

    def connect(self, budget_s: float | None = None) -> Client:
        """Connect, retrying a busy or restarting daemon for `budget_s` seconds (by default
        `connect_retry_s`, never longer than `timeout`)."""
        if budget_s is None:
            budget_s = min(self.connect_retry_s, self.timeout or 1e9)
        connector = Connector(self.socket_path, budget_s)
        self._subscribed = _NOT_SUBSCRIBED  # a new connection has no subscription
        while isinstance(step := connector.attempt(), float):
            time.sleep(step)
        sock = step
        sock.settimeout(self.timeout)
        self._sock = sock
        return self

    def __enter__(self) -> Client:
        return self.connect() if self._sock is None else self

    def peer_pid(self) -> int | None:
        """The pid of the process serving the socket (SO_PEERCRED on Linux, LOCAL_PEERPID on
        macOS; connecting first if need be), None where the platform cannot tell. That is
        whoever called listen(): under socket activation the service manager, or a daemon
        that died since; `memctl` checks it against /proc before it signals anyone."""
        if self._sock is None:
            self.connect()
        assert self._sock is not None
        try:
            return peer_pid(self._sock)
        except OSError:
            return None

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection; the next call connects again."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._buffer = b""  # a partial line of the old connection is not the new one's

    def _lost(self, reason: str) -> DaemonUnavailable:
        # A dead connection is closed, so the next call connects again (a restarted daemon is
        # reached) instead of failing on the old socket for ever.
        self.close()
        return DaemonUnavailable(reason)

    def set_timeout(self, seconds: float | None) -> None:
        """Change how long each later call may take in all (e.g. what is left of a caller's
        budget)."""
        self.timeout = seconds
        if self._sock is not None:
            self._sock.settimeout(seconds)

    def _deadline(self, seconds: float | None) -> float | None:
        return None if seconds is None else time.monotonic() + seconds

    def _arm(self, deadline: float | None) -> None:
        """The socket's timeout set to what is left until `deadline`: a deadline, not a
        timeout per send or recv (a reply dribbling in one byte at a time held a hook with a
        100 ms budget for seconds)."""
        if deadline is None:
            return
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"memoryd did not answer within {self.timeout:.3g} s")
        assert self._sock is not None
        self._sock.settimeout(left)

    def send_line(self, payload: Any, deadline: float | None = None) -> None:
        data = encode_line(payload)  # before connecting: what is not JSON is never sent
        if self._sock is None:
            self.connect()
        assert self._sock is not None
        self._arm(deadline)
        try:
            self._sock.sendall(data)
        except TimeoutError as exc:
            self.close()  # half a line went out: the connection is of no more use
            raise TimeoutError(
                f"memoryd did not take the request within {self.timeout:.3g} s"
            ) from exc
        except OSError as exc:
            refusal = self._refusal()  # the daemon may have said why it closed
            if refusal is not None:
                self.close()
                raise refusal from exc
            raise self._lost(f"connection to memoryd lost: {exc}") from exc

    def _refusal(self) -> RpcError | None:
        assert self._sock is not None
        return refusal_in(self._sock, self._buffer, self.socket_path)

    def read_message(self, deadline: float | None = None) -> Any:
        """The next message; with a `deadline` (a `time.monotonic()` value), TimeoutError once
        it passes, however the bytes arrive."""
        if self._sock is None:
            raise DaemonUnavailable("not connected to memoryd (the connection was lost or closed)")
        while b"\n" not in self._buffer:
            self._arm(deadline)
            try:
                chunk = self._sock.recv(1 << 16)
            except TimeoutError as exc:
                raise TimeoutError(f"memoryd did not answer within {self.timeout:.3g} s") from exc
            except OSError as exc:
                raise self._lost(f"connection to memoryd lost: {exc}") from exc
            if not chunk:
                raise self._lost("memoryd closed the connection")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            return parse_reply(self.socket_path, line)
        except ProtocolError:
            self.close()  # whatever sent it, the rest of that stream is not to be trusted
            raise

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """One request and its reply, within `timeout` seconds in all. A request the daemon
        answers STOPPING (read, not started, before it began to stop) is sent once more, on a
        connection opened within `connect_retry_s` (a daemon restarting, or a service manager
        holding the socket); when none opens, or the second answer is STOPPING too, it is
        raised."""
        deadline = self._deadline(self.timeout)
        try:
            result = self._call_once(method, params, deadline)
        except RpcError as exc:
            if exc.code != STOPPING or not self._reopen_after_stop(deadline):
                raise
            result = self._call_once(method, params, deadline)
        if method == "subscribe":
            self._subscribed = params
        return result

    def _reopen_after_stop(self, deadline: float | None) -> bool:
        """A new connection in place of a stopping daemon's, which serves nothing sent on it
        now (answered STOPPING, or dropped once its close began), with the old one's
        subscription renewed; False when that cannot be had in time (the caller then raises
        the STOPPING error, as before)."""
        subscription = self._subscribed
        self.close()
        left = math.inf if deadline is None else deadline - time.monotonic()
        try:
            self.connect(max(0.0, min(self.connect_retry_s, left)))
            if subscription is not _NOT_SUBSCRIBED:
                self._call_once("subscribe", cast("dict[str, Any] | None", subscription), deadline)
                self._subscribed = subscription
        except (DaemonUnavailable, RpcError, TimeoutError):
            self.close()
            return False
        return True

    def _call_once(self, method: str, params: dict[str, Any] | None, deadline: float | None) -> Any:
        request_id = next(self._ids)
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            request["params"] = params
        try:
            self.send_line(request, deadline)
            while True:
                message = self.read_message(deadline)
                if isinstance(message, dict) and "id" not in message and "method" in message:
                    self.notifications.append(message)
                    continue
                if isinstance(message, dict) and message.get("id") not in (request_id, None):
                    continue
                try:
                    return _unwrap(message, self.socket_path)
                except ProtocolError:
                    self.close()
                    raise
        finally:
            if self._sock is not None and deadline is not None:
                self._sock.settimeout(self.timeout)

    def next_notification(self) -> dict[str, Any]:
        if self.notifications:
            return self.notifications.popleft()
        while True:
            message = self.read_message()
            if isinstance(message, dict) and "id" not in message and "method" in message:
                return message

    def poll_notification(self, wait_s: float = 0.0) -> dict[str, Any] | None:
        """The next notification if one arrives within `wait_s` seconds, else None."""
        if self.notifications:
            return self.notifications.popleft()
        if self._sock is None:
            return None
        deadline = self._deadline(max(wait_s, 0.001))
        try:
            while True:
                try:
                    message = self.read_message(deadline)
                except TimeoutError:
                    return None
                if isinstance(message, dict) and "id" not in message and "method" in message:
                    return message
        finally:
            if self._sock is not None:
                self._sock.settimeout(self.timeout)


def __getattr__(name: str) -> object:
    # AsyncClient lives in memoryd_client.aio so that sync users (memctl, hooks) never pay for
    # importing asyncio; this keeps `from memoryd_client.client import AsyncClient` working.
    if name == "AsyncClient":
        from memoryd_client.aio import AsyncClient

        return AsyncClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
