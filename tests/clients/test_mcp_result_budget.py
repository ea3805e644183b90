"""`memoryd-mcp`'s `list` and `recall` results fit what a host takes from one tool call.

`list` listed every memory of the project (1.4 MB of text for 3,000), and a name or
description read from a file (written by hand or by a teammate) was shown whole, so one
memory of a 50,000-character name made a recall of 210 KB whatever its content's share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memoryd_client.mcp_tools import DESCRIPTION_CHARS, NAME_CHARS, RESULT_BYTES
from tests.clients.fake_daemon import FakeDaemon
from tests.clients.test_mcp_server import mcp_session, payload, project  # noqa: F401

TEXT_CAP = RESULT_BYTES + 12_000  # the JSON's indentation and the other fields


def _memory(n: int) -> dict[str, Any]:
    return {
        "path": f"/m/project_m{n:04d}.md",
        "name": f"memory number {n} about widgets",
        "type": "project",
        "description": f"when the widget configuration matters, case {n}",
        "team": False,
        "mtime": 1.0,
    }


async def test_a_long_list_comes_in_parts_that_each_fit(
    fake_daemon: FakeDaemon,
    project: Path,  # noqa: F811 (the fixture)
) -> None:
    memories = [_memory(n) for n in range(3000)]
    files = [{"path": f"{project}/CLAUDE.md", "type": "Project"}]
    fake_daemon.on(
        "memory.list", {"memory_dir": "/m", "memories": memories, "instruction_files": files}
    )
    seen: list[str] = []
    async with mcp_session(fake_daemon.socket_path, project) as session:
        offset, parts = 0, 0
        while True:
            result = await session.call_tool("list", {"offset": offset})
            assert len(result.content[0].text.encode()) < TEXT_CAP
            listed = payload(result)
            assert listed["instruction_files"] == files
            seen += [m["path"] for m in listed["memories"]]
            parts += 1
            end = offset + len(listed["memories"])
            assert listed["truncated"].startswith(
                f"showing memories {offset + 1:,}–{end:,} of 3,000"
            )
            if end == 3000:
                assert "offset=" not in listed["truncated"]
                break
            assert listed["truncated"].endswith(f"call list with offset={end} for the rest")
            offset = end
        past = await session.call_tool("list", {"offset": 3000})
    assert seen == [m["path"] for m in memories]
    assert parts > 10
    assert past.is_error
    assert "past the last memory (3,000 in all)" in past.content[0].text


async def test_a_short_list_is_whole_and_says_nothing_of_parts(
    fake_daemon: FakeDaemon,
    project: Path,  # noqa: F811
) -> None:
    fake_daemon.on(
        "memory.list",
        {"memory_dir": "/m", "memories": [_memory(1), _memory(2)], "instruction_files": []},
    )
    async with mcp_session(fake_daemon.socket_path, project) as session:
        listed = payload(await session.call_tool("list", {}))
    assert [m["name"] for m in listed["memories"]] == [_memory(1)["name"], _memory(2)["name"]]
    assert "truncated" not in listed


async def test_a_name_or_description_from_a_file_is_cut_to_what_remember_takes(
    fake_daemon: FakeDaemon,
    project: Path,  # noqa: F811
) -> None:
    huge = {**_memory(0), "name": "N" * 50_000, "description": "zebra " * 20_000}
    fake_daemon.on(
        "recall",
        {"selector": "local", "memories": [{**huge, "note": None, "content": "zebra body\n"}]},
    )
    fake_daemon.on("memory.list", {"memory_dir": "/m", "memories": [huge], "instruction_files": []})
    async with mcp_session(fake_daemon.socket_path, project) as session:
        recall = await session.call_tool("recall", {"query": "zebra"})
        listed = payload(await session.call_tool("list", {}))
    recalled = payload(recall)["memories"][0]
    assert len(recall.content[0].text.encode()) < 4_000
    for memory in (recalled, listed["memories"][0]):
        assert memory["name"] == "N" * (NAME_CHARS - 1) + "…"
        assert len(memory["description"]) == DESCRIPTION_CHARS
        assert memory["description"].endswith("…")
    assert recalled["content"] == "zebra body\n"


async def test_thousands_of_instruction_files_leave_the_memories_room(
    fake_daemon: FakeDaemon,
    project: Path,  # noqa: F811
) -> None:
    # 2,000 rules files made a list of 270 KB, and would have left no room for the memories.
    files = [
        {"path": f"{project}/.claude/rules/rule_{n:04d}_about_a_topic.md", "type": "Project"}
        for n in range(2000)
    ]
    memories = [_memory(n) for n in range(50)]
    fake_daemon.on(
        "memory.list", {"memory_dir": "/m", "memories": memories, "instruction_files": files}
    )
    async with mcp_session(fake_daemon.socket_path, project) as session:
        result = await session.call_tool("list", {})
    listed = payload(result)
    assert len(result.content[0].text.encode()) < TEXT_CAP
    shown = len(listed["instruction_files"])
    assert 0 < shown < 2000
    assert listed["instruction_files"] == files[:shown]
    assert listed["instruction_files_truncated"] == f"showing {shown:,} of 2,000 instruction files"
    assert [m["path"] for m in listed["memories"]] == [m["path"] for m in memories]
    assert "truncated" not in listed
