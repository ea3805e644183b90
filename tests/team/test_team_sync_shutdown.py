"""A daemon asked to stop while its team pushes are stuck on a stalled server: every request
ends within the shutdown budget (the drain no longer waits on them), and what was pending is
pushed by the next start."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from memoryd.team.sync.client import Stopping, TeamClient
from memoryd.team.sync.watcher import Tuning
from tests.conftest import DaemonHandle, IsolatedEnv, stop_daemon
from tests.fakes.faulty_proxy import Fault, FaultyProxy
from tests.team.conftest import REPO, eventually, server_history
from tests.team.test_team_sync_daemon import make_repo, start, team_dir_of
from tests.team_server.conftest import ThreadedServer

STOP_BUDGET = Tuning(debounce_s=0.1, backoff_base_s=0.05, shutdown_push_timeout_s=1.0)


async def test_a_stop_request_ends_team_requests_stuck_on_a_stalled_server(
    server: ThreadedServer,
    proxy: FaultyProxy,
    short_tmp: Path,
    tmp_path: Path,
    isolated_env: IsolatedEnv,
    daemons: list[DaemonHandle],
) -> None:
    # Found by a bug hunt: the watcher's push and a `team.push` call both stuck on a server
    # that never answered; SIGTERM waited the drain's 30 s for the call, then 10 s more for
    # the push: 40 s. The call is the tell: it used to be cancelled by the drain cap.
    token = server.token(REPO)
    handle = await start(short_tmp, "a", url=proxy.url, token=token)
    handle.daemon.services.team.tuning = STOP_BUDGET
    root = make_repo(tmp_path / "proj")
    team = team_dir_of(isolated_env, root)
    caller = await handle.client()
    try:
        await handle.call("team.pull", cwd=str(root))  # the folder syncs (an empty pull)
        proxy.script(Fault.stall(120.0), method="PUT", times=10)
        (team / "a.md").write_text("pending when the daemon stopped\n")
        await eventually(lambda: proxy.requests("PUT") == 1)  # the watcher's push: no answer
        pushing = asyncio.create_task(caller.call("team.push", {"cwd": str(root)}))
        await eventually(lambda: len(handle.daemon.inflight) == 1)
        handle.daemon.shutdown_requested.set()  # what SIGTERM and the `shutdown` method do
    finally:
        await stop_daemon(handle)
    result = await pushing
    await caller.close()

    assert result["ok"] is False
    assert "the daemon is stopping" in result["error"]
    assert proxy.requests("PUT") == 1  # no final push into a server that did not answer
    assert "a.md" not in server_history(server)

    proxy.clear()
    again = await start(short_tmp, "b", url=proxy.url, token=token)
    daemons.append(again)
    await eventually(lambda: "a.md" in server_history(server))
    assert server_history(server)["a.md"] == ["pending when the daemon stopped\n"]


async def test_a_stop_request_leaves_the_final_push_to_a_server_that_answers(
    server: ThreadedServer,
    short_tmp: Path,
    tmp_path: Path,
    isolated_env: IsolatedEnv,
) -> None:
    """The shutdown deadline bounds requests; it must not cost the final push when nothing
    stalled, however long the drain before it took."""
    token = server.token(REPO)
    handle = await start(short_tmp, "a", url=server.url, token=token, debounce_s=60.0)
    handle.daemon.services.team.tuning = Tuning(debounce_s=60.0, shutdown_push_timeout_s=1.0)
    root = make_repo(tmp_path / "proj")
    team = team_dir_of(isolated_env, root)
    await handle.call("team.pull", cwd=str(root))
    try:
        (team / "b.md").write_text("written right before the stop\n")
        handle.daemon.shutdown_requested.set()
        await asyncio.sleep(1.5)  # past the budget counted from the stop request (a long drain)
    finally:
        await stop_daemon(handle)
    assert server_history(server)["b.md"] == ["written right before the stop\n"]


async def test_stop_by_ends_a_request_in_flight_and_refuses_later_ones() -> None:
    answered = asyncio.Event()

    async def never(_: httpx.Request) -> httpx.Response:
        await answered.wait()
        raise AssertionError("not reached")

    client = TeamClient("http://team.invalid", "tok", transport=httpx.MockTransport(never))
    loop = asyncio.get_running_loop()
    fetching = asyncio.create_task(client.fetch(REPO))
    await eventually(lambda: client.requests == 1)
    client.stop_by(loop.time() + 0.2)
    with pytest.raises(Stopping, match="did not answer by its shutdown deadline"):
        await fetching
    assert client.cut_short
    with pytest.raises(Stopping, match="no request to the team server now"):
        await client.fetch(REPO)
    assert client.requests == 1  # refused before anything was sent
    await client.close()
