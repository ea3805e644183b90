"""The fake Messages API speaks the real SDK's protocol (SDK configured like production)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import anthropic
import pytest

from memoryd.llm.client import ModelClient, ModelError
from tests.conftest import fake_model_config
from tests.fakes.messages_api import (
    FakeMessagesAPI,
    endless_reply,
    error_reply,
    json_reply,
    slow,
    text_reply,
    tool_use_reply,
    trickled,
)


async def test_real_sdk_talks_to_the_fake(fake_model: FakeMessagesAPI) -> None:
    fake_model.enqueue(text_reply("hello there", input_tokens=12, output_tokens=3))
    client = anthropic.AsyncAnthropic(api_key="sk-test", base_url=fake_model.base_url)
    reply = await client.messages.create(
        model="claude-x", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )
    await client.close()
    assert reply.content[0].type == "text"
    assert reply.content[0].text == "hello there"
    assert reply.usage.input_tokens == 12
    (request,) = fake_model.message_requests()
    assert request.json["messages"] == [{"role": "user", "content": "hi"}]
    # SDK versions differ in which header carries the key; it must arrive in one of them.
    credential = request.headers.get("x-api-key") or request.headers.get("authorization", "")
    assert credential.endswith("sk-test")


async def test_model_client_counts_tokens_per_feature(fake_model: FakeMessagesAPI) -> None:
    fake_model.enqueue(
        text_reply(
            "a",
            input_tokens=10,
            output_tokens=2,
            cache_read_input_tokens=7,
            cache_creation_input_tokens=20_000,
        ),
        tool_use_reply([("Read", {"file_path": "/x"})], input_tokens=5, output_tokens=1),
        json_reply({"selected": ["a.md"]}, input_tokens=3, output_tokens=4),
    )
    client = ModelClient(fake_model_config(fake_model))
    for feature in ("extraction", "extraction", "recall"):
        await client.create(
            feature=feature, max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    await client.close()
    usage = client.status()["usage"]
    assert usage["extraction"]["input_tokens"] == 15
    assert usage["extraction"]["cache_read_input_tokens"] == 7
    assert usage["recall"]["output_tokens"] == 4
    assert usage["recall"]["calls"] == 1
    recent = client.status()["recent_calls"]
    assert [c["feature"] for c in recent] == ["extraction", "extraction", "recall"]
    assert recent[0]["input_tokens"] == 10
    assert recent[0]["cache_read_input_tokens"] == 7
    # Found by a hunt: cache writes were left out, an agent turn that wrote 20,000 was "0".
    assert recent[0]["cache_creation_input_tokens"] == 20_000
    assert all(c["ok"] for c in recent)


async def test_model_client_retries_overloaded_then_succeeds(fake_model: FakeMessagesAPI) -> None:
    fake_model.enqueue(
        error_reply(529, "overloaded_error", "Overloaded"),
        error_reply(429, "rate_limit_error", "slow down"),
        error_reply(500, "api_error", "boom"),
        text_reply("finally"),
    )
    client = ModelClient(fake_model_config(fake_model))
    reply = await client.create(
        feature="t", max_tokens=5, messages=[{"role": "user", "content": "x"}]
    )
    await client.close()
    assert reply.content[0].text == "finally"  # type: ignore[union-attr]
    assert client.usage["t"].retries == 3
    assert len(fake_model.message_requests()) == 4


async def test_model_client_gives_up_after_max_retries(fake_model: FakeMessagesAPI) -> None:
    fake_model.handler = lambda _req: error_reply(529, "overloaded_error", "Overloaded")
    client = ModelClient(fake_model_config(fake_model))
    with pytest.raises(ModelError) as info:
        await client.create(feature="t", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    await client.close()
    assert info.value.status == 529
    assert len(fake_model.message_requests()) == 4  # 1 + max_retries(3)


async def test_model_client_does_not_retry_bad_request(fake_model: FakeMessagesAPI) -> None:
    fake_model.enqueue(error_reply(400, "invalid_request_error", "bad"))
    client = ModelClient(fake_model_config(fake_model))
    with pytest.raises(ModelError):
        await client.create(feature="t", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    await client.close()
    assert len(fake_model.message_requests()) == 1


async def test_model_client_call_can_be_cancelled(fake_model: FakeMessagesAPI) -> None:
    import asyncio

    fake_model.enqueue(slow(5.0, text_reply("too late")))
    client = ModelClient(fake_model_config(fake_model))
    task = asyncio.create_task(
        client.create(feature="t", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    )
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await client.close()


async def test_model_client_waits_as_long_as_retry_after_asks(fake_model: FakeMessagesAPI) -> None:
    import dataclasses
    import time

    from tests.fakes.messages_api import Reply

    limited = error_reply(429, "rate_limit_error", "slow down")
    fake_model.enqueue(
        Reply(limited.status, limited.body, headers={"retry-after": "0.4"}), text_reply("ok")
    )
    config = dataclasses.replace(fake_model_config(fake_model), retry_max_delay_s=5.0)
    client = ModelClient(config)
    started = time.monotonic()
    await client.create(feature="t", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    await client.close()
    first, second = fake_model.message_requests()
    assert second.received_at - first.received_at >= 0.39  # base delay alone is ~0.01 s
    assert time.monotonic() - started < 5


async def test_a_reply_that_never_ends_is_cut_at_the_cap(fake_model: FakeMessagesAPI) -> None:
    # The SDK reads a reply whole: an endpoint sending without end grew the daemon until
    # the OOM killer came.
    from memoryd.llm.client import MAX_REPLY_BYTES

    fake_model.enqueue(endless_reply())
    fake_model.handler = lambda _body: text_reply("back to normal")
    client = ModelClient(replace(fake_model_config(fake_model), max_retries=0))
    with pytest.raises(ModelError) as info:
        await asyncio.wait_for(
            client.create(
                feature="recall", max_tokens=10, messages=[{"role": "user", "content": "x"}]
            ),
            30,
        )
    assert f"over {MAX_REPLY_BYTES:,} bytes" in info.value.message
    reply = await client.create(
        feature="recall", max_tokens=10, messages=[{"role": "user", "content": "x"}]
    )
    assert reply.content[0].text == "back to normal"  # type: ignore[union-attr]
    await client.close()


async def test_a_reply_sent_a_byte_at_a_time_is_given_up_at_the_deadline(
    fake_model: FakeMessagesAPI,
) -> None:
    # The SDK's timeout is per read: a byte every 50 ms kept the call going for ever.
    fake_model.enqueue(trickled(text_reply("x" * 2000), chunk=1, gap_s=0.05))
    config = replace(fake_model_config(fake_model), timeout_s=0.5, max_retries=0)
    client = ModelClient(config)
    with pytest.raises(ModelError, match=r"no whole reply within 1 s") as info:
        await asyncio.wait_for(
            client.create(
                feature="recall", max_tokens=10, messages=[{"role": "user", "content": "x"}]
            ),
            30,
        )
    assert info.value.retryable
    await client.close()


def test_stop_closes_a_connection_whose_reply_never_ended() -> None:
    # Seen under load: stop() left the connection of an endless reply open when its client's
    # hang-up had not been seen yet; the transport outlived the server's loop and gave
    # "ResourceWarning: unclosed transport" in whatever test collected it.
    import socket

    api = FakeMessagesAPI().start()
    api.enqueue(endless_reply())
    body = b'{"model": "m", "max_tokens": 1, "messages": []}'
    with socket.create_connection(("127.0.0.1", api.port)) as client:
        client.sendall(
            b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        assert api._server is not None
        connections = api._server.server_state.connections
        deadline = time.monotonic() + 60
        # Mid-reply, the client neither reading nor hung up: once the socket's buffers are
        # full the transport holds what it could not send, and a close() alone never ends.
        while not any(c.transport.get_write_buffer_size() for c in list(connections)):
            assert time.monotonic() < deadline, "the reply never filled the socket's buffers"
            time.sleep(0.01)
        api.stop()
        assert not api._server.server_state.connections
        assert not api._server.server_state.tasks  # the reply ended, not cancelled
