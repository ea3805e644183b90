"""MagicDocs: one doc that two projects share through a link, listed for both, kept so."""

from __future__ import annotations

from pathlib import Path

from memoryd.daemon.config import DaemonConfig
from tests.background.conftest import Script, transcript, workspace_for
from tests.conftest import start_daemon, stop_daemon
from tests.fakes.messages_api import FakeMessagesAPI

DOC = "# MAGIC DOC: Architecture\n\n- parser\n"


async def test_a_doc_two_projects_share_is_listed_for_both_also_after_a_restart(
    model_config: DaemonConfig, tmp_path: Path, fake_model: FakeMessagesAPI
) -> None:
    # Found by the third hunt: read first by a session of A, then by one of B through B's
    # link to it, the doc was updated at B's natural breaks but `magicdocs.list {cwd: B}`
    # did not list it (a doc had one project, the first to read it).
    script = Script(fake_model)
    handle = await start_daemon(model_config)
    a = workspace_for(handle, tmp_path / "a").cwd
    b = workspace_for(handle, tmp_path / "b").cwd
    doc = a / "ARCH.md"
    doc.write_text(DOC)
    (b / "ARCH.md").symlink_to(doc)
    convo = transcript(("hi", "hello"))
    try:
        await handle.call(
            "after_turn", session_id="sa", cwd=str(a), messages=convo, read_paths=[str(doc)]
        )
        reply = await handle.call(
            "after_turn",
            session_id="sb",
            cwd=str(b),
            messages=convo,
            read_paths=[str(b / "ARCH.md")],
        )
        assert reply["scheduled"]["magic_docs"] == 1
        await handle.daemon.services.magic_docs.wait_idle()
        for cwd in (b, a):
            (listed,) = (await handle.call("magicdocs.list", cwd=str(cwd)))["docs"]
            assert listed["path"] == str(doc)
            assert listed["project"] == str(a)  # the first to read it
            assert listed["projects"] == sorted([str(a), str(b)])
    finally:
        await stop_daemon(handle)
    handle = await start_daemon(model_config)
    try:
        (listed,) = (await handle.call("magicdocs.list", cwd=str(b)))["docs"]
        assert listed["projects"] == sorted([str(a), str(b)])
        other = workspace_for(handle, tmp_path / "c").cwd
        assert (await handle.call("magicdocs.list", cwd=str(other)))["docs"] == []
    finally:
        await stop_daemon(handle)
    assert len(script.seen["magic"]) == 2  # each session's natural break updated it
