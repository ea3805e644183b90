"""Lone surrogates in decoded JSON become one U+FFFD each, wherever they are."""

from __future__ import annotations

import re
import threading

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


@pytest.mark.parametrize(
    ("line", "where"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"stat\xffus"}', "byte 38 (ff): invalid start byte"),
        (b'{"cwd":"/tmp/\xc3("}', "byte 13 (c3): invalid continuation byte"),
        (b'{"cwd":"\\ud83d","x":"\xc0\xaf"}', "byte 21 (c0): invalid start byte"),
    ],
)
def test_a_line_that_is_not_utf8_is_refused_saying_where(line: bytes, where: str) -> None:
    # Found by a bug hunt (session 24): orjson's words for it were "str is not valid UTF-8:
    # surrogates not allowed: line 1 column 1 (char 0)", wherever the byte was and though no
    # surrogate was sent.
    from memoryd.daemon.protocol.framing import ParseFailure, parse_line

    parsed = parse_line(line)
    assert isinstance(parsed, ParseFailure)
    message = parsed.reply["error"]["message"]
    assert message == f"parse error: the line is not UTF-8: {where}"


async def test_a_long_line_that_is_not_utf8_is_decoded_off_the_event_loop(
    stdlib_parse_threads: list[threading.Thread],
) -> None:
    # Found by the session 24 review: bce38ec decoded the line again on the event loop to say
    # where it stops being UTF-8 (110 ms for 60 MiB, where orjson's refusal took 8 ms); the
    # stdlib's reading, which goes to a thread over PARSE_INLINE_BYTES, says it.
    from memoryd.daemon.limits import PARSE_INLINE_BYTES
    from memoryd.daemon.protocol import framing

    threads = stdlib_parse_threads
    head = b'{"jsonrpc":"2.0","id":1,"method":"status","params":{"a":"'
    line = head + b"x" * PARSE_INLINE_BYTES + b'\xff"}}'
    parsed = await framing.read_message(line)
    assert isinstance(parsed, framing.ParseFailure)
    where = f"byte {len(head) + PARSE_INLINE_BYTES} (ff): invalid start byte"
    assert parsed.reply["error"]["message"] == f"parse error: the line is not UTF-8: {where}"
    [thread] = threads
    assert thread is not threading.main_thread()
