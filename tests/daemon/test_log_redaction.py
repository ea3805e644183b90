"""The structlog processor chain never lets a credential through."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import structlog

from memoryd.daemon.logging import REDACTED, configure, scrub_value

KEY = "sk-ant-api03-" + "A" * 40
TOKEN = "ghp_" + "b" * 36


def test_credentials_are_redacted_by_key_name_and_by_shape(tmp_path: Path) -> None:
    log_file = tmp_path / "log.jsonl"
    configure(log_file=log_file)
    try:
        log = structlog.get_logger("t")
        log.info("calling", api_key=KEY, headers={"Authorization": "Bearer " + TOKEN})
        log.info(f"error text mentioning {KEY} and {TOKEN}")
        log.info("nested", detail=["x", {"token": "plain-looking"}])
    finally:
        configure(stream=io.StringIO())
    text = log_file.read_text()
    assert KEY not in text
    assert TOKEN not in text
    assert "plain-looking" not in text
    records = [json.loads(line) for line in text.splitlines()]
    assert records[0]["api_key"] == REDACTED
    assert records[0]["headers"]["Authorization"] == REDACTED


def test_scrub_value_keeps_ordinary_text() -> None:
    assert scrub_value("memory saved: feedback_testing.md") == "memory saved: feedback_testing.md"
    assert scrub_value({"path": "/a/b.md", "n": 3}) == {"path": "/a/b.md", "n": 3}


def test_token_counts_are_not_taken_for_credentials(tmp_path: Path) -> None:
    log_file = tmp_path / "log.jsonl"
    configure(log_file=log_file)
    try:
        log = structlog.get_logger("t")
        log.info("agent finished", input_tokens=1200, output_tokens=80, auth_token="x" * 12)
        log.info("usage", usage={"cache_read_input_tokens": 7, "tokens": "not-a-count"})
    finally:
        configure(stream=io.StringIO())
    first, second = (json.loads(line) for line in log_file.read_text().splitlines())
    assert (first["input_tokens"], first["output_tokens"]) == (1200, 80)
    assert first["auth_token"] == REDACTED
    assert second["usage"] == {"cache_read_input_tokens": 7, "tokens": REDACTED}


def test_stdlib_logging_is_rendered_and_redacted_like_our_own(tmp_path: Path) -> None:
    # Found by a bug hunt: records of libraries that log through the standard library (asyncio,
    # the anthropic SDK) went into the JSON log as plain text lines, secrets unredacted.
    log_file = tmp_path / "log.jsonl"
    configure(log_file=log_file)
    try:
        library = logging.getLogger("some.library")
        library.warning("retrying with Authorization: Bearer %s", TOKEN)
        try:
            raise RuntimeError(f"refused key {KEY}")
        except RuntimeError:
            logging.getLogger("asyncio").exception("Task exception was never retrieved")
        library.info("below the level: not written")
    finally:
        configure(stream=io.StringIO())
    text = log_file.read_text()
    assert KEY not in text
    assert TOKEN not in text
    first, second = (json.loads(line) for line in text.splitlines())
    assert first["level"] == "warning"
    assert first["logger"] == "some.library"
    assert first["event"].startswith("retrying with Authorization:")
    assert "timestamp" in first
    assert second["level"] == "error"
    assert second["event"] == "Task exception was never retrieved"
    assert second["exception"][0]["exc_type"] == "RuntimeError"
