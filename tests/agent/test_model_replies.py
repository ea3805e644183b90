"""What the model endpoint sends back that is no message: a 200 with an HTML page, with an
error object, with JSON cut short. Each is a failed call (ModelError) for every caller, never
an exception the caller did not expect (recall and remember answered -32603 before)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memoryd.llm.client import ModelError
from tests.conftest import DaemonHandle, daemon_config, fake_model_config, start_daemon, stop_daemon
from tests.fakes.messages_api import FakeMessagesAPI, Reply, message

# The body, its content type, and whether a call that got it is tried again (a page stays a
# page; "overloaded" and a body cut short pass).
BODIES = {
    "html page": (b"<html><body>Sign in to the network</body></html>", "text/html"),
    "error object": (
        b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}',
        "application/json",
    ),
    "json cut short": (b'{"id": "msg_1", "type": "mess', "application/json"),
}


class RawServer:
    """Answers every HTTP request with one fixed 200 body (what the fake cannot send: a body
    that is not whole JSON)."""

    def __init__(self, body: bytes, content_type: str) -> None:
        self.body, self.content_type = body, content_type
        self.requests = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.decode("latin-1").split("\r\n"):
            if line.lower().startswith("content-length:"):
                length = int(line.split(":", 1)[1])
        await reader.readexactly(length)
        self.requests += 1
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: " + self.content_type.encode() + b"\r\n"
            b"content-length: "
            + str(len(self.body)).encode()
            + b"\r\nconnection: close\r\n\r\n"
            + self.body
        )
        await writer.drain()
        writer.close()

    async def __aenter__(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        await self._server.wait_closed()


@pytest.fixture
async def raw_daemon(
    short_tmp: Path, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[DaemonHandle, RawServer]]:
    body, kind = BODIES[request.param]
    server = RawServer(body, kind)
    async with server as base_url:
        fake = FakeMessagesAPI()
        fake.port = int(base_url.rsplit(":", 1)[1])
        handle = await start_daemon(daemon_config(short_tmp, model=fake_model_config(fake)))
        try:
            yield handle, server
        finally:
            await stop_daemon(handle)


@pytest.mark.parametrize("raw_daemon", list(BODIES), indirect=True)
async def test_a_200_that_is_no_message_is_a_failed_call(
    raw_daemon: tuple[DaemonHandle, RawServer], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    request_kind = request.node.callspec.params["raw_daemon"]
    handle, server = raw_daemon
    with pytest.raises(ModelError) as info:
        await handle.daemon.model.create(
            feature="probe", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
    assert "reply" in info.value.message
    retried = request_kind != "html page"
    assert server.requests == (4 if retried else 1)  # 1 + 3 retries (fake_model_config)
    assert handle.daemon.model.usage["probe"].errors >= 1
    assert handle.daemon.model.recent[-1].ok is False
    # The callers fall back as on any failed call instead of answering -32603.
    cwd = tmp_path / "proj"
    cwd.mkdir()
    await handle.call(
        "memory.write", cwd=str(cwd), name="Commits", description="small commits",
        type="feedback", body="Prefer small commits.",
    )  # fmt: skip
    recalled = await handle.call("recall", cwd=str(cwd), query="how should I commit?")
    assert isinstance(recalled["memories"], list)
    saved = await handle.call("memory.remember", cwd=str(cwd), text="I prefer tabs")
    assert saved["derived_by"] == "local"


async def test_an_error_object_that_says_overloaded_is_retried(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI
) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    fake_model.enqueue(Reply(200, overloaded), message([{"type": "text", "text": "fine"}]))
    reply = await daemon_with_model.daemon.model.create(
        feature="probe", max_tokens=5, messages=[{"role": "user", "content": "x"}]
    )
    assert reply.content[0].text == "fine"  # type: ignore[union-attr]
    assert daemon_with_model.daemon.model.usage["probe"].retries == 1


async def test_a_reply_without_usage_is_a_successful_call(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI
) -> None:
    body = dict(message([{"type": "text", "text": "fine"}]).body)
    del body["usage"]
    fake_model.enqueue(Reply(200, body))
    await daemon_with_model.daemon.model.create(
        feature="probe", max_tokens=5, messages=[{"role": "user", "content": "x"}]
    )
    record = daemon_with_model.daemon.model.recent[-1]
    assert record.ok is True
    assert (record.input_tokens, record.output_tokens) == (0, 0)


async def test_an_error_page_is_cut_short_in_the_error(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI
) -> None:
    # A proxy's 403 page went whole into the error: a log line per attempt and a worker/error
    # of 600 KB here (up to the 16 MiB reply cap).
    page = "<html><body>" + "Access denied.\n" * 40_000 + "</body></html>"
    fake_model.enqueue(Reply(403, page, headers={"content-type": "text/html"}))  # type: ignore[arg-type]
    with pytest.raises(ModelError) as info:
        await daemon_with_model.daemon.model.create(
            feature="probe", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
    message = info.value.message
    assert message.startswith("HTTP 403")
    assert "Access denied. Access denied." in message
    assert len(message) < 700
    assert "characters in all" in message
