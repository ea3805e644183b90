"""memoryd.jsonread: json's own limits (nesting past its depth, a whole number longer than
Python converts) are malformed JSON to the caller, a long number read as none or refused."""

from __future__ import annotations

import json
import sys
from typing import Literal

import pytest

from memoryd import jsonread

DEEP = "[" * 5_000 + "]" * 5_000
LONG = "9" * 5_000


@pytest.mark.parametrize("long_ints", ["none", "refuse", "keep"])
def test_nesting_past_the_parsers_depth_is_malformed_json(
    long_ints: Literal["none", "refuse", "keep"],
) -> None:
    # json raised RecursionError (no ValueError): each reader needed its own guard.
    with pytest.raises(json.JSONDecodeError, match=r"^nested too deeply$"):
        jsonread.loads(DEEP, long_ints=long_ints)


def test_a_long_whole_number_is_none_the_rest_kept() -> None:
    text = '{"a": ' + LONG + ', "b": -12345678901234567890, "c": 9223372036854775807}'
    assert jsonread.loads(text, long_ints="none") == {
        "a": None,
        "b": None,  # 21 characters with its sign
        "c": 9223372036854775807,
    }


def test_a_long_whole_number_refused_is_malformed_json() -> None:
    # int() raised a bare ValueError, past a reader catching JSONDecodeError.
    with pytest.raises(json.JSONDecodeError, match="whole number of 5,000 characters"):
        jsonread.loads('{"a": [1, ' + LONG + "]}", long_ints="refuse")
    assert jsonread.loads("[" + "9" * 20 + "]", long_ints="refuse") == [10**20 - 1]


def test_bytes_are_read_as_json_loads_reads_them() -> None:
    text = '{"é": [1.5, 1e400, "\\ud83d"]}'
    for encoding in ("utf-8", "utf-16", "utf-32"):
        data = text.encode(encoding)
        assert repr(jsonread.loads(data, long_ints="refuse")) == repr(json.loads(data))
    with pytest.raises(UnicodeDecodeError):
        jsonread.loads(b"\xff{}", long_ints="none")
    with pytest.raises(json.JSONDecodeError):
        jsonread.loads(b"{broken", long_ints="none")


def test_a_file_others_write_keeps_every_number_python_reads() -> None:
    # Claude Code's settings: JavaScript writes 1e20 as 21 plain digits; refusing such a file
    # (as "refuse" does past 20) dropped all of the user's settings for one number.
    assert jsonread.loads("[" + "9" * 300 + "]", long_ints="keep") == [10**300 - 1]
    # The limit in the message as the length is: "over the 4,300 read", not "4300".
    said = rf"^a whole number of 5,000 characters, over the {sys.get_int_max_str_digits():,} read$"
    with pytest.raises(json.JSONDecodeError, match=said):
        jsonread.loads("[" + LONG + "]", long_ints="keep")


def test_a_number_longer_than_python_reads_is_marked() -> None:
    # For the settings reader, which drops the value holding it and keeps the rest.
    assert jsonread.loads('{"a": [1, -' + LONG + '], "b": ' + "9" * 21 + "}", long_ints="mark") == {
        "a": [1, jsonread.LongInt(5_001)],
        "b": 10**21 - 1,
    }
