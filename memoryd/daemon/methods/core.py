"""Daemon-level methods: status, subscribe, shutdown, settings.get, settings.set."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import structlog
from pydantic import AfterValidator, Field

from memoryd import diagnose
from memoryd import settings as settings_mod
from memoryd.automem.locks import held_work
from memoryd.daemon.params import Cwd
from memoryd.daemon.protocol.connection import current_connection
from memoryd.daemon.protocol.envelope import echoed, listed
from memoryd.daemon.rpc import NoParams, Params, method
from memoryd.errors import InvalidParams

if TYPE_CHECKING:
    from memoryd.daemon.app import Daemon

log = structlog.get_logger(__name__)

# What `subscribe` without `events` gets: the events there were before `context/changed`.
DEFAULT_EVENTS = frozenset(
    {
        "memory/saved",
        "session/summary_updated",
        "team/synced",
        "team/secret_blocked",
        "team/conflict",
        "magicdoc/updated",
        "worker/error",
    }
)
# Sent only to a connection that names them: `context/changed` comes with every edit of a
# loaded instruction file, and a client that asked for "everything" before it existed
# would be woken for what it cannot use.
NAMED_ONLY_EVENTS = frozenset({"context/changed"})
EVENTS = DEFAULT_EVENTS | NAMED_ONLY_EVENTS


async def status(daemon: Daemon, _: NoParams) -> dict[str, Any]:
    """Version, pid, uptime, socket, counts, model and feature availability."""
    report = daemon.status()
    # The memory folders loaded now (at most 32) are checked, not every one the daemon has seen.
    folders = tuple(sorted(daemon.services.automem.states.states))
    found = await daemon.file_checks.problems(daemon.config.flag_settings, folders)
    report["problems"] = [*_setup_problems(daemon, report), *found]
    return report


# Editors poll `status` every few seconds; the files' checks read the settings and env files
# and statvfs each loaded memory folder (5-11 ms with 32 folders, against 0.6 ms for the rest).
FILE_CHECKS_TTL_S = 10.0
# The longest a status call waits for a check in flight (a memory folder on a hung mount).
FILE_CHECKS_WAIT_S = 1.0


class FileChecks:
    """The files' problems of one daemon, checked at most once per FILE_CHECKS_TTL_S for one
    list of folders. One check runs at a time, off the loop; concurrent calls share it, and
    wait for it at most FILE_CHECKS_WAIT_S in all: past that they answer with the last result
    and say the check is slow (a hung mount held one executor thread per poll until the
    default pool was full)."""

    def __init__(self) -> None:
        self._key: tuple[Path | None, tuple[Path, ...]] | None = None
        self._found: list[str] = []
        self._checked_at = -math.inf
        self._running: asyncio.Task[None] | None = None
        self._started_at = 0.0
        self._generation = 0

    def forget(self) -> None:
        """The next call checks again (a settings file was written); a check in flight now
        may have read the file before the write, so its result is not kept as fresh."""
        self._key = None
        self._generation += 1

    async def problems(self, flag_settings: Path | None, folders: tuple[Path, ...]) -> list[str]:
        key = (flag_settings, folders)
        now = time.monotonic()
        if self._running is None:
            if key == self._key and now - self._checked_at < FILE_CHECKS_TTL_S:
                return self._found
            self._started_at = now
            self._running = asyncio.create_task(self._check(key))
        left = self._started_at + FILE_CHECKS_WAIT_S - now
        if left > 0:
            with contextlib.suppress(TimeoutError):
                # shield: a caller that gives up (or is cancelled) leaves the check running.
                await asyncio.wait_for(asyncio.shield(self._running), left)
        if self._running is None:
            return self._found
        slow = (
            f"the check of the settings files and memory folders has not finished after "
            f"{time.monotonic() - self._started_at:.0f} s (a memory folder on a hung or slow "
            "mount?); the other problems are as the last check found them"
        )
        return [slow, *self._found]

    async def _check(self, key: tuple[Path | None, tuple[Path, ...]]) -> None:
        generation = self._generation
        try:
            self._found = await asyncio.to_thread(_file_problems, *key)
            if generation == self._generation:
                self._key, self._checked_at = key, time.monotonic()
        except Exception as exc:  # the checks never raise; the executor may be shut down
            log.warning("status file checks failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            self._running = None


def _setup_problems(daemon: Daemon, report: dict[str, Any]) -> list[str]:
    """What is wrong in the daemon's configuration as it runs, each with its fix. A feature
    left unconfigured (no key, no team server) is a choice, not a problem."""
    problems: list[str] = []
    if daemon.config.model.configured and daemon.model.reason:
        problems.append(daemon.model.reason)  # a key or endpoint that cannot work
    if daemon.model.problem:
        problems.append(daemon.model.problem)
    if daemon.config.team.problem:
        problems.append(daemon.config.team.problem)
    team = report["features"].get("team_sync", {})
    refused: dict[str, str] = team.get("suppressed", {})
    if refused:
        from memoryd.team.service import SUPPRESSED_BECAUSE, why_off  # only once it syncs

        # The configuration's own codes are said above; a folder without a remote is normal.
        problems += [
            f"team sync of {repo}: {why_off(code)}"
            for repo, code in sorted(refused.items())
            if code not in SUPPRESSED_BECAUSE
        ]
    problems += report["features"].get("auto_memory", {}).get("warnings", [])
    return problems


def _file_problems(flag_settings: Path | None, memory_folders: tuple[Path, ...]) -> list[str]:
    return [
        *diagnose.settings_problems(flag_settings),
        *diagnose.env_file_problems(diagnose.env_file(), os.environ),
        *diagnose.unwritable_folders(memory_folders),
    ]


async def rpc_methods(daemon: Daemon, _: NoParams) -> dict[str, Any]:
    """Every method this daemon serves, with its one-line summary."""
    return {"methods": {name: spec.summary for name, spec in sorted(daemon.methods.items())}}


MAX_UNKNOWN_NAMED = 10


class SubscribeParams(Params):
    events: list[str] | None = Field(default=None, max_length=100)


async def subscribe(daemon: Daemon, params: SubscribeParams) -> dict[str, Any]:
    """From now on this connection receives notifications (the default set, or those named)."""
    connection = current_connection.get()
    if connection is None:
        raise InvalidParams("subscribe needs a connection")
    # No `events`: the default set. A list names them; an empty one is none (it unsubscribes:
    # it used to mean every event, the opposite of what it says).
    wanted = DEFAULT_EVENTS if params.events is None else frozenset(params.events)
    unknown = sorted(wanted - EVENTS)
    if unknown:
        # Each cut as errors repeat a request, 10 at most: a 17 MiB name made a reply over the
        # cap, which the client got as -32004 'ask for less'.
        named = listed(unknown, MAX_UNKNOWN_NAMED, echoed, sep=", ", more_sep=" ")
        raise InvalidParams(f"events: unknown event(s) {named}; known: {', '.join(sorted(EVENTS))}")
    connection.subscriptions = wanted
    return {"subscribed": sorted(wanted)}


async def shutdown(daemon: Daemon, _: NoParams) -> dict[str, Any]:
    """Finish in-flight writes and pushes, then exit."""
    daemon.shutdown_requested.set()
    return {"shutting_down": True}


class SettingsGetParams(Params):
    cwd: Cwd | None = None


async def settings_get(daemon: Daemon, params: SettingsGetParams) -> dict[str, Any]:
    """Effective memory settings and where each came from."""
    # The project and local files of the worktree cwd is in, as get_context reads them.
    root = (
        None if params.cwd is None else daemon.services.projects.resolve(params.cwd).settings_root
    )
    # Off the loop: reading files is blocking work, however small a settings file should be.
    effective = await asyncio.to_thread(settings_mod.load, root, daemon.config.flag_settings)
    values = {k: effective.get(k) for k in settings_mod.KNOWN_KEYS}
    values.update({k: v for k, v in effective.values.items() if k not in values})
    sources = {k: effective.sources.get(k, "default") for k in values}
    return {
        "settings": values,
        "sources": sources,
        "files": [
            {"source": str(f.source), "path": str(f.path) if f.path else None, "error": f.error}
            for f in effective.files
        ],
    }


# Deeper than any setting nests (Claude Code's hooks: a few levels). A value nested ~1,000 deep
# failed writing the file (RecursionError, -32603).
MAX_SETTING_DEPTH = 32


def _shallow(value: Any) -> Any:
    level = [value]
    for _ in range(MAX_SETTING_DEPTH + 1):
        level = [
            child
            for item in level
            if isinstance(item, dict | list)
            for child in (item.values() if isinstance(item, dict) else item)
        ]
        if not level:
            return value
    raise ValueError(f"nested more than {MAX_SETTING_DEPTH} levels deep")


class SettingsSetParams(Params):
    key: str = Field(min_length=1, max_length=200)
    value: Annotated[Any, AfterValidator(_shallow)]


def _set(key: str, value: Any) -> str:
    # set_user_setting measures the text it writes against the cap (TooLarge, nothing written).
    return str(settings_mod.set_user_setting(key, value))


async def settings_set(daemon: Daemon, params: SettingsSetParams) -> dict[str, Any]:
    """Write one key to the user settings file (atomically, other keys kept)."""
    async with daemon.settings_write:
        # held_work: a caller cancelled mid-write keeps the lock until its write is done.
        path = await held_work(lambda: _set(params.key, params.value))
    daemon.file_checks.forget()  # status says what the file now holds, not the cached check
    return {"path": path, "key": params.key, "value": params.value}


METHODS = (
    method("status", NoParams, status),
    method("rpc.methods", NoParams, rpc_methods),
    method("subscribe", SubscribeParams, subscribe),
    method("shutdown", NoParams, shutdown),
    method("settings.get", SettingsGetParams, settings_get),
    method("settings.set", SettingsSetParams, settings_set),
)
