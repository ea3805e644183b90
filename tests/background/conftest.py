"""Helpers for background-writer tests: a project, its memory dir, transcripts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from memoryd.automem.service import AutoMemory
from memoryd.core.project import Project
from memoryd.daemon.config import DaemonConfig
from tests.conftest import DaemonHandle, daemon_config, fake_model_config
from tests.fakes.messages_api import FakeMessagesAPI, Reply, message, text_reply


@dataclass(frozen=True)
class Workspace:
    handle: DaemonHandle
    cwd: Path
    project: Project
    memory_dir: Path

    @property
    def am(self) -> AutoMemory:
        return self.handle.daemon.services.automem


def workspace_for(handle: DaemonHandle, root: Path) -> Workspace:
    cwd = root / "proj"
    cwd.mkdir(parents=True, exist_ok=True)
    project = handle.daemon.services.projects.resolve(cwd)
    memory_dir = handle.daemon.services.automem.memory_dir(project)
    return Workspace(handle, cwd, project, memory_dir)


@pytest.fixture
def ws(daemon_with_model: DaemonHandle, tmp_path: Path) -> Workspace:
    return workspace_for(daemon_with_model, tmp_path)


def memory_text(name: str, description: str, type_: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\ntype: {type_}\n---\n\n{body}\n"


def refusal() -> Reply:
    """A model reply that declines the task (`stop_reason` "refusal"): a failed run."""
    return message([{"type": "text", "text": "I can't help with that."}], stop_reason="refusal")


def transcript(*turns: tuple[str, str]) -> list[dict[str, Any]]:
    """user/assistant text pairs as Messages-format turns."""
    out: list[dict[str, Any]] = []
    for user, assistant in turns:
        out.append({"role": "user", "content": user})
        out.append({"role": "assistant", "content": [{"type": "text", "text": assistant}]})
    return out


class Script:
    """Routes the fake model's replies by which background agent is asking.

    Extraction, MagicDocs and dream may run at the same time after one turn, so a single
    FIFO of replies would be consumed in a racy order; each agent gets its own queue here,
    and a quiet default reply when its queue is empty.
    """

    DEFAULTS: ClassVar[dict[str, str]] = {
        "extraction": "NOTHING_TO_SAVE",
        "magic": "no update",
        "dream": "already tidy",
        "other": "ok",
    }

    def __init__(self, fake: FakeMessagesAPI) -> None:
        self.queues: dict[str, list[Reply]] = {k: [] for k in self.DEFAULTS}
        self.seen: dict[str, list[Any]] = {k: [] for k in self.DEFAULTS}
        fake.handler = self

    @staticmethod
    def kind(body: Any) -> str:
        system = json.dumps(body.get("system", "")) if isinstance(body, dict) else ""
        messages = json.dumps(body.get("messages", [])) if isinstance(body, dict) else ""
        if "memory extraction" in system or "background memory extraction" in messages:
            return "extraction"
        if "living document" in system:
            return "magic"
        if "consolidation agent" in system:
            return "dream"
        return "other"

    def add(self, kind: str, *replies: Reply) -> None:
        self.queues[kind].extend(replies)

    def __call__(self, body: Any) -> Reply:
        kind = self.kind(body)
        self.seen[kind].append(body)
        queue = self.queues[kind]
        return queue.pop(0) if queue else text_reply(self.DEFAULTS[kind])


@pytest.fixture
def script(fake_model: FakeMessagesAPI) -> Script:
    return Script(fake_model)


@pytest.fixture
def model_config(short_tmp: Path, fake_model: FakeMessagesAPI) -> DaemonConfig:
    """A daemon's config with the fake model: for tests that start (and restart) their own."""
    return daemon_config(short_tmp, model=fake_model_config(fake_model))
