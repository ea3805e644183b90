"""A real sync client (`SyncEngine`) whose upload stalls mid-body (a laptop that slept, a
dropped VPN) against the real server: the server gives up on that body, and the client takes
its answer as a failure to retry, not as a refusal that stops its pushes until a restart."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from memoryd.team.sync.client import Permanent, Retryable
from memoryd_team.settings import ServerSettings
from tests.team.conftest import REPO, SideFactory, make_side, server_history
from tests.team_server.conftest import ThreadedServer

__all__ = ["make_side"]  # the fixture, imported so pytest finds it here


class BodyStallTransport(httpx.AsyncBaseTransport):
    """The client's HTTP over real TCP, whose first PUT sends its head and part of its body,
    then nothing for `hold_s` (the laptop asleep mid-upload), then the rest."""

    def __init__(self, hold_s: float) -> None:
        self.hold_s = hold_s
        self.stalled = False
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method != "PUT" or self.stalled:
            return await self._inner.handle_async_request(request)
        self.stalled = True
        body = await request.aread()

        async def stalling() -> AsyncIterator[bytes]:
            yield body[:10]
            await asyncio.sleep(self.hold_s)
            yield body[10:]

        # Its Content-Length kept: the server waits for the rest of a body it knows the size of.
        held = httpx.Request(
            request.method, request.url, headers=request.headers, content=stalling()
        )
        return await self._inner.handle_async_request(held)

    async def aclose(self) -> None:
        await self._inner.aclose()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_a_push_whose_upload_stalled_is_retried_and_goes_up(
    database_url: str, make_side: SideFactory
) -> None:
    # The server answered a stalled body 408 body_timeout, which the client (SPEC.md: any
    # 4xx but 409/429 is permanent) took as a refusal: pushing stopped until a restart.
    server = ThreadedServer(database_url, ServerSettings(body_timeout_s=0.3)).start()
    stall = BodyStallTransport(hold_s=1.0)
    try:
        token = server.token(REPO)
        laptop = make_side("laptop", server.url, token, transport=stall)
        laptop.write("plan.md", "plan\n")
        with pytest.raises(Retryable) as failed:  # the stalled PUT: a failure to retry
            await laptop.engine.push()
        assert not isinstance(failed.value, Permanent)
        assert stall.stalled
        assert laptop.engine.state.suppressed is None
        assert not server_history(server)
        # Awake again: the next try (the runner's back-off) goes up, nothing lost.
        report = await laptop.engine.push()
        assert report.pushed == ["plan.md"]
        assert list(server_history(server)) == ["plan.md"]
    finally:
        server.stop()
