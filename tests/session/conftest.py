"""Fixtures for the session-memory integration tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.messages_api import (
    FakeMessagesAPI,
    RecordedRequest,
    Reply,
    error_reply,
    text_reply,
)


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    """A project directory outside git: its own root."""
    path = tmp_path / "proj"
    path.mkdir()
    return path.resolve()


MARKER = "You are now keeping the session notes"


class SessionModel:
    """Routes the fake model's requests: session-notes updates get the replies scripted here,
    requests of other background writers (extraction, MagicDocs) a harmless text reply."""

    def __init__(self, fake: FakeMessagesAPI) -> None:
        self.fake = fake
        self.replies: list[Reply] = []
        self.requests: list[RecordedRequest] = []
        self.on_request: Callable[[], None] | None = None  # called as each request arrives
        fake.handler = self._route

    def enqueue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def _route(self, body: Any) -> Reply:
        if MARKER in json.dumps(body):
            self.requests.append(self.fake.requests[-1])
            if self.on_request is not None:
                self.on_request()
            if self.replies:
                return self.replies.pop(0)
            return error_reply(500, "api_error", "no scripted session reply left")
        return text_reply("nothing to do here")


@pytest.fixture
def session_model(fake_model: FakeMessagesAPI) -> SessionModel:
    return SessionModel(fake_model)
