"""Issue 13's bad input for `recall`, each through the real daemon on its socket: a clear
error or a sensible result, never a crash, and the daemon goes on answering.

The hybrid ranker's share (a missing or half-written model file) is in test_hybrid_daemon.py.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import string
from pathlib import Path

import pytest

from memoryd.daemon.limits import DEFAULT_LINE_LIMIT
from memoryd.daemon.methods.memory import MAX_QUERY_CHARS
from memoryd_client import RpcError
from tests.automem.conftest import memory_text, write_memory
from tests.conftest import DaemonHandle

DEPLOY = memory_text("Deploy day", "deploys go out on Fridays", "project", "After the freeze.")


def _files(memdir: Path, files: dict[str, str]) -> None:
    memdir.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (memdir / name).write_text(text, encoding="utf-8")


async def _names(daemon: DaemonHandle, project: Path, query: str) -> list[str]:
    got = await daemon.call("recall", cwd=str(project), query=query)
    assert got["selector"] == "local"
    return [Path(m["path"]).name for m in got["memories"]]


@pytest.mark.parametrize("query", ["", " ", "\n\t \u3000"])
async def test_an_empty_or_blank_query_is_invalid_params_naming_the_field(
    daemon: DaemonHandle, project: Path, memdir: Path, query: str
) -> None:
    _files(memdir, {"project_deploy.md": DEPLOY})
    with pytest.raises(RpcError) as err:
        await daemon.call("recall", cwd=str(project), query=query)
    assert err.value.code == -32602
    assert "query" in err.value.message
    assert await _names(daemon, project, "deploy") == ["project_deploy.md"]  # same connection


async def test_a_1mb_query_is_refused_and_one_at_the_cap_answered(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    _files(memdir, {"project_deploy.md": DEPLOY, "user_tea.md": memory_text("Tea", "", "user", "")})
    with pytest.raises(RpcError) as err:
        await daemon.call("recall", cwd=str(project), query="deploy Fridays " * 70_000)  # ~1 MB
    assert err.value.code == -32602
    assert "query" in err.value.message
    assert f"{MAX_QUERY_CHARS}" in err.value.message
    # At the cap, 20,000 distinct words: an answer, ranked by the query's start and end (the
    # ranker runs on the event loop and its cost grows with the words), where a prompt
    # usually says what it wants; "tea" in the middle is not read.
    # Words of letters alone: 20,000 like "w123" would read as a pasted block (automem/recall/pasted.py).
    letters = itertools.product(string.ascii_lowercase, repeat=4)
    words = " ".join("".join(w) for w in itertools.islice(letters, 20_000))[:48_000]
    middle = f"{words} tea {words}"
    for at_cap in (f"deploys on Fridays {middle}", f"{middle} deploys on Fridays"):
        assert len(at_cap) <= MAX_QUERY_CHARS
        assert await _names(daemon, project, at_cap) == ["project_deploy.md"]
    assert await _names(daemon, project, f"{middle[:8_000]} tea") == ["user_tea.md"]


async def test_a_query_over_the_line_limit_is_refused_and_the_daemon_goes_on(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    _files(memdir, {"project_deploy.md": DEPLOY})
    head = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "recall"})[:-1]
    start = f'{head}, "params": {{"cwd": {json.dumps(str(project))}, "query": "'.encode()
    end = b'"}}\n'
    line = start + b"x" * (DEFAULT_LINE_LIMIT + 1 - len(start) - len(end) + 1) + end
    assert len(line) == DEFAULT_LINE_LIMIT + 2  # one byte over the cap, then the newline
    reader, writer = await asyncio.open_unix_connection(str(daemon.socket_path))
    writer.write(line)
    reply = json.loads(await asyncio.wait_for(reader.readline(), 10))
    assert reply["error"]["code"] == -32600
    assert f"{DEFAULT_LINE_LIMIT}" in reply["error"]["message"].replace(",", "")
    assert await asyncio.wait_for(reader.read(), 10) == b""  # that connection is closed
    writer.close()
    # The daemon and every other connection go on.
    assert await _names(daemon, project, "deploy") == ["project_deploy.md"]
    fresh = await daemon.client()
    try:
        assert (await fresh.call("status", {}))["pid"] > 0
    finally:
        await fresh.close()


async def test_queries_in_other_scripts_find_memories_in_that_script(
    daemon: DaemonHandle, project: Path
) -> None:
    memories = {
        "ru": ("Офис", "Офис находится в Москве", "На Тверской улице, третий этаж."),
        "ja": ("寿司", "東京で寿司を食べた", "築地の店が一番好き。"),
        "zh": ("发布", "我们每周五发布新版本", "发布前先冻结代码。"),
        "en": ("Office", "the office is in Berlin", "Near the river."),
    }
    paths = {}
    for key, (name, description, body) in memories.items():
        written = await write_memory(daemon, project, "reference", name, description, body)
        paths[key] = written.name
    for query, expected in (
        ("Где находится офис?", "ru"),  # other word forms: Russian stems
        ("москва", "ru"),
        ("東京の寿司", "ja"),  # no spaces: character pairs
        ("什么时候发布新版本", "zh"),
    ):
        assert (await _names(daemon, project, query))[0] == paths[expected], query


async def test_memories_without_a_description_are_recalled(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    _files(
        memdir,
        {
            "no_description.md": "---\nname: Staging\ntype: reference\n---\n\n"
            "The staging database lives on db-staging.\n",
            "no_frontmatter.md": "The flux capacitor needs 1.21 gigawatts.\n",
            "project_deploy.md": DEPLOY,
        },
    )
    for query, file in (
        ("where is the staging database?", "no_description.md"),
        ("flux capacitor gigawatts", "no_frontmatter.md"),
    ):
        got = await daemon.call("recall", cwd=str(project), query=query)
        first = got["memories"][0]
        assert Path(first["path"]).name == file
        assert first["description"] == ""
        assert first["content"] == (memdir / file).read_text(encoding="utf-8")


def _identical(memdir: Path, n: int) -> None:
    memdir.mkdir(parents=True, exist_ok=True)
    data = memory_text("Same", "the very same memory", "user", "Same body.").encode()
    for i in range(n):
        (memdir / f"user_same_{i:05d}.md").write_bytes(data)


async def test_ten_thousand_identical_memories_never_block_the_daemon(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    _identical(memdir, 10_000)
    other = await daemon.client()
    try:
        # The directory's first load (seconds at 10,000 files) runs in event-loop slices:
        # a `status` asked after the recall is answered before the recall is.
        recall = asyncio.ensure_future(
            daemon.call("recall", cwd=str(project), query="the same memory")
        )
        await asyncio.sleep(0.05)  # the recall is read and waiting on the load
        status = await other.call("status", {})
        assert not recall.done()
        assert status["pid"] > 0
        got = await asyncio.wait_for(recall, 60)
        files = [Path(m["path"]).name for m in got["memories"]]
        assert len(set(files)) == 5  # five of the equals, each once
        again = await daemon.call("recall", cwd=str(project), query="the same memory")
        assert [Path(m["path"]).name for m in again["memories"]] == files  # and the same five
        assert await _names(daemon, project, "nothing alike") == []
        listed = await other.call("memory.list", {"cwd": str(project)})
        assert len(listed["memories"]) == 10_000
    finally:
        await other.close()
