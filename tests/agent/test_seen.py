"""A background agent writes a file that exists only on a fresh Read of it (`agent.seen`)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from memoryd.agent.loop import ExtraTool, run_agent
from memoryd.agent.policy import AccessPolicy
from memoryd.agent.seen import SeenFiles, stamp_of
from tests.conftest import DaemonHandle
from tests.fakes.messages_api import FakeMessagesAPI, text_reply, tool_use_reply

USER = [{"role": "user", "content": "tidy the memories"}]


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    folder = tmp_path / "memory"
    folder.mkdir()
    return folder


def _results(fake: FakeMessagesAPI, request: int) -> list[dict[str, Any]]:
    """The tool results sent back with the model request number `request`."""
    content: list[dict[str, Any]] = fake.message_requests()[request].json["messages"][-1]["content"]
    return content


async def _run(
    handle: DaemonHandle, memory: Path, seen: SeenFiles | None, **extra: ExtraTool
) -> Any:
    return await run_agent(
        handle.daemon,
        feature="test_agent",
        policy=AccessPolicy(read_roots=(memory,), write_roots=(memory,)),
        system=None,
        messages=USER,
        write_lock=asyncio.Lock(),
        extra_tools=extra,
        seen=seen,
    )


def _user_writes(path: Path, text: str) -> ExtraTool:
    """A tool that stands for someone else saving `path` while the model thinks (run in
    order with the reply's other calls: deterministic)."""

    async def write(_input: dict[str, Any]) -> str:
        tmp = path.with_name(".user.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)  # as memory.write does: a new file in its place
        return "ok"

    return ExtraTool({"name": "UserWrites", "input_schema": {"type": "object"}}, write)


async def test_a_write_from_a_stale_read_is_refused_and_the_other_write_kept(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, memory: Path
) -> None:
    target = memory / "project_deploy.md"
    target.write_text("Deploys on Tuesday.\n")
    write = ("Write", {"file_path": str(target), "content": "Deploys on Tuesday (confirmed).\n"})
    edit = ("Edit", {"file_path": str(target), "old_string": "Deploys", "new_string": "Ships"})
    fake_model.enqueue(
        tool_use_reply([("Read", {"file_path": str(target)})]),
        tool_use_reply([("UserWrites", {}), write, edit]),
        tool_use_reply([("Read", {"file_path": str(target)}), edit]),
        text_reply("done"),
    )
    user = _user_writes(target, "Deploys moved to Thursday.\n")
    result = await _run(daemon_with_model, memory, SeenFiles(), UserWrites=user)
    assert result.stop_reason == "end_turn"
    refused = _results(fake_model, 2)[1:]
    assert all(r["is_error"] for r in refused)
    assert all("changed since you read it" in r["content"] for r in refused)
    assert "Read it again" in refused[0]["content"]
    # Read again, the edit is made on what the file says now: the user's update is kept.
    assert target.read_text() == "Ships moved to Thursday.\n"
    assert result.written == [target]
    assert result.denied == []  # an error the model can act on, not a policy denial


async def test_an_existing_file_never_read_is_not_written_a_new_one_needs_no_read(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, memory: Path
) -> None:
    existing = memory / "user_role.md"
    existing.write_text("The user is a backend engineer.\n")
    new = memory / "user_tabs.md"
    fake_model.enqueue(
        tool_use_reply(
            [
                ("Write", {"file_path": str(existing), "content": "replaced\n"}),
                ("MultiEdit", {"file_path": str(existing), "edits": [
                    {"old_string": "backend", "new_string": "frontend"}]}),
                ("Write", {"file_path": str(new), "content": "tabs\n"}),
                # Its own write is known: written again with no Read in between.
                ("Edit", {"file_path": str(new), "old_string": "tabs", "new_string": "tabs!"}),
            ]
        ),
        text_reply("done"),
    )  # fmt: skip
    result = await _run(daemon_with_model, memory, SeenFiles())
    results = _results(fake_model, 1)
    assert [r.get("is_error", False) for r in results] == [True, True, False, False]
    assert "you have not read it in this run" in results[0]["content"]
    assert existing.read_text() == "The user is a backend engineer.\n"
    assert new.read_text() == "tabs!\n"
    assert result.written == [new]


async def test_a_file_deleted_since_it_was_read_is_not_written_back(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, memory: Path
) -> None:
    target = memory / "feedback_old.md"
    target.write_text("old\n")

    async def delete(_input: dict[str, Any]) -> str:
        target.unlink()
        return "ok"

    fake_model.enqueue(
        tool_use_reply([("Read", {"file_path": str(target)})]),
        tool_use_reply(
            [("UserDeletes", {}), ("Write", {"file_path": str(target), "content": "x"})]
        ),
        text_reply("done"),
    )
    extra = ExtraTool({"name": "UserDeletes", "input_schema": {"type": "object"}}, delete)
    await _run(daemon_with_model, memory, SeenFiles(), UserDeletes=extra)
    assert "was deleted since you read it" in _results(fake_model, 2)[1]["content"]
    assert not target.exists()


async def test_without_seen_files_a_write_needs_no_read(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, memory: Path
) -> None:
    # A caller whose file is its own (the session notes' private draft) passes none.
    target = memory / "draft.md"
    target.write_text("old\n")
    fake_model.enqueue(
        tool_use_reply([("Write", {"file_path": str(target), "content": "new\n"})]),
        text_reply("done"),
    )
    await _run(daemon_with_model, memory, None)
    assert target.read_text() == "new\n"


def test_a_noted_stamp_is_the_files_until_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "doc.md"
    seen = SeenFiles()
    assert seen.problem(path) is None  # not there: a new file
    path.write_text("one\n")
    assert seen.problem(path) is not None
    seen.note(path, stamp_of(path))
    assert seen.problem(path) is None
    path.write_text("two, longer\n")  # in place: the size and mtime change
    assert seen.problem(path) is not None
    seen.note_now(path)
    assert seen.problem(path) is None
    seen.note(path, None)  # forgotten (the agent removed it)
    assert seen.problem(path) is not None


async def test_an_unread_file_is_refused_naming_it_as_the_model_gave_it(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, linked_memory: Path
) -> None:
    # Review of session 22: through a linked memory dir (a linked ~/.claude), the refusal
    # named the dir's real path, not the one the model was given and wrote to.
    given = linked_memory
    target = given / "user_role.md"
    target.write_text("The user is a backend engineer.\n")
    fake_model.enqueue(
        tool_use_reply([("Write", {"file_path": str(target), "content": "replaced\n"})]),
        text_reply("done"),
    )
    await _run(daemon_with_model, given, SeenFiles())
    refused = _results(fake_model, 1)[0]
    assert refused["is_error"] is True
    assert refused["content"].startswith(f"Error: {target} exists and you have not read it")
    assert target.read_text() == "The user is a backend engineer.\n"
