"""What recall showed a session is not shown again — until a compaction takes it out of the
agent's context: then it may be recalled again (the seed's set is read from the messages)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import DaemonHandle


async def _tabs_in_go(daemon: DaemonHandle, project: Path) -> None:
    """The project's one memory, which "how do I indent go files?" recalls."""
    await daemon.call(
        "memory.write",
        cwd=str(project),
        type="feedback",
        name="tabs in go",
        description="indent go files with tabs",
        body="Indent Go with tabs.",
    )


async def test_a_compaction_lets_a_memory_shown_before_be_recalled_again(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    await _tabs_in_go(daemon, project)
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


async def test_compacting_one_projects_session_keeps_another_projects_of_the_same_id(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    # Found in review: what recall showed was kept by session id alone, so compacting
    # project A's "s1" let project B's "s1" be shown again what it had just been shown (a
    # repository cloned inside another, each with a session of one id).
    asks = []
    for name in ("a", "b"):
        project = tmp_path / name
        (project / ".git").mkdir(parents=True)
        await _tabs_in_go(daemon, project)
        ask = {"cwd": str(project), "query": "how do I indent go files?", "session_id": "s1"}
        assert len((await daemon.call("recall", **ask, selector="local"))["memories"]) == 1
        asks.append(ask)
    project_a, project_b = asks
    await daemon.call(
        "compact",
        session_id="s1",
        cwd=project_a["cwd"],
        messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
    )
    assert len((await daemon.call("recall", **project_a, selector="local"))["memories"]) == 1
    assert (await daemon.call("recall", **project_b, selector="local"))["memories"] == []
