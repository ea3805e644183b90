"""A model key that cannot work is refused at start, and no credential reaches a client.

Found by a bug hunt: an ANTHROPIC_API_KEY pasted with its newline was taken as is; `status`
said configured, every call failed in the transport with `Illegal header value b'Bearer
sk-ant-…\\n'`, and that text, key and all, went to every subscriber as `worker/error`.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from memoryd.core.model_config import ModelConfig, scrub_credentials
from memoryd.core.team_config import TeamConfig
from memoryd.llm.client import ModelClient, ModelError
from tests.background.conftest import transcript
from tests.conftest import daemon_config, fake_model_config, start_daemon, stop_daemon
from tests.fakes.messages_api import FakeMessagesAPI, error_reply

KEY = "sk-ant-api03-" + "k7Qx" * 10 + "AA"
TEAM_TOKEN = "mdt_" + "T0k3n" * 8


@pytest.mark.parametrize("bad", [KEY + "\n", KEY + " ", " " + KEY, KEY[:20] + "é" + KEY[20:]])
async def test_a_key_that_cannot_go_into_a_header_leaves_the_model_off(
    short_tmp: Path, fake_model: FakeMessagesAPI, bad: str
) -> None:
    model = replace(fake_model_config(fake_model), api_key=bad)
    handle = await start_daemon(daemon_config(short_tmp, model=model))
    try:
        status = await handle.call("status")
        assert status["model"]["configured"] is False
        assert "ANTHROPIC_API_KEY is not a usable key" in status["model"]["reason"]
        assert status["features"]["model"]["enabled"] is False
        project = short_tmp / "proj"
        project.mkdir()
        messages = transcript(("remember that I like tabs", "noted"))
        reply = await handle.call(
            "after_turn", session_id="s1", cwd=str(project), messages=messages
        )
        assert reply["scheduled"]["extraction"] is False
        await asyncio.sleep(0.1)
        assert fake_model.message_requests() == []  # no call made
    finally:
        await stop_daemon(handle)


def test_an_auth_token_gets_the_same_check() -> None:
    client = ModelClient(ModelConfig(auth_token="tok-" + "x" * 20 + "\n"))
    assert not client.configured
    assert client.reason is not None
    assert "ANTHROPIC_AUTH_TOKEN is not a usable key" in client.reason
    assert ModelClient(ModelConfig(api_key=KEY)).configured


async def test_a_model_error_quoting_the_key_does_not_carry_it(
    fake_model: FakeMessagesAPI,
) -> None:
    # A provider (or proxy) that echoes the credential in its error message.
    fake_model.enqueue(error_reply(401, "authentication_error", f"invalid x-api-key {KEY}"))
    client = ModelClient(replace(fake_model_config(fake_model), api_key=KEY))
    try:
        with pytest.raises(ModelError) as raised:
            await client.create(
                feature="t", max_tokens=5, messages=[{"role": "user", "content": "x"}]
            )
    finally:
        await client.close()
    assert KEY not in raised.value.message
    assert "invalid x-api-key [redacted]" in raised.value.message


async def test_worker_errors_never_carry_a_configured_credential(short_tmp: Path) -> None:
    config = daemon_config(
        short_tmp,
        model=ModelConfig(api_key=KEY),
        team=TeamConfig(url="https://team.example", token=TEAM_TOKEN),
    )
    handle = await start_daemon(config)
    try:
        client = await handle.client()
        await client.call("subscribe", {"events": ["worker/error"]})
        await handle.daemon.report_worker_error(
            "extraction",
            f"model call failed: Illegal header value b'Bearer {KEY}\\n'",
            detail=f"Authorization: Bearer {TEAM_TOKEN}",
        )
        note: dict[str, Any] = await asyncio.wait_for(client.notifications.get(), 5)
        await client.close()
    finally:
        await stop_daemon(handle)
    text = str(note)
    assert KEY not in text
    assert KEY[:20] not in text
    assert TEAM_TOKEN not in text
    message = note["params"]["message"]
    assert message == "model call failed: Illegal header value b'Bearer [redacted]\\n'"


def test_scrubbing_takes_each_form_a_message_may_quote() -> None:
    key = KEY + "\n"
    quoted = f"b'Bearer {KEY}\\n' / {KEY} / {key}"
    assert scrub_credentials(quoted, [key]) == "b'Bearer [redacted]' / [redacted] / [redacted]"
    assert scrub_credentials("a short x", ["x"]) == "a short x"  # too short to scrub safely
    assert scrub_credentials("nothing here", [None, ""]) == "nothing here"
