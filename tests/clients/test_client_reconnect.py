"""A client kept across a daemon restart: the call that finds the connection dead fails, the
next one connects again."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from memoryd_client import AsyncClient, Client, DaemonUnavailable
from tests.conftest import daemon_config, start_daemon, stop_daemon


async def test_both_clients_reach_a_restarted_daemon(short_tmp: Path) -> None:
    config = daemon_config(short_tmp)
    handle = await start_daemon(config)
    sync = Client(config.socket_path, timeout=10)
    conn = AsyncClient(config.socket_path, timeout=10)
    try:
        first_pid = (await conn.status())["pid"]
        await asyncio.to_thread(sync.status)
        await stop_daemon(handle)
        handle = await start_daemon(config)

        # The async client's read loop sees the old connection end: no call is lost to it.
        await asyncio.sleep(0.2)
        assert (await asyncio.wait_for(conn.status(), 5))["pid"] == first_pid
        # The sync one learns it on its next call, which fails; the one after connects again
        # (before: "connection to memoryd lost: Broken pipe" on every call, for ever).
        with pytest.raises(DaemonUnavailable):
            await asyncio.to_thread(sync.status)
        assert (await asyncio.to_thread(sync.status))["pid"] == first_pid
    finally:
        sync.close()
        await conn.close()
        await stop_daemon(handle)


async def test_a_sync_client_whose_connection_was_lost_says_so(short_tmp: Path) -> None:
    config = daemon_config(short_tmp)
    handle = await start_daemon(config)
    sync = Client(config.socket_path, timeout=10)
    try:
        await asyncio.to_thread(sync.subscribe)
        await stop_daemon(handle)
        with pytest.raises(DaemonUnavailable):
            await asyncio.to_thread(sync.next_notification)
        # Not an AssertionError: the notification stream is gone until the caller reconnects.
        with pytest.raises(DaemonUnavailable, match="not connected"):
            await asyncio.to_thread(sync.next_notification)
    finally:
        sync.close()


async def test_an_async_notification_waiter_is_told_when_the_daemon_stops(
    short_tmp: Path,
) -> None:
    config = daemon_config(short_tmp)
    handle = await start_daemon(config)
    conn = AsyncClient(config.socket_path, timeout=10)
    try:
        await conn.subscribe(["memory/saved"])
        await handle.daemon.notify("memory/saved", {"path": "/m/a.md", "project": "/p"})
        waiter = asyncio.create_task(conn.next_notification(wait_s=None))
        assert (await asyncio.wait_for(waiter, 5))["params"]["path"] == "/m/a.md"
        await handle.daemon.notify("memory/saved", {"path": "/m/b.md", "project": "/p"})
        await asyncio.sleep(0.2)
        waiter = asyncio.create_task(conn.next_notification(wait_s=None))
        await stop_daemon(handle)
        # What arrived before the end is still delivered, then the end is said.
        assert (await asyncio.wait_for(waiter, 5))["params"]["path"] == "/m/b.md"
        # Before: the docs' `next_notification(wait_s=None)` waited for ever.
        with pytest.raises(DaemonUnavailable):
            await asyncio.wait_for(conn.next_notification(wait_s=None), 5)
    finally:
        await conn.close()
        await stop_daemon(handle)


async def test_a_cancelled_async_notification_wait_leaves_the_notification_queued(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = daemon_config(short_tmp)
    handle = await start_daemon(config)
    conn = AsyncClient(config.socket_path, timeout=10)
    try:
        await conn.subscribe(["memory/saved"])
        waiter = asyncio.create_task(conn.next_notification(wait_s=None))
        await asyncio.sleep(0.05)
        queue_it = conn.notifications.put_nowait

        def arrive_then_cancel(note: dict[str, Any]) -> None:
            # The caller cancels its wait (or its wait_s runs out) in the tick the read loop
            # queues the notification.
            queue_it(note)
            waiter.cancel()

        monkeypatch.setattr(conn.notifications, "put_nowait", arrive_then_cancel)
        await handle.daemon.notify("memory/saved", {"path": "/m/a.md", "project": "/p"})
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(waiter, 5)
        monkeypatch.undo()
        # Before: the waiter's own task had already taken it off the queue, and it was lost.
        note = await conn.next_notification(wait_s=5)
        assert note["params"]["path"] == "/m/a.md"
        # The waits go on as before: nothing queued is a timeout, the connection's end is said.
        with pytest.raises(TimeoutError):
            await conn.next_notification(wait_s=0.05)
        await stop_daemon(handle)
        with pytest.raises(DaemonUnavailable):
            await conn.next_notification(wait_s=5)
    finally:
        await conn.close()
        await stop_daemon(handle)
