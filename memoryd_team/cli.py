"""`memoryd-team`: run the team server and administer its tokens and history.

    memoryd-team serve [--host H] [--port P] [--database URL] [--database-timeout S] [--workers N] …
    memoryd-team migrate
    memoryd-team token create --repo owner/repo [--repo …] [--name NAME]
    memoryd-team token list | token revoke TOKEN_ID
    memoryd-team history --repo owner/repo [KEY] [--version N]
    memoryd-team restore --repo owner/repo KEY VERSION

`--database` defaults to $MEMORYD_TEAM_DATABASE, else the SQLite file in the data dir;
`--database-timeout` to $MEMORYD_TEAM_DATABASE_TIMEOUT, else 5 seconds.
Exit codes: 0 done, 1 not found / refused, 2 bad usage or an unusable database.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import math
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from memoryd import __version__
from memoryd_team import auth
from memoryd_team.settings import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_DATABASE_TIMEOUT_S,
    DEFAULT_FULL_BYTES,
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_ENTRIES,
    DEFAULT_MAX_ENTRY_BYTES,
    DEFAULT_PAGE_BYTES,
    DEFAULT_WRITE_TIMEOUT_S,
    SHUTDOWN_GRACE_S,
    ServerSettings,
)
from memoryd_team.storage import DATABASE_ENV, DATABASE_TIMEOUT_ENV, open_storage
from memoryd_team.storage.base import Author, Storage, StorageError, VersionNotFound
from memoryd_team.validation import canonical_repo, key_problem, text_problem

if TYPE_CHECKING:
    import uvicorn

T = TypeVar("T")

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2

# What the `server` extra adds (pyproject.toml); the rest of memoryd never imports them.
SERVER_EXTRA_MODULES = frozenset({"starlette", "uvicorn", "asyncpg"})

ADMIN_AUTHOR = Author("admin", "memoryd-team restore")

# uvicorn's levels (uvicorn.config.LOG_LEVELS), named here so that reading the command line
# never imports uvicorn (a test keeps the two equal).
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


class CliError(Exception):
    def __init__(self, message: str, code: int = EXIT_REFUSED) -> None:
        super().__init__(message)
        self.code = code


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.run(args)
    except CliError as exc:
        print(f"memoryd-team: {exc}", file=sys.stderr)
        return exc.code
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in SERVER_EXTRA_MODULES:
            raise
        # A base install (`pipx install memoryd`) has the command but not the server's packages.
        print(
            f"memoryd-team: this needs the team server's packages ({exc.name} is missing): "
            "install memoryd[server]: from the memoryd checkout, "
            "`pipx install --force '.[server]'` (extras combine: '.[mcp,server]'), or "
            "`pip install '.[server]'` into memoryd's environment",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    return result


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--database",
        default=os.environ.get(DATABASE_ENV),
        help="sqlite:///path or postgresql://… (default: $MEMORYD_TEAM_DATABASE, else the "
        "SQLite file in the user's data dir)",
    )
    parser = argparse.ArgumentParser(prog="memoryd-team", description="memoryd team server")
    parser.add_argument("--version", action="version", version=f"memoryd-team {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", parents=[common], help="run the team server")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=_port, default=8787, help="1-65535")
    serve.add_argument("--max-entries", type=_positive, default=DEFAULT_MAX_ENTRIES)
    serve.add_argument("--max-body-bytes", type=_positive, default=DEFAULT_MAX_BODY_BYTES)
    serve.add_argument("--max-entry-bytes", type=_positive, default=DEFAULT_MAX_ENTRY_BYTES)
    serve.add_argument(
        "--no-secret-scan", action="store_true", help="accept entries the scanner would refuse"
    )
    serve.add_argument("--page-bytes", type=_positive, default=DEFAULT_PAGE_BYTES)
    serve.add_argument("--full-bytes", type=_positive, default=DEFAULT_FULL_BYTES)
    serve.add_argument(
        "--workers",
        type=_positive,
        default=1,
        help="server processes sharing the port (use PostgreSQL for more than one)",
    )
    serve.add_argument("--log-level", type=str.lower, choices=LOG_LEVELS, default="info")
    serve.add_argument(
        "--database-timeout",
        type=_seconds,
        metavar="SECONDS",
        help="how long each wait on PostgreSQL may take: connecting, a pooled connection, "
        f"one statement (default: ${DATABASE_TIMEOUT_ENV}, else {DEFAULT_DATABASE_TIMEOUT_S:g})",
    )
    for flag, default, what in (
        ("--header-timeout", DEFAULT_HEADER_TIMEOUT_S, "a request's line and headers"),
        ("--body-timeout", DEFAULT_BODY_TIMEOUT_S, "each wait for more of a request's body"),
        ("--write-timeout", DEFAULT_WRITE_TIMEOUT_S, "a reply the client stopped reading"),
        ("--shutdown-grace", SHUTDOWN_GRACE_S, "requests in flight at SIGTERM"),
    ):
        serve.add_argument(
            flag,
            type=_seconds,
            default=default,
            metavar="SECONDS",
            help=f"how long the server waits for {what} (default {default:g})",
        )
    serve.set_defaults(run=_serve)

    migrate = commands.add_parser(
        "migrate",
        parents=[common],
        help="bring the database schema up to date (safe to repeat, and while servers run)",
    )
    migrate.set_defaults(run=_migrate)

    token = commands.add_parser("token", help="manage bearer tokens").add_subparsers(
        dest="token_command", required=True
    )
    create = token.add_parser("create", parents=[common], help="create a token")
    create.add_argument(
        "--repo", action="append", required=True, help="owner/repo or group/…/repo (repeatable)"
    )
    create.add_argument("--name", default="", help="who or what uses it (shown in history)")
    create.set_defaults(run=_token_create)
    listing = token.add_parser("list", parents=[common], help="list tokens")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(run=_token_list)
    revoke = token.add_parser("revoke", parents=[common], help="revoke a token")
    revoke.add_argument("token_id")
    revoke.set_defaults(run=_token_revoke)

    history = commands.add_parser("history", parents=[common], help="stored versions")
    history.add_argument("--repo", required=True)
    history.add_argument("key", nargs="?")
    history.add_argument("--version", type=_positive, help="print this version's content")
    history.add_argument("--json", action="store_true")
    history.set_defaults(run=_history)

    restore = commands.add_parser(
        "restore", parents=[common], help="make an old version current (as a new version)"
    )
    restore.add_argument("--repo", required=True)
    restore.add_argument("key")
    restore.add_argument("version", type=_positive)
    restore.set_defaults(run=_restore)
    return parser


def _port(text: str) -> int:
    # The socket layer takes a port modulo 65536: 70000 would listen on 4464.
    value = _positive(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"a port is 1-65535: {value}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    # nan and inf would make every wait unbounded, 0 or less would refuse every request.
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive, finite number of seconds: {text}")
    return value


def _database_timeout(args: argparse.Namespace) -> float:
    """`--database-timeout`, else $MEMORYD_TEAM_DATABASE_TIMEOUT, else the default."""
    if args.database_timeout is not None:
        return float(args.database_timeout)
    raw = os.environ.get(DATABASE_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_DATABASE_TIMEOUT_S
    try:
        return _seconds(raw)
    except argparse.ArgumentTypeError as exc:
        raise CliError(f"${DATABASE_TIMEOUT_ENV}: {exc}", EXIT_USAGE) from None


def _storage(args: argparse.Namespace) -> Storage:
    try:
        return open_storage(args.database, timeout_s=getattr(args, "database_timeout", None))
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc


def _with_storage(args: argparse.Namespace, work: Callable[[Storage], Awaitable[T]]) -> T:
    storage = _storage(args)

    async def run() -> T:
        await storage.open()
        try:
            return await work(storage)
        finally:
            await storage.close()

    try:
        return asyncio.run(run())
    except VersionNotFound as exc:
        raise CliError(str(exc)) from exc
    except StorageError as exc:
        raise CliError(f"database: {exc}", EXIT_USAGE) from exc


def _repo(raw: str) -> str:
    repo = canonical_repo(raw)
    if repo is None:
        raise CliError(f"not an owner/repo (or group/…/repo) name: {raw!r}", EXIT_USAGE)
    return repo


def _key(raw: str) -> str:
    problem = key_problem(raw)
    if problem is not None:
        raise CliError(f"not a valid key: {problem}", EXIT_USAGE)
    return raw


# serve ------------------------------------------------------------------------------------


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from memoryd_team.app import SERVE_ENV, make_app
    from memoryd_team.connection import protocol_for

    if not args.host.strip():
        # uvicorn binds '' to every interface: a quoted variable left empty would have
        # opened the server to the whole network.
        raise CliError(
            "--host is empty (that would listen on every interface); name one: 127.0.0.1, "
            "or 0.0.0.0 to listen on all",
            EXIT_USAGE,
        )
    args.database_timeout = _database_timeout(args)
    try:
        settings = ServerSettings(
            max_entries=args.max_entries,
            max_body_bytes=args.max_body_bytes,
            max_entry_bytes=args.max_entry_bytes,
            secret_scan=not args.no_secret_scan,
            page_bytes=args.page_bytes,
            full_bytes=args.full_bytes,
            body_timeout_s=args.body_timeout,
            header_timeout_s=args.header_timeout,
            write_timeout_s=args.write_timeout,
        )
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    # Open (and migrate) the database once before uvicorn: in its startup, an unusable one was
    # a traceback and exit 3, or with --workers a clean exit 0 that a supervisor would not
    # restart. Here it is one line and exit 2.
    _with_storage(args, lambda storage: storage.schema_version())
    options: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "log_level": args.log_level,
        # h11 with a deadline for the headers and for a reply nobody reads (connection.py)
        "http": protocol_for(settings),
        "ws": "none",
        "lifespan": "on",
        "server_header": False,
        "timeout_graceful_shutdown": args.shutdown_grace,
    }
    if args.workers == 1:
        config = uvicorn.Config(make_app(_storage(args), settings), **options)
    else:
        # Each worker is a process of its own (uvicorn's supervisor restarts one that dies)
        # and builds its app from the environment; the ETag check is in the database
        # transaction, so two workers never both accept a push against one ETag.
        os.environ[SERVE_ENV] = json.dumps(
            {
                "database": args.database,
                "database_timeout_s": args.database_timeout,
                "settings": dataclasses.asdict(settings),
            }
        )
        config = uvicorn.Config(
            "memoryd_team.app:app_from_environment",
            factory=True,
            workers=args.workers,
            **options,
        )
    if not _run_server(config):
        # The database may still fail a worker after the check above (it went away, or
        # refused one more connection), or the port is taken: uvicorn logged why.
        raise CliError("the server did not start (the log above says why)", EXIT_USAGE)
    return EXIT_OK


def _run_server(config: uvicorn.Config) -> bool:
    """What `uvicorn.run` does, telling whether the server started: `uvicorn.run` exits 3
    when one process fails to start, and returns as after a clean stop when a worker does."""
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE
    from uvicorn.supervisors import Multiprocess

    try:
        if config.workers == 1:
            server = uvicorn.Server(config)
            with contextlib.suppress(KeyboardInterrupt):
                server.run()
            return server.started
        supervisor = Multiprocess(config, sockets=[config.bind_socket()])
        supervisor.run()
    except SystemExit:
        # uvicorn's own way out of a failed start (a lifespan error, a port in use), logged.
        return False
    return all(process.exitcode != STARTUP_FAILURE for process in supervisor.processes)


def _migrate(args: argparse.Namespace) -> int:
    async def run(storage: Storage) -> tuple[list[int], int]:
        # `open` migrates; a second `migrate` finds nothing left and says so.
        return storage.migrations_applied, await storage.schema_version()

    applied, version = _with_storage(args, run)
    if applied:
        print(f"applied schema steps {', '.join(map(str, applied))}; schema at version {version}")
    else:
        print(f"schema up to date at version {version}")
    return EXIT_OK


# tokens -----------------------------------------------------------------------------------


def _bindable_repo(raw: str) -> str:
    """A repository a token can be bound to. No client keys a name ending in `.git` (it drops
    that from its remote's URL, and GitHub and GitLab name no repository so): bound to one,
    pasted from a clone URL, a token was refused for the repository meant, 403 at each sync."""
    repo = _repo(raw)
    if repo.endswith(".git"):
        meant = canonical_repo(repo.removesuffix(".git"))
        hint = f": --repo {meant}" if meant is not None else ""
        raise CliError(
            f"{raw!r} ends in .git, which no repository's name does (clients drop it){hint}",
            EXIT_USAGE,
        )
    return repo


def _token_name(raw: str) -> str:
    """A name `token list` and `history` print on one line: text (bytes that are no UTF-8
    were a UnicodeEncodeError traceback on SQLite, "database:" and exit 2 on PostgreSQL)
    without control characters (a newline split the listing's line, an escape sequence
    reached the admin's terminal)."""
    problem = text_problem(raw)
    if problem is None and not raw.isprintable():
        problem = "a control character"
    if problem is not None:
        raise CliError(f"--name '{_shown(raw)}' is not a name: {problem}", EXIT_USAGE)
    return raw


def _shown(text: str) -> str:
    """`text` for one line of a terminal: each unprintable character escaped (`\\x1b`), as a
    name stored before names were checked may hold one."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def _token_create(args: argparse.Namespace) -> int:
    repos = tuple(sorted({_bindable_repo(raw) for raw in args.repo}))
    name = _token_name(args.name)
    new = _with_storage(args, lambda storage: auth.create_token(storage, repos, name))
    print(f"token id: {new.info.id}")
    print(f"repos: {', '.join(new.info.repos)}")
    if new.info.name:
        print(f"name: {new.info.name}")
    print("The token is shown once; only its hash is stored:")
    print(new.secret)
    return EXIT_OK


def _token_list(args: argparse.Namespace) -> int:
    tokens = _with_storage(args, lambda storage: storage.list_tokens())
    if args.json:
        rows = [
            {
                "id": t.id,
                "name": t.name,
                "repos": list(t.repos),
                "created_at": t.created_at.isoformat(),
                "revoked_at": t.revoked_at.isoformat() if t.revoked_at else None,
            }
            for t in tokens
        ]
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    for t in tokens:
        state = f"revoked {t.revoked_at:%Y-%m-%d %H:%M}" if t.revoked_at else "active"
        print(
            f"{t.id}  {state:<24}  {t.created_at:%Y-%m-%d %H:%M}  {','.join(t.repos)}  "
            f"{_shown(t.name)}"
        )
    return EXIT_OK


def _token_revoke(args: argparse.Namespace) -> int:
    now = datetime.now(UTC)
    if auth.TOKEN_PREFIX in args.token_id:
        # The token itself, not its id (a 12-hex-digit id never holds the prefix), pasted
        # with a space or its "Bearer " too: quoting it back put the secret in the terminal's
        # scrollback and the shell's logs a second time.
        raise CliError("that is a token, not its id: `memoryd-team token list` shows the ids")
    # An id that is no text (bytes that are no UTF-8) names no token: the databases cannot
    # even be asked (a UnicodeEncodeError traceback on SQLite).
    if text_problem(args.token_id) is not None or not _with_storage(
        args, lambda storage: storage.revoke_token(args.token_id, now)
    ):
        raise CliError(f"no active token with id '{_shown(args.token_id)}'")
    print(f"revoked {args.token_id}")
    return EXIT_OK


# history ----------------------------------------------------------------------------------


def _history(args: argparse.Namespace) -> int:
    repo = _repo(args.repo)
    key = _key(args.key) if args.key is not None else None
    if args.version is not None:
        if key is None:
            raise CliError("--version needs a KEY", EXIT_USAGE)
        version = args.version
        _, content = _with_storage(args, lambda storage: storage.get_version(repo, key, version))
        sys.stdout.write(content)
        return EXIT_OK
    versions = _with_storage(args, lambda storage: storage.history(repo, key))
    if args.json:
        rows = [
            {
                "key": v.key,
                "version": v.version,
                "checksum": v.checksum,
                "size": v.size,
                "written_at": v.written_at.isoformat(),
                "token_id": v.token_id,
                "author": v.author,
                "restored_from": v.restored_from,
            }
            for v in versions
        ]
        # `[]` still, so a parser reads the answer; the exit status says "not found", as
        # the text form's does (a misspelt repo was exit 0 here, exit 1 there).
        print(json.dumps(rows, indent=2))
    if not versions:
        raise CliError(f"no history for {repo}" + (f" {key}" if key else ""))
    if args.json:
        return EXIT_OK
    for v in versions:
        restored = f"  (restored from v{v.restored_from})" if v.restored_from else ""
        print(
            f"{v.key}  v{v.version}  {v.written_at:%Y-%m-%d %H:%M:%S}  {v.size} B  "
            f"{v.checksum[:19]}  {_shown(v.author) or '-'} [{v.token_id}]{restored}"
        )
    return EXIT_OK


def _restore(args: argparse.Namespace) -> int:
    repo = _repo(args.repo)
    key = _key(args.key)
    version = args.version
    now = datetime.now(UTC)
    result = _with_storage(
        args, lambda storage: storage.restore(repo, key, version, author=ADMIN_AUTHOR, at=now)
    )
    if result.written:
        print(f"restored {repo} {key} to the content of v{version}; etag {result.etag}")
    else:
        print(f"{repo} {key} already has the content of v{version}; nothing written")
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
