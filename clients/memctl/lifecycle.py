"""Finding, starting and stopping the background daemon through its status file."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeGuard

from memctl.files import read_json_object
from memctl.output import UsageError
from memoryd_client import (
    Client,
    DaemonUnavailable,
    ProtocolError,
    RpcError,
    UntrustedSocket,
    default_socket_path,
    paths,
)
from memoryd_client.client import CONNECT_RETRY_S, bad_reply, owned_by_you, strict_json
from memoryd_client.flocks import flock_within
from memoryd_client.paths import socket_name_problem
from memoryd_client.private_dirs import make_private_dirs
from memoryd_client.private_files import (
    UnsafeFolder,
    folder_problem,
    open_owner_rw,
    open_private_log,
)
from memoryd_client.processes import process_state

# The daemon's answer to a client past its connection cap (docs/protocol.md, -32004).
BUSY = -32004

# How long `stop` gives the daemon to finish its work (its own drain is capped at 30 s), and
# then after SIGTERM.
STOP_WAIT_S = 30.0
TERM_WAIT_S = 5.0
# How long `start` waits for the daemon to answer.
START_WAIT_S = 15.0
# How long `status`, `start` and `stop` wait for a daemon that accepts the connection to answer
# before they call it hung (or stopped); `MEMORYD_ANSWER_TIMEOUT` (seconds) sets it, so a test
# of a hung daemon need not wait the whole 5 s out.
ANSWER_TIMEOUT_S = 5.0
ANSWER_TIMEOUT_ENV = "MEMORYD_ANSWER_TIMEOUT"


def answer_timeout_s() -> float:
    """`ANSWER_TIMEOUT_S`, or `$MEMORYD_ANSWER_TIMEOUT` when set: a number of seconds above 0
    and at most 600; any other value is a `UsageError` (said in one line, exit 2)."""
    text = os.environ.get(ANSWER_TIMEOUT_ENV, "").strip()
    if not text:
        return ANSWER_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 600:  # NaN fails this too
        raise UsageError(
            f"{ANSWER_TIMEOUT_ENV}={text!r} is not a number of seconds above 0 and at most 600"
        )
    return value


def socket_path(arg: Path | None) -> Path:
    """`--socket` made absolute (its `~` was expanded as it was parsed), else the socket rule's."""
    if not arg:
        return named_socket(default_socket_path())
    try:
        return named_socket(arg.absolute())
    except FileNotFoundError:  # os.getcwd() of a deleted folder: it was a traceback
        raise DaemonUnavailable(
            f"the working directory no longer exists, so a relative --socket ({arg}) cannot "
            "be resolved: make it absolute, or run from a folder that exists"
        ) from None


def named_socket(sock: Path) -> Path:
    """`sock`, when it has a name; UsageError for the root folder (`--socket /`,
    `MEMORYD_SOCKET=/`) or `DIR/..`, beside which no status file, lock or log can be named:
    `status`, `stop`, `start` and `service status` were a ValueError traceback for `/`."""
    problem = socket_name_problem(sock)
    if problem is not None:
        raise UsageError(problem)
    return sock


def status_file(sock: Path) -> Path:
    return sock.with_name(sock.name + ".status.json")


# The daemon's status file holds a few short fields; more than this is not its.
_STATUS_FILE_CAP = 64 * 1024


def read_status_file(sock: Path) -> dict[str, Any] | None:
    """The status file's fields, or None. Only a regular file is read, and only so much: a
    FIFO in its place (opened without O_NONBLOCK) hung `memctl stop` for ever."""
    return read_json_object(status_file(sock), _STATUS_FILE_CAP)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie has exited, only not been reaped yet by its parent.
    return process_state(pid) != "Z"


def suspended(pid: int) -> bool:
    """Is it stopped by a signal (SIGSTOP, Ctrl-Z in its terminal), or by a tracer (a
    debugger, strace: state `t` since Linux 2.6.33)? Linux; elsewhere: no."""
    return process_state(pid) in ("T", "t")


def tracer_pid(pid: int) -> int | None:
    """The pid of the debugger or tracer attached to `pid` (Linux), None when there is none."""
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"TracerPid:"):
                    found = int(line.split()[1])
                    return found or None
    except (OSError, ValueError, IndexError):
        pass
    return None


def query_status(sock: Path, timeout: float | None = None) -> dict[str, Any] | None:
    """The daemon's `status`, or None when nobody healthy answers (a hung daemon included, and
    a program that is not memoryd)."""
    try:
        return ask_status(sock, timeout)
    except (TimeoutError, ProtocolError):
        return None


def ask_status(
    sock: Path, timeout: float | None = None, connect_retry_s: float = CONNECT_RETRY_S
) -> dict[str, Any] | None:
    """The daemon's `status`; None when nobody listens or the reply is unusable; TimeoutError
    when something accepts the connection but does not answer (a hung daemon is not absent);
    UntrustedSocket when another user's program listens there (nothing to start next to it);
    ProtocolError when what answers is not memoryd (`status` said "not running", and `start`
    spawned a daemon that exited "already serving"). `timeout`: `answer_timeout_s()`.
    `connect_retry_s`: how long a socket that refuses is retried (the client's rule)."""
    if timeout is None:
        timeout = answer_timeout_s()
    try:
        with Client(sock, timeout=timeout, connect_retry_s=connect_retry_s) as conn:
            result = conn.call("status")
    except (TimeoutError, UntrustedSocket, ProtocolError):
        raise
    except RpcError as exc:
        if exc.code == BUSY:
            # A daemon at its connection cap is running: say its reason, start no second one.
            raise
        return None
    except (DaemonUnavailable, OSError, ValueError):
        return None
    if not isinstance(result, dict):
        raise bad_reply(sock, "to status is not a JSON object", result)
    return result


def status_or_file(sock: Path, timeout: float = 2.0) -> tuple[dict[str, Any] | None, str | None]:
    """(the daemon's `status` or None, None); from a daemon at its connection cap, which answers
    nothing but why, (its status file, where its pid is, or None; that why)."""
    try:
        return query_status(sock, timeout), None
    except RpcError as exc:
        if exc.code != BUSY:
            raise
        return read_status_file(sock), exc.message


def start(
    sock: Path, wait_s: float = START_WAIT_S, extra_args: list[str] | None = None
) -> dict[str, Any]:
    """Start a background daemon unless a healthy one answers. Returns its status."""
    running = _running(sock, connect_retry_s(sock))
    if running is not None:
        return {"started": False, **running}
    log_file = sock.with_name("memoryd.log")
    try:
        make_private_dirs(sock.parent)
        log_fd = open_private_log(log_file)  # checks the folder before anything is written
    except UnsafeFolder as exc:
        # Another user who made the /tmp/memoryd-<uid> fallback first could have put
        # `memoryd.log` there as a link to a file of yours: that is no socket folder either.
        raise UntrustedSocket(
            f"refusing to start memoryd at {sock}: {exc.problem}; set MEMORYD_SOCKET or "
            "XDG_RUNTIME_DIR to a folder of your own"
        ) from exc
    except OSError as exc:
        # Which file: "Is a directory" (a folder named memoryd.log), "File exists" (a file
        # where the socket's folder goes) named neither.
        where = f"{exc.filename}: " if exc.filename else ""
        why = "not a folder" if isinstance(exc, FileExistsError) else exc.strerror or str(exc)
        raise RuntimeError(f"cannot start memoryd at {sock}: {where}{why}") from exc
    with _one_at_a_time(sock, wait_s, create=True):
        # Another `memctl start` may have started it while this one waited for its turn: it
        # released the lock only once its daemon answered, so a socket that refuses now is not
        # about to listen (not retried).
        try:
            running = _running(sock, connect_retry_s=0.0)
        except BaseException:
            os.close(log_fd)
            raise
        if running is not None:
            os.close(log_fd)
            return {"started": False, **running}
        return _spawn(sock, log_file, log_fd, wait_s, extra_args)


def connect_retry_s(sock: Path) -> float:
    """How long `start`, `stop` and `status` retry a socket that refuses: the client's rule
    (a daemon restarting, a full backlog), but not at all when the status file names a daemon
    process that is gone (kill -9, a crash): its socket file is left, refusing, and each of
    them waited the retry out for nothing (`start` twice). Where memoryd's LaunchAgent is
    installed, launchd starts a crashed daemon again at once, and the new one takes about a
    second to listen: the retry finds it (without, `start` spawned a second daemon beside it)."""
    return _retry_for(read_status_file(sock))


def _retry_for(info: dict[str, Any] | None) -> float:
    """`connect_retry_s` for the status file's fields `info`, read already."""
    pid = info.get("pid") if info else None
    dead = is_pid(pid) and not pid_alive(pid)
    return 0.0 if dead and not _launch_agent_installed() else CONNECT_RETRY_S


def _launch_agent_installed() -> bool:
    """macOS only: a plist in ~/Library/LaunchAgents elsewhere (`service install --manager
    launchd` on Linux writes it, launchctl absent) relaunches nothing, and kept the retry."""
    from memctl.service_units import LAUNCHD_LABEL

    return (
        sys.platform == "darwin"
        and (paths.home() / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist").exists()
    )


def _running(sock: Path, connect_retry_s: float) -> dict[str, Any] | None:
    """The status of the daemon on `sock`, or None. One that accepts and does not answer is
    there all the same: a second one would only exit, "already serving" (after 12 s)."""
    timeout = answer_timeout_s()
    try:
        return ask_status(sock, timeout, connect_retry_s)
    except TimeoutError:
        raise TimeoutError(
            f"memoryd on {sock} accepts connections but did not answer within {timeout:.3g} s "
            "(hung, or stopped by SIGSTOP): no second one was started; `memctl stop` ends it"
        ) from None


def _spawn(
    sock: Path, log_file: Path, log_fd: int, wait_s: float, extra_args: list[str] | None
) -> dict[str, Any]:
    command = [
        os.environ.get("MEMORYD_PYTHON", sys.executable),
        "-m",
        "memoryd",
        "--socket",
        str(sock),
        "--log-file",
        str(log_file),
        *(extra_args or []),
    ]
    import subprocess  # only `start` spawns; the other commands stay quick to import

    with open(os.devnull, "rb") as devnull_in, open(log_fd, "ab") as err:
        process = subprocess.Popen(
            command, stdin=devnull_in, stdout=err, stderr=err, start_new_session=True
        )
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        status = query_status(sock, timeout=2.0)
        if status is not None:
            return {"started": True, **status}
        code = process.poll()
        if code is not None:
            why = _last_logged_event(log_file)
            raise RuntimeError(
                f"memoryd exited with code {code} during start-up"
                + (f": {why}" if why else "")
                + f"; see {log_file}"
            )
        time.sleep(0.05)
    raise TimeoutError(f"memoryd did not become healthy within {wait_s:.0f}s; see {log_file}")


def start_lock(sock: Path) -> Path:
    return sock.with_name(sock.name + ".start.lock")


@contextlib.contextmanager
def _one_at_a_time(sock: Path, wait_s: float, *, create: bool) -> Iterator[None]:
    """Hold the socket's start lock (`flock`), waiting up to `wait_s` for a `start` that holds
    it: two `memctl start` at once each spawned a daemon, and both said "started"; the one
    that lost the socket could still be starting when the other was stopped, and took its
    place. `stop` waits too, so it stops a daemon still starting, rather than saying "not
    running" of it. Without the lock by then (a start hung elsewhere), it goes on unlocked.
    `create`: make the lock file (start); else only an existing one is taken (stop makes
    nothing). A lock file of another user's is refused at once (UntrustedSocket): its holder
    is their `memctl start`, waited for 15 s in vain. A file system without locks (ENOLCK: NFS
    without its lock service) fails `start` with what to do (the daemon takes a lock there
    too, and could not start); `stop` goes on unlocked, as no start can hold it either."""
    fd = _open_start_lock(sock, create)
    try:
        if fd is not None:
            try:
                flock_within(fd, wait_s)  # not taken by then: it goes on unlocked
            except OSError as exc:  # not BlockingIOError (waited for): ENOLCK and the like
                if create:
                    raise RuntimeError(
                        f"cannot lock {start_lock(sock)}: {exc.strerror or exc} (a network "
                        "file system without locks?); memoryd locks files beside its socket: "
                        "set MEMORYD_SOCKET to a path on a local file system (under /tmp or "
                        "$XDG_RUNTIME_DIR)"
                    ) from exc
        yield
    finally:
        if fd is not None:
            os.close(fd)  # and with it the lock


def _open_start_lock(sock: Path, create: bool) -> int | None:
    """The start lock's descriptor; None with no lock file (nothing ever started here) or
    none to be had (then memctl goes on as before there was one). UntrustedSocket when the
    lock file is another user's."""
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW
    lock = start_lock(sock)
    try:
        if folder_problem(sock.parent) is not None:
            return None  # another user's lock there could hold memctl up
        owner: int | None = os.lstat(lock).st_uid
    except FileNotFoundError:
        owner = None
    except OSError:
        return None
    if owner is not None:
        _refuse_theirs(sock, owner)  # (an UntrustedSocket is an OSError: not in the try)
    try:
        fd = open_owner_rw(lock, flags) if create else os.open(lock, flags)
    except OSError:
        return None
    try:
        _refuse_theirs(sock, os.fstat(fd).st_uid)  # made by them since the lstat
    except BaseException:
        os.close(fd)
        raise
    return fd


def _refuse_theirs(sock: Path, uid: int) -> None:
    # Root's counts as the user's, as a socket of root's does (`check_server`).
    if not owned_by_you(uid):
        raise UntrustedSocket(
            f"refusing {sock}: its start lock {start_lock(sock)} belongs to uid {uid}, not to "
            f"you (uid {os.getuid()}); another user uses this socket path: set MEMORYD_SOCKET "
            "or XDG_RUNTIME_DIR to a folder of your own"
        )


def _last_logged_event(log_file: Path) -> str | None:
    """The daemon's one-line reason for stopping: the last JSON log line's event."""
    try:
        with open(log_file, "rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - 4096))
            lines = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        # A refusal made before logging is set up (a mistyped MEMORYD_* number) is a plain
        # `memoryd: …` line on stderr, which memctl sends to the log too.
        if line.startswith("memoryd: "):
            return line.removeprefix("memoryd: ").strip()
        try:
            event = strict_json(line).get("event")
        except (ValueError, AttributeError):
            continue
        if isinstance(event, str):
            return event
    return None


_LAUNCHD_PID = re.compile(r"^\s*pid = (\d+)\s*$", re.MULTILINE)


def launchd_job(sock: Path) -> list[str] | None:
    """`[launchctl, gui/<uid>/<label>]` when the daemon answering on `sock` is the process of
    memoryd's LaunchAgent (launchd says so, by its pid), else None."""
    import shutil

    launchctl = shutil.which("launchctl")
    if launchctl is None:
        return None
    # At its connection cap its pid is in its status file (`restart` ended in the -32004 here,
    # before stopping anything).
    running, _refused = status_or_file(sock)
    if running is None:
        return None
    import subprocess

    from memctl.service_units import launchd_target  # `memctl service install`'s agent

    target = launchd_target()
    try:
        shown = subprocess.run(
            [launchctl, "print", target], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = _LAUNCHD_PID.search(shown.stdout) if shown.returncode == 0 else None
    if found is None or int(found.group(1)) != running.get("pid"):
        return None
    return [launchctl, target]


def kickstart(
    job: list[str], sock: Path, old_pid: int | None, wait_s: float = 15.0
) -> dict[str, Any]:
    """Have launchd start the job again (it does not restart a clean exit) and wait for it."""
    import subprocess

    launchctl, target = job
    done = subprocess.run(
        [launchctl, "kickstart", target], capture_output=True, text=True, timeout=30, check=False
    )
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip()
        raise RuntimeError(
            f"memoryd stopped, but `launchctl kickstart {target}` failed"
            + (f": {why}" if why else "")
        )
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        status = query_status(sock, timeout=2.0)
        if status is not None and status.get("pid") != old_pid:
            return status
        time.sleep(0.05)
    raise RuntimeError(f"launchd did not start memoryd again within {wait_s:.0f}s on {sock}")


def stop(
    sock: Path, wait_s: float = STOP_WAIT_S, term_wait_s: float = TERM_WAIT_S
) -> dict[str, Any]:
    """Ask the daemon to shut down and wait for its process to go: `wait_s` to finish its work,
    then SIGTERM and `term_wait_s` more. A daemon that could not take the request (at its
    connection cap, or not answering) gets SIGTERM, the same request, at once and the whole
    wait. `stopped` is whether its process is gone (a hung daemon is not). Only a pid that
    serves the socket (`serving_pid`) is waited for or signalled: a status file left by a
    daemon that died may name anyone's process by now. `refused` (its reason) when the daemon
    is at its connection cap and no such pid is known (`status_pid`: the file's, not trusted)."""
    # A `memctl start` under way ends first: its daemon is then stopped, not said absent.
    with _one_at_a_time(sock, START_WAIT_S, create=False):
        return _stop(sock, wait_s, term_wait_s)


def _stop(sock: Path, wait_s: float, term_wait_s: float) -> dict[str, Any]:
    started = time.monotonic()
    info = read_status_file(sock)
    named = info.get("pid") if info else None
    # Checked before the request: a daemon told to stop closes its listening socket at once.
    pid = named if is_pid(named) and serving_pid(sock, named) else None
    frozen = _suspended_server(sock, pid)
    if frozen is not None:
        # Stopped by SIGSTOP or held by a tracer, it would not answer the request: the
        # answer's whole timeout was waited out first. SIGTERM (then SIGCONT) asks the same.
        _terminate(frozen)
        _wait_gone(frozen, wait_s + term_wait_s)
        waited = round(time.monotonic() - started, 1)
        return {
            "stopped": not pid_alive(frozen),
            "pid": frozen,
            "waited_s": waited,
            "suspended": True,
        }
    asked = False
    refused: str | None = None
    try:
        # The status file read above decides the retry: not read a second time.
        with Client(sock, timeout=answer_timeout_s(), connect_retry_s=_retry_for(info)) as conn:
            if pid is None:
                pid = _own_pid(conn, sock)
            conn.call("shutdown")
            asked = True
    except UntrustedSocket:
        raise
    except RpcError as exc:
        if exc.code == BUSY:
            refused = exc.message
    except (DaemonUnavailable, TimeoutError, OSError):
        pass
    if pid is None:
        if refused is None:
            return {"stopped": asked, "pid": None}
        # Running (it said why it refused), but no pid known to signal.
        return {"stopped": False, "pid": None, "refused": refused, "status_pid": named}
    if asked:
        _wait_gone(pid, wait_s)
        if pid_alive(pid):
            _terminate(pid)
            _wait_gone(pid, term_wait_s)
    else:
        _terminate(pid)
        _wait_gone(pid, wait_s + term_wait_s)
    # Not `asked`: a daemon that answered "shutting down" and then hung is still running.
    waited = round(time.monotonic() - started, 1)
    return {"stopped": not pid_alive(pid), "pid": pid, "waited_s": waited}


def _suspended_server(sock: Path, pid: int | None) -> int | None:
    """The pid serving `sock` when its process is stopped (SIGSTOP, Ctrl-Z, a tracer), else
    None. With no pid from the status file, the socket's listening peer (the kernel answers
    for a stopped process), if it serves the socket."""
    if pid is None:
        peer = listener_pid(sock)
        if not (is_pid(peer) and suspended(peer) and serving_pid(sock, peer)):
            return None
        pid = peer
    return pid if suspended(pid) else None


def _own_pid(conn: Client, sock: Path) -> int | None:
    """No status file, or a stale one: the pid the daemon says is its own, if it serves the
    socket. A daemon at its connection cap refuses (RpcError); any other error is no pid."""
    try:
        answered = conn.call("status")
    except RpcError as exc:
        if exc.code == BUSY:
            raise
        return None
    own = answered.get("pid") if isinstance(answered, dict) else None
    return own if is_pid(own) and serving_pid(sock, own) else None


def is_pid(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _wait_gone(pid: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and pid_alive(pid):
        time.sleep(0.05)


def _terminate(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it has just exited
        os.kill(pid, signal.SIGTERM)
        # A daemon stopped by SIGSTOP (Ctrl-Z on a foreground one) gets its SIGTERM only once
        # it runs again, as systemd does it.
        os.kill(pid, signal.SIGCONT)


def serving_pid(sock: Path, pid: int) -> bool:
    """Is `pid` the process serving `sock`? On Linux, it holds a socket listening at `sock`'s
    path (its own, or under socket activation the one systemd made). Only where that cannot
    be told (no /proc, no such socket in it) is it the socket's listening peer (SO_PEERCRED,
    LOCAL_PEERPID): that peer is whoever called listen() last, and on systemd's socket a
    socket-activated daemon that died stays it, its pid another process's by now. Where
    neither can be told, no pid is the daemon's."""
    held = _holds_listener(pid, sock)
    return held if held is not None else pid == listener_pid(sock)


def listener_pid(sock: Path) -> int | None:
    """The pid of the process that listens on `sock` (nothing is sent), or None. Not retried:
    a full backlog is no pid."""
    try:
        with Client(sock, timeout=2.0, connect_retry_s=0) as conn:
            return conn.peer_pid()
    except (DaemonUnavailable, OSError):
        return None


# /proc/net/unix's flag of a listening socket (__SO_ACCEPTCON).
_ACCEPTING = 0x10000


def _holds_listener(pid: int, sock: Path) -> bool | None:
    """Linux: has `pid` a descriptor of a socket listening at `sock`'s path? None when that
    cannot be told: no /proc/net/unix, or no listening socket at that path in it."""
    try:
        with open("/proc/net/unix", "rb") as handle:
            table = handle.read().splitlines()[1:]
    except OSError:
        return None
    wanted = os.path.realpath(sock)
    listening = set()
    for line in table:
        # Num RefCount Protocol Flags Type St Inode Path (the path may hold spaces)
        fields = line.split(maxsplit=7)
        if len(fields) < 8 or not int(fields[3], 16) & _ACCEPTING:
            continue
        path = os.fsdecode(fields[7])
        if path.startswith("/") and os.path.realpath(path) == wanted:
            listening.add(f"socket:[{int(fields[6])}]")
    if not listening:
        return None
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in descriptors:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in listening:
                return True
        except OSError:
            continue  # closed meanwhile
    return False
