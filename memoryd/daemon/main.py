"""`memoryd`: run the daemon in the foreground."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import resource
import signal
import sys
from dataclasses import replace
from pathlib import Path

from memoryd import __version__
from memoryd.core.env_numbers import EnvNumberError
from memoryd.daemon.config import DaemonConfig
from memoryd.daemon.limits import DEFAULT_INPUT_BUFFER_CAP, DEFAULT_LINE_LIMIT, MiB
from memoryd.daemon.logging import configure
from memoryd_client import DaemonUnavailable
from memoryd_client.paths import socket_name_problem


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (a cap of 0 or less refuses everything)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive number of bytes, not {value}")
    return value


def idle_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds, 0 or more (0: never)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds, 0 or more: {text}")
    return value


# The soft open-files limit is raised to the hard one, up to this: each client is a descriptor
# (so are the watcher, the log and the files being read), and 1,024 — a common soft default,
# or less under `ulimit -n` — ran out with a few hundred hooks and editors at once.
_MAX_OPEN_FILES = 65_536
# macOS refuses a soft limit over OPEN_MAX with EINVAL, whatever the hard limit says.
_DARWIN_OPEN_MAX = 10_240
# Below this many, a burst of clients exhausts the descriptors: said at start-up.
LOW_OPEN_FILES = 256


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (at most _MAX_OPEN_FILES); the soft
    limit in effect afterwards. The daemon polls with epoll/kqueue, never select, so a
    descriptor above 1,024 is no problem."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = _MAX_OPEN_FILES if hard == resource.RLIM_INFINITY else min(hard, _MAX_OPEN_FILES)
    if soft != resource.RLIM_INFINITY and soft >= want:
        return soft
    for target in (want, min(want, _DARWIN_OPEN_MAX)):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError):
            continue
        return target
    return soft


def keep_standard_streams() -> None:
    """Open /dev/null on each of fds 0-2 that is closed (a daemon started with `<&- >&- 2>&-`,
    or by a launcher that closes them), and give Python a stream for it. Left closed, the next
    descriptor opened took its number: a client's socket as fd 0, whose close made libuv abort
    the daemon (`uv__close: Assertion fd > STDERR_FILENO`), at the latest at shutdown; and with
    no sys.stderr, logging to it failed at start."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
        except OSError:
            try:
                null = os.open(os.devnull, os.O_RDWR)
            except OSError:  # no /dev/null (a bare chroot): nothing better to put there
                continue
            if null != fd:
                os.dup2(null, fd)  # inheritable, as a standard stream is
                os.close(null)
            else:
                os.set_inheritable(fd, True)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, mode, encoding="utf-8", closefd=False))  # noqa: SIM115


def survive_user_signals() -> None:
    """SIGUSR1 and SIGUSR2 do nothing. Their default action ended the daemon at once: no
    drain, a background write lost half-way, the socket and status files left behind (a
    logrotate script or a habit of `kill -USR1` to reopen logs; memoryd reopens a moved log
    file by itself). A handler, not SIG_IGN: an ignored signal stays ignored in every program
    the daemon starts."""
    for sig in (signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, _no_op)


def _no_op(signum: int, frame: object) -> None:
    """Nothing to do (and nothing safe to do here: a log line could wait on the lock of a
    write the signal interrupted)."""


def unwritable_folders() -> list[tuple[Path, str, str]]:
    """(folder, why, what is not kept) for memoryd's state folder when it cannot be created
    or written (a read-only HOME, a file where it goes), and the config home (`~/.claude`)
    when it exists and cannot be written. Checked once at start, so the user reads why in the
    first lines of the log, not in the failures that follow."""
    from memoryd import paths
    from memoryd.fsutil import make_private_dirs

    found: list[tuple[Path, str, str]] = []
    state = paths.state_dir()
    try:
        make_private_dirs(state)
        _probe_write(state)
    except OSError as exc:
        found.append(
            (
                state,
                _why(exc),
                "the copies kept before a memory is replaced or deleted (so replacing one "
                "fails), extraction's places, session records, team sync state and approvals; "
                "set XDG_STATE_HOME to a folder you can write",
            )
        )
    config = paths.config_dir()
    if config.is_dir():
        try:
            _probe_write(config)
        except OSError as exc:
            found.append((config, exc.strerror or str(exc), "memories, settings and session notes"))
    return found


def _why(exc: OSError) -> str:
    if isinstance(exc, FileExistsError | NotADirectoryError) and exc.filename:
        return f"{exc.filename} is not a folder"
    return exc.strerror or str(exc)


def _probe_write(folder: Path) -> None:
    """Create and remove a file in `folder` (a mode check says nothing on a read-only mount,
    nor for root); OSError when it cannot be done. Named as a staged temp file, so one a
    kill left behind is swept with those (`state_upkeep`)."""
    import tempfile

    fd, probe = tempfile.mkstemp(prefix=".memoryd-", suffix=".tmp", dir=folder)
    os.close(fd)
    os.unlink(probe)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="memoryd", description="memoryd: memory for LLM agents, over a Unix socket."
    )
    parser.add_argument("--socket", type=Path, help="socket path (default: $MEMORYD_SOCKET, …)")
    parser.add_argument("--log-file", type=Path, help="write JSON log lines here, not stderr")
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )
    parser.add_argument("--settings", type=Path, help="a settings file with flag precedence")
    parser.add_argument(
        "--line-limit",
        type=positive_int,
        help=f"request line cap in bytes (default {DEFAULT_LINE_LIMIT // MiB} MiB)",
    )
    parser.add_argument(
        "--idle-timeout",
        type=idle_seconds,
        default=0.0,
        help="exit after this many idle seconds (0: never)",
    )
    parser.add_argument("--no-watch", action="store_true", help="do not watch files for changes")
    parser.add_argument("--version", action="version", version=f"memoryd {__version__}")
    return parser.parse_args(argv)


def build_config(args: argparse.Namespace) -> DaemonConfig:
    config = DaemonConfig()
    changes: dict[str, object] = {"idle_timeout_s": args.idle_timeout}
    if args.socket:
        changes["socket_path"] = args.socket.expanduser().absolute()
    if args.log_file:
        changes["log_file"] = args.log_file.expanduser().absolute()
    if args.settings:
        changes["flag_settings"] = args.settings.expanduser().absolute()
    if args.line_limit is not None:
        changes["line_limit"] = args.line_limit
        # The all-connections input budget stays two lines' worth of a larger cap.
        changes["input_buffer_cap"] = max(DEFAULT_INPUT_BUFFER_CAP, 2 * args.line_limit)
    if args.no_watch:
        changes["watch_files"] = False
    return replace(config, **changes)  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    keep_standard_streams()  # first: before anything opens a descriptor
    survive_user_signals()
    args = parse_args(argv)
    try:
        config = build_config(args)
    except EnvNumberError as exc:
        print(f"memoryd: {exc}", file=sys.stderr)
        return 2
    except DaemonUnavailable as exc:  # the socket rule's own words, of MEMORYD_SOCKET or TMPDIR
        print(f"memoryd: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError:  # os.getcwd(), for a relative path: a traceback before
        print(
            "memoryd: the working directory no longer exists, so a relative --socket, "
            "--log-file, --settings or MEMORYD_SOCKET cannot be resolved: give absolute "
            "paths, or start memoryd from a folder that exists",
            file=sys.stderr,
        )
        return 2
    # `/` (--socket /, MEMORYD_SOCKET=/, `~` with HOME=/) or `DIR/..`: refused before the
    # lock is named beside it (a ValueError traceback; `...lock` left in DIR).
    problem = socket_name_problem(config.socket_path)
    if problem is not None:
        print(f"memoryd: {problem}", file=sys.stderr)
        return 2
    try:
        configure(log_file=config.log_file, level=args.log_level)
    except OSError as exc:  # a folder there, no permission, a file where its folder goes
        print(
            f"memoryd: cannot write the log file {config.log_file}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return 2
    import structlog

    log = structlog.get_logger("memoryd")
    for folder, why, lost in unwritable_folders():
        log.error(f"{folder} cannot be written ({why}): memoryd serves, but does not keep {lost}")
    open_files = raise_open_files_limit()
    if open_files < LOW_OPEN_FILES:
        log.warning(
            "the open files limit is low: a burst of clients can use up the descriptors the "
            "daemon needs to read files; raise it (`ulimit -n`, LimitNOFILE=) to 1024 or more",
            open_files=open_files,
        )
    from memoryd.daemon.app import Daemon
    from memoryd.daemon.server import serve

    Daemon.freeze_start_up_heap = True  # this process is the daemon's own (app.py says why)
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on every POSIX platform
        return asyncio.run(serve(config))
    return int(uvloop.run(serve(config)))


if __name__ == "__main__":
    sys.exit(main())
