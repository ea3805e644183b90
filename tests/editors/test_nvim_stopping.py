"""The Neovim plugin against a real daemon whose stop has begun when it is handed the editor's
connection (clients/nvim/tests/stopping_spec.lua): each request is answered -32006 `memoryd is
stopping`, which the plugin takes for the connection going away, not for an error."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon import server as server_module
from memoryd.daemon.app import Daemon
from memoryd.daemon.protocol.connection import Connection
from tests.conftest import daemon_config
from tests.daemon.test_socket_races import _serve
from tests.editors.headless_nvim import NVIM
from tests.editors.test_nvim import assert_all_passed, run_nvim

pytestmark = pytest.mark.skipif(NVIM is None, reason="nvim is not installed")


async def test_a_stopping_daemons_answer_sends_the_calls_to_the_next_daemon(
    short_tmp: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by the session 23 review: since a client handed over once the stop began is
    # answered -32006 per request (bc93deb), the plugin warned "could not subscribe to
    # notifications: memoryd is stopping", failed the command with it, and left the connection
    # open for the late window. Now the calls go again on a new connection, which waits in
    # the socket (as in systemd's) for the next daemon.
    monkeypatch.setattr(server_module, "LATE_CLIENT_WINDOW_S", 600.0)  # the plugin closes it
    config = daemon_config(short_tmp, drain_timeout_s=600.0)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # what systemd holds
    listener.bind(str(config.socket_path))
    listener.listen(16)
    first = await _serve(Daemon(config), listener)
    first.stop_deadline = asyncio.get_running_loop().time() + 600  # its stop has begun
    handed_over = asyncio.Event()  # the plugin may close it again before a poll would see it

    def late_then_deaf(*args: Any, **kwargs: Any) -> Any:
        # The stop closes the daemon's listening socket as it begins: here as the late client
        # is handed over, so the plugin's new connection waits for the next daemon.
        if kwargs.get("until") is not None and first._server is not None:
            first._server.close()
            handed_over.set()
        return Connection(*args, **kwargs)

    monkeypatch.setattr(server_module, "Connection", late_then_deaf)
    second = None
    env = {"MEMORYD_SOCKET": str(config.socket_path)}
    nvim = asyncio.create_task(asyncio.to_thread(run_nvim, "stopping_spec.lua", env, tmp_path))
    try:
        async with asyncio.timeout(120):
            seen = asyncio.create_task(handed_over.wait())
            await asyncio.wait({nvim, seen}, return_when="FIRST_COMPLETED")
            seen.cancel()
            assert handed_over.is_set(), nvim.result()
            await first.stop()  # waits for the late connection: the plugin closes it
            second = await _serve(Daemon(config), listener)
        records = await asyncio.wait_for(nvim, 240)
    finally:
        if not nvim.done():
            await asyncio.wait({nvim}, timeout=240)
        if second is not None:
            await second.stop()
        listener.close()
    assert_all_passed(records, expected=2)
