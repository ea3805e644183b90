"""What recall showed a session is not shown again — until a compaction takes it out of the
agent's context: then it may be recalled again (the seed's set is read from the messages)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import DaemonHandle


async def test_a_compaction_lets_a_memory_shown_before_be_recalled_again(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    await daemon.call(
        "memory.write",
        cwd=str(project),
        type="feedback",
        name="tabs in go",
        description="indent go files with tabs",
        body="Indent Go with tabs.",
    )
    ask = {"cwd": str(project), "query": "how do I indent go files?", "session_id": "s1"}
    first = await daemon.call("recall", **ask, selector="local")
    assert [m["path"].rsplit("/", 1)[1] for m in first["memories"]] == ["feedback_tabs_in_go.md"]
    assert (await daemon.call("recall", **ask, selector="local"))["memories"] == []
    compacted = await daemon.call(
        "compact",
        session_id="s1",
        cwd=str(project),
        messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
    )
    assert compacted["used_session_memory"] is False  # no summary: the client compacts itself
    again = await daemon.call("recall", **ask, selector="local")
    assert [m["path"] for m in again["memories"]] == [m["path"] for m in first["memories"]]
    other = await daemon.call("recall", **{**ask, "session_id": "s2"}, selector="local")
    assert len(other["memories"]) == 1  # another session was never shown it
