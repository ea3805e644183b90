"""A provider's Retry-After: no call is sent before it, and none waits past what its caller
or our cap allows (a recall answers a prompt)."""

from __future__ import annotations

import asyncio
import datetime
import time
from dataclasses import replace
from email.utils import format_datetime
from pathlib import Path

import httpx
import pytest

from memoryd.automem.manifest import MemoryHeader
from memoryd.automem.quickadd import choose
from memoryd.automem.recall.pick import SELECTOR_TIMEOUT_S, select_with_model
from memoryd.llm import client as client_module
from memoryd.llm.client import MAX_HOLD_S, ModelClient, ModelError, _retry_after_s
from tests.automem.conftest import write_memory
from tests.conftest import DaemonHandle, fake_model_config
from tests.fakes.messages_api import FakeMessagesAPI, Reply, error_reply, slow, text_reply

ASK = {"feature": "t", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}


def _limited(retry_after: str) -> Reply:
    limited = error_reply(429, "rate_limit_error", "slow down")
    return Reply(limited.status, limited.body, headers={"retry-after": retry_after})


async def test_a_wait_past_the_cap_fails_at_once_and_holds_later_calls(
    fake_model: FakeMessagesAPI,
) -> None:
    # Before, the call waited the cap (0.05 s) and asked again, refused each time until its
    # retries ran out, and every later call did the same within the provider's minute.
    fake_model.enqueue(_limited("0.6"))
    fake_model.handler = lambda _request: text_reply("ok")
    client = ModelClient(fake_model_config(fake_model))
    with pytest.raises(ModelError) as first:
        await client.create(**ASK)
    assert first.value.status == 429
    assert len(fake_model.message_requests()) == 1
    assert client.problem is not None
    assert "rate limited" in client.problem
    with pytest.raises(ModelError, match="not sent: the provider asked to wait"):
        await client.create(**ASK)
    assert len(fake_model.message_requests()) == 1  # nothing was sent during the hold
    await asyncio.sleep(0.6)
    reply = await client.create(**ASK)
    assert reply.content[0].text == "ok"  # type: ignore[union-attr]
    await client.close()


async def test_a_call_that_can_wait_for_the_hold_waits_then_sends(
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.enqueue(_limited("0.4"), text_reply("first"), text_reply("second"))
    client = ModelClient(replace(fake_model_config(fake_model), retry_max_delay_s=5.0))

    async def later() -> object:
        await asyncio.sleep(0.05)  # sent while the first call waits out the hold
        return await client.create(**ASK)

    await asyncio.gather(client.create(**ASK), later())
    refused, *sent = fake_model.message_requests()
    assert len(sent) == 2
    assert all(r.received_at - refused.received_at >= 0.39 for r in sent)
    await client.close()


async def test_a_wait_past_the_callers_patience_fails_at_once(
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.enqueue(_limited("0.5"), text_reply("late"))
    client = ModelClient(replace(fake_model_config(fake_model), retry_max_delay_s=5.0))
    with pytest.raises(ModelError):
        await client.create(patience_s=0.2, **ASK)
    assert len(fake_model.message_requests()) == 1
    await client.close()


def test_retry_after_is_read_in_each_form_a_provider_sends() -> None:
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    soon = format_datetime(now + datetime.timedelta(seconds=30), usegmt=True)
    read = lambda headers: _retry_after_s(httpx.Headers(headers))  # noqa: E731
    assert read({"retry-after": "7"}) == 7.0
    assert read({"retry-after-ms": "1500", "retry-after": "7"}) == 1.5
    assert 25 <= (read({"retry-after": soon}) or 0) <= 30
    assert read({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # past: no wait
    for unreadable in ("soon", "-1", "inf", "nan", ""):
        assert read({"retry-after": unreadable}) is None
    assert read({}) is None


async def test_recall_during_a_rate_limit_falls_back_without_asking_again(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, project: Path
) -> None:
    # The provider asks for a minute; the daemon's cap is 0.05 s. Before, each recall sent
    # four requests (a try and three retries, each refused) before ranking locally: against
    # a real provider (a 20 s cap, a 10 s recall timeout) each prompt waited 10 s.
    await write_memory(daemon_with_model, project, "user", "Prefers tabs", "indentation", "Tabs.")
    fake_model.handler = lambda _request: _limited("60")
    for _ in range(2):
        got = await daemon_with_model.call("recall", cwd=str(project), query="tabs or spaces?")
        assert got["selector"] == "local"
        assert [m["name"] for m in got["memories"]] == ["Prefers tabs"]
    assert len(fake_model.message_requests()) == 1


async def test_after_a_call_failed_past_its_retries_the_next_is_tried_once(
    fake_model: FakeMessagesAPI,
) -> None:
    # Before, every call during an overload made its four retries: each recall waited 4-10 s
    # before ranking locally, and each added five requests to the provider's load.
    overloaded = error_reply(529, "overloaded_error", "Overloaded")
    fake_model.handler = lambda _request: overloaded
    client = ModelClient(fake_model_config(fake_model))  # three retries
    with pytest.raises(ModelError):
        await client.create(**ASK)
    assert len(fake_model.message_requests()) == 4
    with pytest.raises(ModelError):
        await client.create(**ASK)
    assert len(fake_model.message_requests()) == 5  # one try
    fake_model.handler = None
    fake_model.enqueue(text_reply("back"), overloaded, text_reply("retried"))
    await client.create(**ASK)  # the provider is back: its success ends the single tries
    reply = await client.create(**ASK)
    assert reply.content[0].text == "retried"  # type: ignore[union-attr]
    assert len(fake_model.message_requests()) == 8
    await client.close()


async def test_recall_during_an_overload_asks_the_model_once_a_prompt(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, project: Path
) -> None:
    await write_memory(daemon_with_model, project, "user", "Prefers tabs", "indentation", "Tabs.")
    fake_model.handler = lambda _request: error_reply(529, "overloaded_error", "Overloaded")
    for _ in range(3):
        got = await daemon_with_model.call("recall", cwd=str(project), query="tabs or spaces?")
        assert got["selector"] == "local"
    assert len(fake_model.message_requests()) == 4 + 1 + 1


async def test_the_selector_gives_up_at_once_on_a_wait_past_its_timeout(
    fake_model: FakeMessagesAPI,
) -> None:
    # Found by a bug hunt: a Retry-After between the selector's 10 s and the client's cap
    # was waited until the selector's timeout cut it, so that prompt's recall took 10 s.
    fake_model.enqueue(_limited(str(SELECTOR_TIMEOUT_S + 5)))
    client = ModelClient(replace(fake_model_config(fake_model), retry_max_delay_s=60.0))
    header = MemoryHeader(Path("/m/a.md"), "Tabs", "indentation", "user", 0.0, False, file="a.md")
    chosen = await asyncio.wait_for(
        select_with_model(client, "tabs?", [header], [], 5), timeout=SELECTOR_TIMEOUT_S / 2
    )
    assert chosen is None  # the local ranker's turn
    assert len(fake_model.message_requests()) == 1
    await client.close()


async def test_the_selector_may_answer_with_a_file_name_as_the_manifest_showed_it(
    fake_model: FakeMessagesAPI,
) -> None:
    # A name with a control character is shown percent-encoded; the model answers with that.
    file = "a\nb.md"
    fake_model.enqueue(text_reply('{"selected": ["a%0Ab.md"]}'))
    client = ModelClient(fake_model_config(fake_model))
    header = MemoryHeader(Path("/m") / file, "Tabs", "indentation", "user", 0.0, False, file=file)
    assert await select_with_model(client, "tabs?", [header], [], 5) == [header]
    await client.close()


async def test_quick_add_derives_at_once_on_a_wait_past_its_timeout(
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.enqueue(_limited("25"))  # past quick add's 20 s
    client = ModelClient(replace(fake_model_config(fake_model), retry_max_delay_s=60.0))
    quick = await asyncio.wait_for(choose(client, "Dana owns billing", None, None), timeout=10)
    assert quick.derived_by == "local"
    assert len(fake_model.message_requests()) == 1
    await client.close()


class _Later:
    """The `time` module with its monotonic clock `offset` seconds on."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)

    def monotonic(self) -> float:
        return time.monotonic() + self.offset


async def test_a_retry_after_far_off_holds_the_model_five_minutes_at_most(
    fake_model: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before, a year's Retry-After (a proxy's page, a wrong clock) held the model until the
    # daemon restarted: no recall or extraction was tried again.
    fake_model.enqueue(_limited("31536000"), _limited("31536000"))
    fake_model.handler = lambda _request: text_reply("ok")
    later = _Later()
    monkeypatch.setattr(client_module, "time", later)
    client = ModelClient(fake_model_config(fake_model))
    with pytest.raises(ModelError):
        await client.create(**ASK)
    later.offset = MAX_HOLD_S - 1
    with pytest.raises(ModelError, match="not sent"):
        await client.create(**ASK)
    assert len(fake_model.message_requests()) == 1
    later.offset = MAX_HOLD_S + 1
    with pytest.raises(ModelError) as refused:  # tried once, refused: held again
        await client.create(**ASK)
    assert refused.value.status == 429
    assert len(fake_model.message_requests()) == 2
    with pytest.raises(ModelError, match="not sent"):
        await client.create(**ASK)
    later.offset = 2 * MAX_HOLD_S + 2
    reply = await client.create(**ASK)
    assert reply.content[0].text == "ok"  # type: ignore[union-attr]
    await client.close()


async def test_a_call_waiting_out_a_hold_waits_for_the_later_one_a_call_in_flight_got(
    fake_model: FakeMessagesAPI,
) -> None:
    # The first call's 429 comes late and asks for longer than the second's: the third call,
    # waiting out the second's hold, was sent when it ended, before the provider's time.
    fake_model.enqueue(slow(0.3, _limited("0.8")), _limited("0.5"))
    fake_model.handler = lambda _request: text_reply("ok")
    client = ModelClient(replace(fake_model_config(fake_model), retry_max_delay_s=5.0))

    async def after(delay_s: float) -> object:
        await asyncio.sleep(delay_s)
        return await client.create(**ASK)

    await asyncio.gather(after(0), after(0.05), after(0.12))
    first, _, *later = fake_model.message_requests()
    assert len(later) == 3
    moved_on = first.received_at + 0.3 + 0.8  # the first call's refusal and its wait
    assert all(r.received_at >= moved_on - 0.05 for r in later)
    await client.close()
