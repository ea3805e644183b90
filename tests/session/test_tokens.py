from __future__ import annotations

import base64
import math
import struct
from typing import Any

import pytest

from memoryd.llm import tokens
from memoryd.llm.tokens import (
    IMAGE_TOKENS,
    TokenCounter,
    estimate_block,
    estimate_message,
    estimate_messages,
    estimate_text,
    image_size,
    image_tokens,
    usage_total,
)
from tests.session.builders import assistant, tool_call, tool_result, user, words


def test_ascii_text_is_about_four_characters_per_token() -> None:
    assert estimate_text("") == 0
    assert estimate_text("abcd") == 1
    assert estimate_text("abcde") == 2
    assert estimate_text("x" * 4000) == 1000


def test_non_ascii_characters_count_about_one_token_each() -> None:
    cjk = "记忆系统" * 100  # 400 characters
    assert estimate_text(cjk) == 400
    mixed = "abcd" * 10 + "é" * 5
    assert estimate_text(mixed) == 10 + 5


def test_each_block_kind_is_counted() -> None:
    text = estimate_block({"type": "text", "text": "x" * 400})
    assert 100 <= text <= 105
    assert (
        estimate_block({"type": "image", "source": {"type": "base64", "data": "AAAA"}})
        == IMAGE_TOKENS
    )
    use = estimate_block(
        {"type": "tool_use", "id": "t", "name": "Read", "input": {"file_path": "/a" * 100}}
    )
    assert use > 50
    nested = {
        "type": "tool_result",
        "tool_use_id": "t",
        "content": [{"type": "text", "text": "y" * 800}, {"type": "image", "source": {}}],
    }
    assert estimate_block(nested) >= 200 + IMAGE_TOKENS
    assert estimate_block({"type": "tool_result", "tool_use_id": "t", "content": "z" * 40}) >= 10
    assert estimate_block({"type": "thinking", "thinking": "w" * 400, "signature": "s"}) >= 100
    assert estimate_block({"type": "redacted_thinking", "data": "q" * 40}) >= 10


def test_documents_count_their_text_or_their_pages() -> None:
    text_doc = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "d" * 4000},
    }
    assert estimate_block(text_doc) == 1000
    pdf = base64.b64encode(b"%PDF" + b"\0" * 300_000).decode()
    pdf_doc = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": pdf},
    }
    assert estimate_block(pdf_doc) == 4 * IMAGE_TOKENS
    assert (
        estimate_block({"type": "document", "source": {"type": "url", "url": "https://x"}})
        == IMAGE_TOKENS
    )


def test_unknown_block_types_are_counted_by_size() -> None:
    small = estimate_block(
        {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}
    )
    big = estimate_block({"type": "web_search_tool_result", "content": [{"x": "v" * 4000}]})
    assert 0 < small < big
    assert big >= 1000


def test_malformed_blocks_and_messages_do_not_crash() -> None:
    assert estimate_block({"type": "text", "text": None}) >= 0
    assert estimate_block({"type": "tool_use", "name": 3, "input": {"a": object()}}) > 0
    assert estimate_block(12345) > 0
    assert estimate_message({"role": "user"}) == tokens.MESSAGE_OVERHEAD
    assert estimate_message({"role": "user", "content": "abcd"}) == tokens.MESSAGE_OVERHEAD + 1


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (None, None),
        ({}, None),
        ({"input_tokens": 100, "output_tokens": 20}, 120),
        (
            {
                "input_tokens": 10,
                "cache_read_input_tokens": 5000,
                "cache_creation_input_tokens": 7,
                "output_tokens": 3,
            },
            5020,
        ),
        ({"output_tokens": 20}, None),
        ({"input_tokens": -1, "output_tokens": 20}, None),
        ({"input_tokens": True}, None),
        ({"input_tokens": 50, "output_tokens": "many"}, 50),
    ],
)
def test_usage_total(usage: dict[str, Any] | None, expected: int | None) -> None:
    assert usage_total(usage) == expected


def test_counter_reuses_estimates_of_unchanged_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    transcript = [user(words(100)), assistant(words(200))]
    counter = TokenCounter()
    first, per = counter.count(transcript)
    assert first == estimate_messages(transcript)
    assert len(per) == 2

    grown = [*transcript, user(words(50))]
    edited = [user("short"), *grown[1:]]
    expected_grown, expected_edited = estimate_messages(grown), estimate_messages(edited)
    calls: list[Any] = []
    real = tokens.estimate_message

    def spy(message: Any) -> int:
        calls.append(message)
        return real(message)

    monkeypatch.setattr(tokens, "estimate_message", spy)
    total, _ = counter.count(grown)
    assert total == expected_grown
    assert calls == [grown[2]]  # only the new message was estimated

    # An old message edited in place (e.g. an old tool result cleared) is re-estimated.
    calls.clear()
    total, _ = counter.count(edited)
    assert total == expected_edited
    assert calls == [edited[0]]


def test_usage_corrects_the_estimate_and_the_correction_carries_over() -> None:
    call = tool_call(file_path="/a")
    transcript = [user(words(1000)), call, tool_result(call, words(500)), assistant(words(100))]
    counter = TokenCounter()
    estimate, _ = counter.count(transcript)
    # The provider saw 3,000 more tokens than we estimate (system prompt, tool definitions).
    real = estimate + 3000
    corrected, _ = counter.count(transcript, {"input_tokens": real - 40, "output_tokens": 40})
    assert corrected == real
    # Later turns without usage keep the correction.
    grown = [*transcript, user(words(400))]
    later, _ = counter.count(grown)
    assert later == estimate_messages(grown) + 3000
    # Usage refers to the last assistant message; messages after it are estimated on top.
    tail = estimate_messages(grown[-1:])
    again, _ = counter.count(grown, {"input_tokens": 9000, "output_tokens": 1000})
    assert again == 10_000 + tail


def test_corrected_size_is_never_negative() -> None:
    counter = TokenCounter()
    counter.count([user(words(5000)), assistant("ok")], {"input_tokens": 1, "output_tokens": 0})
    assert counter.corrected(0) == 0


def _png(width: int, height: int) -> bytes:
    ihdr = struct.pack(">II", width, height) + b"\x08\x02\x00\x00\x00"
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + b"\x00" * 64


def _jpeg(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + b"\x00" * 9
    sof = b"\xff\xc0" + struct.pack(">HBHH", 17, 8, height, width) + b"\x00" * 10
    return b"\xff\xd8" + app0 + sof + b"\x00" * 32


def _gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00" * 16


def _image(data: bytes) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/x",
            "data": base64.b64encode(data).decode(),
        },
    }


@pytest.mark.parametrize("make", [_png, _jpeg, _gif])
def test_image_size_is_read_from_its_header(make: Any) -> None:
    assert image_size(make(640, 480)) == (640, 480)
    assert estimate_block(_image(make(300, 150))) == 60  # 45,000 px / 750
    # Large images are scaled down by the API and capped.
    assert estimate_block(_image(make(4000, 3000))) == IMAGE_TOKENS
    assert estimate_block(_image(make(1568, 200))) == math.ceil(1568 * 200 / 750)


def test_images_of_unknown_size_cost_the_cap() -> None:
    assert (
        estimate_block({"type": "image", "source": {"type": "url", "url": "https://x/y.png"}})
        == IMAGE_TOKENS
    )
    assert (
        estimate_block({"type": "image", "source": {"type": "base64", "data": "!!!not base64"}})
        == IMAGE_TOKENS
    )
    assert estimate_block(_image(b"RIFF....WEBPVP8 ")) == IMAGE_TOKENS
    assert estimate_block(_image(b"\xff\xd8\x00garbage")) == IMAGE_TOKENS
    assert image_tokens(0, 10) == IMAGE_TOKENS
