"""A dream of a large memory dir keeps MEMORY.md within what memoryd reads, or fails as a run.

Found by the fourth hunt: 2,000 memories with 1,000-character descriptions made a 2 MB index
(one whole description a line), past MAX_INDEX_READ_BYTES; every later rewrite, the dream's
rebuild first, was refused with -32004, and the dream's answer with it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.automem import index as index_mod
from memoryd.automem.dream import dream_state_path
from memoryd.automem.index_writer import INDEX_HOOK_CHARS, index_hook
from memoryd.automem.layout import update_index
from memoryd.errors import TooLarge
from tests.background.conftest import Script, Workspace

WORDS = ("deploy staging cluster kubernetes namespace " * 30)[:990]


def _long_memories(memory_dir: Path, count: int) -> None:
    memory_dir.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (memory_dir / f"m{i:04}.md").write_text(
            f"---\nname: memory {i}\ndescription: {i} {WORDS}\ntype: project\n---\n\nbody\n"
        )


async def test_a_dream_of_memories_with_long_descriptions_keeps_the_index_readable(
    ws: Workspace, script: Script, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 200 such memories against a 100,000-byte cap are 2,000 against the real 1,000,000.
    monkeypatch.setattr(index_mod, "MAX_INDEX_READ_BYTES", 100_000)
    _long_memories(ws.memory_dir, 200)
    result = await ws.handle.call("memory.dream", cwd=str(ws.cwd))
    assert (result["stop_reason"], result["error"]) == ("end_turn", None)
    index = (ws.memory_dir / "MEMORY.md").read_text()
    entries = index_mod.parse_index(index)
    assert len(entries) == 200
    assert len(index.encode()) < 100_000
    assert all(len(e.hook) <= INDEX_HOOK_CHARS for e in entries)
    assert str(ws.memory_dir) in json.loads(dream_state_path().read_text())["last_run"]
    # The folder stays writable: its index is read whole again.
    await ws.handle.call(
        "memory.write", cwd=str(ws.cwd), type="user", name="late", description="d", body="b"
    )
    assert "late" in (ws.memory_dir / "MEMORY.md").read_text()


async def test_a_dream_whose_index_cannot_hold_its_lines_is_a_failed_run_that_tells_its_work(
    ws: Workspace, script: Script, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Even cut hooks are too many for this cap: the index is left as it was (never written
    # past what memoryd reads), the run answers what it did and is recorded as failed, so
    # the idle dream waits RETRY_AFTER_S before it tries again.
    monkeypatch.setattr(index_mod, "MAX_INDEX_READ_BYTES", 10_000)
    _long_memories(ws.memory_dir, 200)
    result = await ws.handle.call("memory.dream", cwd=str(ws.cwd))
    assert result["stop_reason"] == "error"
    assert result["error"].startswith("the index was not rebuilt: ")
    assert "10,000 bytes" in result["error"]
    index = ws.memory_dir / "MEMORY.md"
    assert not index.exists() or index.stat().st_size <= 10_000
    state = json.loads(dream_state_path().read_text())
    assert str(ws.memory_dir) in state["failed_at"]
    assert state["last_run"] == {}
    assert not ws.handle.daemon.services.dream.due(ws.project)


def test_a_rewrite_past_the_read_cap_is_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_mod, "MAX_INDEX_READ_BYTES", 1_000)
    path = tmp_path / "MEMORY.md"
    path.write_text("- [a](a.md) — a\n")
    with pytest.raises(TooLarge, match="would be 1,019 bytes"):
        update_index(path, lambda text: text + "x" * 1_000 + "\n")
    assert path.read_text() == "- [a](a.md) — a\n"
    # A rewrite within it goes ahead.
    update_index(path, lambda text: text + "- [b](b.md)\n")
    assert path.read_text().endswith("- [b](b.md)\n")


def test_an_index_hook_is_one_short_line() -> None:
    assert index_hook("short\nhook") == "short hook"
    hook = index_hook(WORDS)
    assert len(hook) <= INDEX_HOOK_CHARS
    assert hook.endswith("…")
    assert WORDS.startswith(hook[:-1])
    assert WORDS[len(hook) - 1] == " "  # cut between words
    long_word = "x" * 500
    assert index_hook(long_word) == "x" * (INDEX_HOOK_CHARS - 1) + "…"


async def test_a_write_whose_line_would_take_the_index_past_the_cap_is_saved_with_a_warning(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_mod, "MAX_INDEX_READ_BYTES", 300)
    results = [
        await ws.handle.call(
            "memory.write", cwd=str(ws.cwd), type="user", name=f"m{i}", description=WORDS, body="b"
        )
        for i in range(2)
    ]
    first, second = (Path(r["path"]) for r in results)
    index = (ws.memory_dir / "MEMORY.md").read_text()
    assert len(index.encode()) <= 300
    assert first.name in index
    assert second.name not in index
    assert second.exists()  # the memory is saved, its line stays queued
    assert results[0]["warnings"] == []
    assert "would be 346 bytes" in " ".join(results[1]["warnings"])


async def test_a_line_refused_at_the_cap_holds_no_other_writers_line_back(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found in review (8aeb2e4): a refused line stayed queued and was written with the next
    # write's line in one rewrite, refused as a whole: from then on no write of the folder
    # got its line (a short one too, and an updated memory's line stayed as it was).
    monkeypatch.setattr(index_mod, "MAX_INDEX_READ_BYTES", 150)

    async def write(name: str, description: str) -> dict[str, object]:
        return await ws.handle.call(
            "memory.write",
            cwd=str(ws.cwd),
            type="user",
            name=name,
            description=description,
            body="b",
        )

    await write("b", "short")
    big = await write("big", WORDS)
    assert "user_big.md" in " ".join(big["warnings"])  # type: ignore[arg-type]
    later = await write("c", "tiny")
    await write("b", "shorter")
    index = (ws.memory_dir / "MEMORY.md").read_text()
    assert "(user_c.md) — tiny" in index
    assert "(user_b.md) — shorter" in index
    assert "user_big.md" not in index
    # The write is told whose line waits: not its own.
    assert "user_c.md" not in " ".join(later["warnings"])  # type: ignore[arg-type]
    listed = await ws.handle.call("memory.list", cwd=str(ws.cwd))
    assert {m["name"] for m in listed["memories"]} == {"b", "big", "c"}
