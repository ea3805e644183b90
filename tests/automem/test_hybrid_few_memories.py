"""Hybrid recall in a directory whose memories give the model's scores no spread: one memory,
or copies of one text. The fusion places each memory by how far its score stands above the
others' (a z-score); with nothing to compare to, a paraphrase used to recall nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.automem.conftest import memory_text, settled_auto_memory, write_memory
from tests.conftest import DaemonHandle, daemon_config, start_daemon, stop_daemon

# No word in common between the query and the memory: only the model can match them.
KAYAK = ("Kayak club", "the user rows with the harbour kayak club on Tuesdays")
PADDLING = "paddling on the sea"
OFF_TOPIC = ("fix the typo in the README", "why is this regular expression so slow?")


@pytest.fixture
async def hybrid(
    short_tmp: Path, bundled_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[DaemonHandle]:
    """A daemon with all-MiniLM-L6-v2 from its package, as a local folder."""
    monkeypatch.setenv("MEMORYD_EMBEDDINGS", "on")
    monkeypatch.setenv("MEMORYD_EMBEDDING_MODEL", str(bundled_model_dir))
    handle = await start_daemon(daemon_config(short_tmp))
    try:
        yield handle
    finally:
        await stop_daemon(handle)


async def _recall(daemon: DaemonHandle, project: Path, query: str) -> list[str]:
    got = await daemon.call("recall", cwd=str(project), query=query, selector="local")
    return [Path(m["path"]).name for m in got["memories"]]


async def test_a_paraphrase_finds_the_only_memory_and_an_off_topic_prompt_nothing(
    hybrid: DaemonHandle, project: Path
) -> None:
    kayak = (await write_memory(hybrid, project, "user", *KAYAK, "")).name
    await _recall(hybrid, project, "kayak")
    assert (await settled_auto_memory(hybrid))["ranker"].startswith("hybrid")
    assert await _recall(hybrid, project, PADDLING) == [kayak]
    for prompt in OFF_TOPIC:  # the floors still judge it
        assert await _recall(hybrid, project, prompt) == []


async def test_a_paraphrase_finds_copies_of_one_memory_that_fill_the_candidates(
    hybrid: DaemonHandle, project: Path, memdir: Path
) -> None:
    memdir.mkdir(parents=True)
    # More copies than late interaction's 50 candidates by cosine, and one other memory.
    for i in range(60):
        (memdir / f"user_kayak_{i:02d}.md").write_text(memory_text(*KAYAK, "user", "Rows."))
    (memdir / "user_coffee.md").write_text(
        memory_text("Coffee", "takes coffee with oat milk", "user", "Oat milk.")
    )
    await _recall(hybrid, project, "kayak")
    assert (await settled_auto_memory(hybrid))["ranker"].startswith("hybrid")
    got = await _recall(hybrid, project, PADDLING)
    assert len(got) == 5
    assert all(name.startswith("user_kayak_") for name in got)
    for prompt in OFF_TOPIC:
        assert await _recall(hybrid, project, prompt) == []
