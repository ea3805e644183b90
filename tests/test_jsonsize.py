"""jsonsize counts the bytes of a JSON string as the daemon's own encoder writes it."""

from __future__ import annotations

import pytest

from memoryd.daemon.protocol.framing import encode_one
from memoryd.jsonsize import json_string_bytes
from memoryd.team.protocol import entry_body_bytes

CASES = [
    "",
    "plain",
    "back\x08space and form\x0cfeed",  # two-byte \b and \f, not \u0008
    'quote " backslash \\ tab \t cr \r nl \n',
    "bell \x07 esc \x1b unit \x1f del \x7f",
    "é ☕ 𝄞 \u2028",
    "lone \udce9 surrogate",  # a non-UTF-8 file name's byte, as Python decodes it
    "\ud800\udfff swapped halves",
    "\ud83d\ude00 a real pair, \x08 and \udc80",
]


@pytest.mark.parametrize("text", CASES)
def test_counts_what_the_encoder_writes(text: str) -> None:
    assert json_string_bytes(text) + 2 == len(encode_one(text))


@pytest.mark.parametrize("text", CASES)
def test_team_entry_size_counts_quotes_colon_and_comma(text: str) -> None:
    key = f"k{text}.md"
    one_entry = encode_one({key: text})  # {"key":"text"}
    assert entry_body_bytes(key, text) == len(one_entry) - len("{}") + len(",")
