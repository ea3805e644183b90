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


def test_tracebacks_carry_no_frame_locals(tmp_path: Path) -> None:
    # Found by a bug hunt: tracebacks were rendered with every frame's locals (structlog's
    # dict_tracebacks shows them), after the key-name redaction ran: a compatible provider's
    # key not shaped like one, in `self.config`, and the transcript reached the log.
    from memoryd.core.model_config import ModelConfig

    provider_key = "prov-" + "Zk9q" * 12
    log_file = tmp_path / "log.jsonl"
    configure(log_file=log_file)

    def failing_call(config: ModelConfig, messages: list[str]) -> None:
        raise ValueError("the reply is not JSON")

    try:
        try:
            failing_call(ModelConfig(api_key=provider_key), ["my diary: PRIVATE-NOTE-1234"])
        except ValueError:
            structlog.get_logger("t").exception("agent failed")
    finally:
        configure(stream=io.StringIO())
    text = log_file.read_text()
    assert provider_key[:12] not in text
    assert "PRIVATE-NOTE" not in text
    (record,) = (json.loads(line) for line in text.splitlines())
    frames = record["exception"][0]["frames"]
    assert [f["name"] for f in frames][-1] == "failing_call"  # the traceback is still there
    assert all("locals" not in f for f in frames)


def test_credentials_are_left_out_of_config_reprs() -> None:
    from memoryd.core.model_config import ModelConfig
    from memoryd.core.team_config import TeamConfig

    model = repr(ModelConfig(api_key="prov-secret-1", auth_token="prov-secret-2"))
    team = repr(TeamConfig(url="https://team.example", token="mdt_secret-3"))
    assert "secret" not in model + team
    assert "https://team.example" in team
