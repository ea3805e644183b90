"""Bad input to the background writers' methods: clear errors, never a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd_client import RpcError
from tests.background.conftest import Script, Workspace


@pytest.mark.parametrize(
    "params",
    [
        {"cwd": "relative/dir"},
        {"cwd": "/definitely/not/here"},
        {},
        {"cwd": "/tmp", "wait": "soon"},
        {"cwd": "/tmp", "extra": 1},
    ],
)
async def test_memory_dream_rejects_bad_params(ws: Workspace, params: dict[str, object]) -> None:
    with pytest.raises(RpcError) as info:
        await ws.handle.call("memory.dream", **params)
    assert info.value.code == -32602


async def test_magicdocs_list_rejects_a_bad_cwd(ws: Workspace) -> None:
    with pytest.raises(RpcError) as info:
        await ws.handle.call("magicdocs.list", cwd="nope")
    assert info.value.code == -32602


async def test_odd_transcripts_and_read_paths_are_survived(
    ws: Workspace, script: Script, tmp_path: Path
) -> None:
    binary = ws.cwd / "x.md"
    binary.write_bytes(b"\xff\xfe\x00# MAGIC DOC: nope")
    # Valid at the boundary, odd inside: empty content, blocks of unknown types, tool
    # calls with inputs of the wrong shape, a transcript ending on a user message.
    weird = [
        {"role": "assistant", "content": []},
        {"role": "user", "content": [{"type": "tool_result"}, {"type": "mystery", "x": 1}]},
        {"role": "assistant", "content": [{"type": "tool_use", "name": "Write", "input": "x"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "name": "Edit", "input": {"file_path": 3}}],
        },
        {"role": "user", "content": ""},
    ]
    # One session per request shape: the same transcript again has nothing new to extract.
    for number, extra in enumerate(({}, {"system": "s", "tools": [], "model": "m"})):
        reply = await ws.handle.call(
            "after_turn",
            session_id=f"odd-{number}",
            cwd=str(ws.cwd),
            messages=weird,
            read_paths=["relative.md", "/no/such.md", "/bad\x00.md", str(binary), str(tmp_path)],
            **extra,
        )
        assert reply["scheduled"]["extraction"] is True
        await ws.handle.daemon.services.extraction.wait_idle()
    await ws.handle.daemon.services.magic_docs.wait_idle()
    assert len(script.seen["extraction"]) == 2
    assert (await ws.handle.call("magicdocs.list"))["docs"] == []
    status = await ws.handle.call("status")
    assert status["worker_errors"] == {}
