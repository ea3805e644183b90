"""The JSON object in a model's reply (`llm.replies.json_object`), whatever the reply holds:
a reply asked for is a few hundred tokens, a broken or hostile endpoint sends megabytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.llm.replies import json_object
from tests.automem.run_apart import output_of
from tests.conftest import DaemonHandle
from tests.fakes.messages_api import FakeMessagesAPI, text_reply

NESTED = '{"a":' * 5_000 + "1" + "}" * 5_000


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ('{"selected": ["a.md"]}', {"selected": ["a.md"]}),
        ('Here:\n```json\n{"type": "user"}\n```\nDone.', {"type": "user"}),
        ("no object at all", None),
        ("} backwards {", None),
        ('["a list"]', None),
        ('{"cut": "mid-wa', None),
        (NESTED, None),  # deeper than Python recurses: its RecursionError escaped
    ],
)
def test_a_reply_gives_its_object_or_none(text: str, found: object) -> None:
    assert json_object(text) == found


def test_an_object_nested_within_reach_is_read() -> None:
    got = json_object("prose " + '{"a":' * 100 + "1" + "}" * 100 + " prose")
    for _ in range(99):
        assert isinstance(got, dict)
        got = got["a"]
    assert got == {"a": 1}


def test_a_megabyte_of_braces_is_read_once_not_from_each_brace() -> None:
    # The regex `\{.*\}` went back from the end for each `{` of a reply with no `}` after it:
    # 40,000 braces took 0.44 s, a 5 MB reply hours, on the event loop for recall.
    code = "from memoryd.llm.replies import json_object; print(json_object('{' * 5_000_000))"
    assert output_of(code) == "None"


async def test_remember_with_a_reply_nested_too_deep_falls_back(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, project: Path
) -> None:
    # Before, the RecursionError failed the call: -32603, and the note was not saved.
    fake_model.enqueue(text_reply(NESTED))
    saved = await daemon_with_model.call(
        "memory.remember", cwd=str(project), text="we deploy on fridays with make ship"
    )
    assert saved["derived_by"] == "local"
    assert "make ship" in Path(saved["path"]).read_text()
