"""The AutoMem / TeamMem entries of `get_context`, and the memory instructions."""

from __future__ import annotations

import json
from pathlib import Path

from memoryd.automem.context import automem_index
from memoryd.automem.instructions import MEMORY_INSTRUCTIONS, memory_instructions
from tests.conftest import DaemonHandle, IsolatedEnv


def test_instructions_cover_the_contract() -> None:
    text = memory_instructions("/m")
    for needle in (
        "`user`",
        "`feedback`",
        "`project`",
        "`reference`",
        "Never save",
        "MEMORY.md",
        "- [Title](file.md) — one-line hook",
        "**Why:**",
        "**How to apply:**",
        "Verify before you recommend",
        "/m",
    ):
        assert needle in text, needle
    assert "<memory dir>" in MEMORY_INSTRUCTIONS


async def test_provider_entries(daemon: DaemonHandle, project: Path, memdir: Path) -> None:
    proj = daemon.daemon.services.projects.resolve(project)
    empty = await automem_index(daemon.daemon.services.automem, proj)
    assert empty.entries == []
    assert empty.memory_dir == str(memdir)
    await daemon.call(
        "memory.write", cwd=str(project), type="user", name="A", description="a", body="b"
    )
    await daemon.call(
        "memory.write",
        cwd=str(project),
        type="user",
        name="T",
        description="t",
        body="b",
        team=True,
    )
    got = await automem_index(daemon.daemon.services.automem, proj)
    assert [(e.type, e.path) for e in got.entries] == [
        ("AutoMem", memdir / "MEMORY.md"),
        ("TeamMem", memdir / "team" / "MEMORY.md"),
    ]
    assert got.entries[0].content == "- [A](user_a.md) — a\n"
    assert got.index_truncated is False
    assert str(memdir) in got.memory_instructions


async def test_provider_truncates(daemon: DaemonHandle, project: Path, memdir: Path) -> None:
    memdir.mkdir(parents=True)
    (memdir / "MEMORY.md").write_text("".join(f"- [T{i}](f{i}.md) — h\n" for i in range(250)))
    got = await automem_index(
        daemon.daemon.services.automem, daemon.daemon.services.projects.resolve(project)
    )
    assert got.index_truncated
    assert got.entries[0].truncated
    assert "limit 200" in got.entries[0].content


async def test_provider_off(daemon: DaemonHandle, project: Path, isolated_env: IsolatedEnv) -> None:
    isolated_env.config_dir.mkdir(parents=True, exist_ok=True)
    (isolated_env.config_dir / "settings.json").write_text(json.dumps({"autoMemoryEnabled": False}))
    got = await automem_index(
        daemon.daemon.services.automem, daemon.daemon.services.projects.resolve(project)
    )
    assert (got.entries, got.memory_dir) == ([], None)


async def test_get_context_includes_automem(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    await daemon.call(
        "memory.write", cwd=str(project), type="user", name="A", description="a", body="b"
    )
    ctx = await daemon.call("get_context", cwd=str(project))
    assert ctx["memory_dir"] == str(memdir)
    assert any(
        f["type"] == "AutoMem" and f["path"] == str(memdir / "MEMORY.md") for f in ctx["files"]
    )
    assert "- [A](user_a.md) — a" in ctx["claude_md"]
    assert "Verify before you recommend" in ctx["memory_instructions"]
