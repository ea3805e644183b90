"""The daemon is the `Host` its services are given: everything the protocol declares is there,
and what a service needs of the daemon is declared (TeamSync looked `shutdown_requested` up
with getattr, and a host without it silently left the drain waiting on stalled requests)."""

from __future__ import annotations

import asyncio
import inspect
import typing

from memoryd.core.host import Host
from tests.conftest import DaemonHandle


def _declared() -> dict[str, object]:
    hints = typing.get_type_hints(Host)
    methods = {
        name: member
        for name, member in vars(Host).items()
        if not name.startswith("_") and (callable(member) or isinstance(member, property))
    }
    return {**hints, **methods}


def test_host_declares_the_shutdown_event() -> None:
    assert typing.get_type_hints(Host)["shutdown_requested"] is asyncio.Event


async def test_the_daemon_has_all_the_host_declares(daemon: DaemonHandle) -> None:
    host = daemon.daemon
    for name, declared in _declared().items():
        assert hasattr(host, name), name
        if inspect.iscoroutinefunction(declared):
            assert inspect.iscoroutinefunction(getattr(host, name)), name
    assert isinstance(host.shutdown_requested, asyncio.Event)
