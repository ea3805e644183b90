"""`status` says what is wrong with a configured model whose calls fail, and how to mend it.

Found by a bug hunt: with a key the provider refused (401), a model it does not serve (404),
a long rate limit (429), an endpoint that is a web page or that nothing listens on, `status`
said `model: configured` with `reason: null`; only `recent_calls` held a status code. And
ANTHROPIC_BASE_URL=notaurl was taken as an endpoint: every call failed in the transport,
retried for seconds each.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from memoryd.core.model_config import ModelConfig
from memoryd.llm.client import ModelClient, ModelError
from tests.conftest import (
    DaemonHandle,
    daemon_config,
    fake_model_config,
    start_daemon,
    stop_daemon,
)
from tests.fakes.messages_api import FakeMessagesAPI, error_reply, json_reply, text_reply


async def _recall(handle: DaemonHandle, project: Path) -> str:
    reply = await handle.call("recall", cwd=str(project), query="tabs or spaces")
    return str(reply["selector"])


async def test_a_refused_key_is_named_in_status_until_a_call_succeeds(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, tmp_path: Path
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    await daemon_with_model.call(
        "memory.write", cwd=str(project), type="user", name="tabs", description="tabs", body="t"
    )
    fake_model.handler = lambda _request: error_reply(
        401, "authentication_error", "invalid x-api-key"
    )
    assert await _recall(daemon_with_model, project) == "local"
    assert await _recall(daemon_with_model, project) == "local"
    status = await daemon_with_model.call("status")
    problem = status["model"]["problem"]
    assert problem.startswith(
        f"the model key was refused: {fake_model.base_url} answered HTTP 401 "
        "authentication_error invalid x-api-key; check ANTHROPIC_API_KEY in the daemon's "
        "environment, then `memctl restart` (2 calls in a row failed, since "
    )
    assert status["model"]["configured"] is True
    assert status["features"]["model"] == {"enabled": True, "reason": None, "problem": problem}
    fake_model.handler = lambda _request: json_reply({"selected": []})
    await _recall(daemon_with_model, project)
    status = await daemon_with_model.call("status")
    assert status["model"]["problem"] is None
    assert status["features"]["model"]["problem"] is None


@pytest.mark.parametrize(
    ("status", "kind", "needle"),
    [
        (403, "permission_error", "check ANTHROPIC_API_KEY's permissions"),
        (404, "not_found_error", "model claude-fake-small or the endpoint was not found"),
        (429, "rate_limit_error", "rate limited by the provider"),
        (400, "invalid_request_error", "check ANTHROPIC_BASE_URL (it must serve"),
    ],
)
async def test_each_refusal_names_what_mends_it(
    short_tmp: Path,
    fake_model: FakeMessagesAPI,
    tmp_path: Path,
    status: int,
    kind: str,
    needle: str,
) -> None:
    config = replace(fake_model_config(fake_model), max_retries=0)
    handle = await start_daemon(daemon_config(short_tmp, model=config))
    try:
        project = tmp_path / "proj"
        project.mkdir()
        fake_model.handler = lambda _request: error_reply(status, kind, "no")
        await handle.call(
            "memory.write", cwd=str(project), type="user", name="tabs", description="t", body="t"
        )
        assert await _recall(handle, project) == "local"
        problem = (await handle.call("status"))["model"]["problem"]
    finally:
        await stop_daemon(handle)
    assert needle in problem
    assert "(the last call, at " in problem


async def test_an_endpoint_that_serves_a_web_page_or_nothing_is_named() -> None:
    client = ModelClient(ModelConfig(api_key="k" * 20, base_url="http://127.0.0.1:1"))
    page = ModelError("recall", "HTTP 501 <!DOCTYPE HTML><html><body>Error</body></html>", 501)
    client._note_failure(page, "m")
    assert client.problem is not None
    assert client.problem.startswith(
        "http://127.0.0.1:1 answered a web page, not the Anthropic Messages API: HTTP 501"
    )
    refused = ModelError("recall", "APIConnectionError: Connection refused", None, True)
    client._note_failure(refused, "m")
    assert client.problem.startswith(
        "cannot reach http://127.0.0.1:1: APIConnectionError: Connection refused; check "
        "ANTHROPIC_BASE_URL and the network"
    )


@pytest.mark.parametrize(
    ("url", "fault"),
    [
        ("notaurl", "does not start with http:// or https:// (7 characters)"),
        ("ftp://host", "does not start with http:// or https:// (10 characters)"),
        ("http://:8080", "has no host"),
        ("http://h:port", "its port is not a number from 1 to 65535"),
        ("http://", "has no host"),
    ],
)
def test_a_base_url_that_is_no_endpoint_leaves_the_model_off(url: str, fault: str) -> None:
    client = ModelClient(ModelConfig(api_key="k" * 20, base_url=url))
    assert not client.configured
    assert client.reason is not None
    assert client.reason.startswith(f"ANTHROPIC_BASE_URL {fault}; set it")
    assert ModelClient(ModelConfig(api_key="k" * 20, base_url="https://x.example/v1")).configured


_HI = {"max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
async def clients() -> AsyncIterator[list[ModelClient]]:
    made: list[ModelClient] = []
    yield made
    for client in made:
        await client.close()


async def _fails(client: ModelClient, model: str) -> None:
    with pytest.raises(ModelError):
        await client.create(feature="test", model=model, **_HI)


async def test_a_model_s_refusal_stays_while_the_other_model_works(
    fake_model: FakeMessagesAPI, clients: list[ModelClient]
) -> None:
    # Found in review: MEMORYD_MODEL naming a model the provider does not serve (404) was
    # cleared by the next recall's success with the small model, every turn, while every
    # extraction and dream failed.
    client = ModelClient(replace(fake_model_config(fake_model), max_retries=0))
    clients.append(client)
    fake_model.handler = lambda request: (
        error_reply(404, "not_found_error", "model: claude-fake-large")
        if request["model"] == "claude-fake-large"
        else text_reply("ok")
    )
    await _fails(client, "claude-fake-large")
    await client.create(feature="test", model="claude-fake-small", **_HI)
    assert client.problem is not None
    assert client.problem.startswith("model claude-fake-large or the endpoint was not found")
    fake_model.handler = lambda _request: text_reply("ok")
    await client.create(feature="test", model="claude-fake-large", **_HI)
    assert client.problem is None
    # A refused key is the key's, whichever model's call then succeeds.
    fake_model.handler = lambda _request: error_reply(401, "authentication_error", "no")
    await _fails(client, "claude-fake-large")
    fake_model.handler = lambda _request: text_reply("ok")
    await client.create(feature="test", model="claude-fake-small", **_HI)
    assert client.problem is None


async def test_an_overloaded_provider_is_no_problem_and_clears_none(
    fake_model: FakeMessagesAPI, clients: list[ModelClient]
) -> None:
    # Found in review: a 529 (or 5xx) after its retries was a setup problem in status, so
    # `memctl status` and the editors' status line showed one, with nothing to mend.
    client = ModelClient(replace(fake_model_config(fake_model), max_retries=1))
    clients.append(client)
    fake_model.handler = lambda _request: error_reply(529, "overloaded_error", "Overloaded")
    await _fails(client, "claude-fake-small")
    assert client.problem is None
    fake_model.handler = lambda _request: error_reply(401, "authentication_error", "no")
    await _fails(client, "claude-fake-small")
    fake_model.handler = lambda _request: error_reply(500, "api_error", "oops")
    await _fails(client, "claude-fake-small")
    assert client.problem is not None
    assert client.problem.startswith("the model key was refused")


def test_the_protocol_page_says_what_model_problem_keeps() -> None:
    # Found by a review: after 7af0dee the page still listed "a provider failure (5xx: this
    # usually passes)" among the problems and said any success cleared it.
    page = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text()
    start = page.index("`model.problem` (str or null")
    paragraph = " ".join(page[start : page.index("\n\n", start)].split())
    assert "5xx: this usually passes" not in paragraph
    assert "the next successful call clears it" not in paragraph
    assert "A 5xx or 529 is not a problem (it passes by itself)." in paragraph
    assert (
        "Kept per model: a 403/404/429 until that model's next success, a key or endpoint "
        "problem until any success" in paragraph
    )


async def test_a_password_in_the_base_url_is_not_shown(
    fake_model: FakeMessagesAPI, clients: list[ModelClient]
) -> None:
    # Found in review: a proxy's basic-auth password in ANTHROPIC_BASE_URL was quoted in
    # model.problem (memctl status, the editors) and in status.model.base_url.
    url = fake_model.base_url.replace("http://", "http://ada:hunter2-secret@")
    client = ModelClient(replace(fake_model_config(fake_model), base_url=url, max_retries=0))
    clients.append(client)
    fake_model.handler = lambda _request: error_reply(401, "authentication_error", "no")
    await _fails(client, "claude-fake-small")
    shown = fake_model.base_url.replace("http://", "http://ada:[redacted]@")
    assert client.problem is not None
    assert f"refused: {shown} answered HTTP 401" in client.problem
    assert client.status()["base_url"] == shown
    assert "hunter2" not in repr(client.status())


def test_a_base_url_that_is_no_url_is_not_shown_in_status() -> None:
    # Found in review: a key pasted into ANTHROPIC_BASE_URL was shown whole in
    # status.model.base_url (memctl status, the editors' status views).
    key = "sk-ant-api03-" + "s" * 40
    client = ModelClient(ModelConfig(api_key="k" * 20, base_url=key))
    assert client.status()["base_url"] == "[redacted]"
    assert ModelClient(ModelConfig(api_key="k" * 20)).status()["base_url"] is None
    shown = ModelClient(ModelConfig(api_key="k" * 20, base_url="https://x.example/v1"))
    assert shown.status()["base_url"] == "https://x.example/v1"
