"""Lone surrogates in decoded JSON become one U+FFFD each, wherever they are."""

from __future__ import annotations

import re

import pytest

from memoryd.daemon.protocol.framing import parse_line
from memoryd.surrogates import without_lone_surrogates

_HALF = re.compile("[\ud800-\udfff]")


@pytest.mark.parametrize(
    "text",
    [
        "plain ascii",
        "\ud83d",  # a high half alone
        "\ude00 at the start, and at the end \ud83d",
        "\ud83d\ude00",  # two halves side by side, not joined: two characters, two U+FFFD
        "emoji 😀 whole, CJK 漢字, accents é, then \udfff",
        "\ud800\ud800\ud800 a run",
        "漢字 and no half",
    ],
)
def test_each_half_is_one_replacement_character(text: str) -> None:
    assert without_lone_surrogates(text) == _HALF.sub("\ufffd", text)
    nested = {text: [text, {"k": text}, 1, None]}
    clean = _HALF.sub("\ufffd", text)
    assert without_lone_surrogates(nested) == {clean: [clean, {"k": clean}, 1, None]}


def test_a_line_with_a_half_escaped_either_case_is_read() -> None:
    for escape in (b"\\ud83d", b"\\uD83D"):
        line = b'{"jsonrpc":"2.0","id":1,"method":"status","params":{"a":"x' + escape + b'"}}'
        assert parse_line(line)["params"] == {"a": "x\ufffd"}
