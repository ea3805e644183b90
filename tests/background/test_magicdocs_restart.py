"""MagicDocs registrations survive a daemon restart (the session goes on after `memctl
restart`), against the scripted fake Messages API."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from memoryd.daemon.config import DaemonConfig
from tests.background.conftest import Script, workspace_for
from tests.conftest import DaemonHandle, start_daemon, stop_daemon
from tests.fakes.messages_api import FakeMessagesAPI

DOC = "# MAGIC DOC: Deployment notes\n_Keep the list of environments._\n\n- staging\n"
BREAK = [
    {"role": "user", "content": "we deploy to prod too now"},
    {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]},
]


async def test_a_doc_read_before_a_restart_is_updated_after_it(
    model_config: DaemonConfig, tmp_path: Path, fake_model: FakeMessagesAPI
) -> None:
    script = Script(fake_model)
    handle = await start_daemon(model_config)
    try:
        ws = workspace_for(handle, tmp_path)
        doc = ws.cwd / "docs" / "deploy.md"
        doc.parent.mkdir()
        doc.write_text(DOC)
        reply = await handle.call(
            "after_tool", session_id="s1", cwd=str(ws.cwd), tool="Read", read_paths=[str(doc)]
        )
        assert reply["magic_docs"] == 1
    finally:
        await stop_daemon(handle)
    state = Path(os.environ["XDG_STATE_HOME"]) / "memoryd" / "magicdocs.json"
    assert stat_mode(state) == 0o600
    assert [d["path"] for d in json.loads(state.read_text())["docs"]] == [str(doc.resolve())]

    handle = await start_daemon(model_config)  # the session goes on with a new daemon
    try:
        reply = await handle.call("after_turn", session_id="s1", cwd=str(ws.cwd), messages=BREAK)
        # Before, the new daemon knew no doc: the session's docs were never updated again.
        assert reply["scheduled"]["magic_docs"] == 1
        await handle.daemon.services.magic_docs.wait_idle()
        assert len(script.seen["magic"]) == 1
        # Another session did not read it: nothing to update for that one.
        other = await handle.call("after_turn", session_id="s2", cwd=str(ws.cwd), messages=BREAK)
        assert other["scheduled"]["magic_docs"] == 0
    finally:
        await stop_daemon(handle)


async def test_a_broken_registrations_file_is_no_registration(
    model_config: DaemonConfig, tmp_path: Path
) -> None:
    state = Path(os.environ["XDG_STATE_HOME"]) / "memoryd" / "magicdocs.json"
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(
        '{"docs": [{"path": "relative.md", "project": "/p", "title": "x", '
        '"sessions": ["s1"]}, 7, "x"]}'
    )
    handle = await start_daemon(model_config)
    try:
        ws = workspace_for(handle, tmp_path)
        reply = await handle.call("after_turn", session_id="s1", cwd=str(ws.cwd), messages=BREAK)
        assert reply["scheduled"]["magic_docs"] == 0
    finally:
        await stop_daemon(handle)


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@pytest.mark.parametrize("seen_by", ["a read", "its update"])
async def test_a_retitled_doc_is_saved_with_its_new_title(
    model_config: DaemonConfig, tmp_path: Path, fake_model: FakeMessagesAPI, seen_by: str
) -> None:
    # The new title, seen by a known session's read again (found by a review) or by the update
    # at its natural break (session 22's hunt), was taken in memory only: the registrations
    # file kept the old one, which magicdocs.list showed after a restart.
    Script(fake_model)  # the update's model run: "no update"
    handle = await start_daemon(model_config)
    state = Path(os.environ["XDG_STATE_HOME"]) / "memoryd" / "magicdocs.json"
    try:
        ws = workspace_for(handle, tmp_path)
        doc = ws.cwd / "docs" / "deploy.md"
        doc.parent.mkdir()
        doc.write_text(DOC)
        read = {"session_id": "s1", "cwd": str(ws.cwd), "tool": "Read", "read_paths": [str(doc)]}
        await handle.call("after_tool", **read)
        doc.write_text(DOC.replace("Deployment notes", "Release notes"))
        if seen_by == "a read":
            await handle.call("after_tool", **read)
        else:
            await handle.call("after_turn", session_id="s1", cwd=str(ws.cwd), messages=BREAK)
            await handle.daemon.services.magic_docs.wait_idle()
    finally:
        await stop_daemon(handle)
    assert [d["title"] for d in json.loads(state.read_text())["docs"]] == ["Release notes"]


async def test_two_daemons_of_one_state_dir_keep_each_others_registrations(
    model_config: DaemonConfig, tmp_path: Path
) -> None:
    # Found by session 22's hunt: two daemons of one user (two sockets) share
    # <state>/magicdocs.json, and each save wrote its own registrations over the file: after
    # the first daemon's restart, the docs its sessions had read were never updated again.
    first = await start_daemon(model_config)
    second = await start_daemon(
        replace(model_config, socket_path=model_config.socket_path.with_name("e.sock"))
    )
    ws = workspace_for(first, tmp_path)
    docs = ws.cwd / "docs"
    docs.mkdir()
    shared, mine, theirs, gone = (docs / f"{n}.md" for n in ("shared", "mine", "theirs", "gone"))
    for doc in (shared, mine, theirs, gone):
        doc.write_text(DOC)

    async def read(handle: DaemonHandle, session: str, *paths: Path) -> None:
        read_paths = [str(p) for p in paths]
        await handle.call("after_tool", session_id=session, cwd=str(ws.cwd), read_paths=read_paths)

    try:
        await read(first, "s1", mine, shared, gone)
        await read(second, "s2", theirs, shared, gone)
        gone.write_text("no longer magic\n")
        await read(first, "s1", gone)  # unregistered by the first: gone from the file too
    finally:
        await stop_daemon(second)
        await stop_daemon(first)
    state = Path(os.environ["XDG_STATE_HOME"]) / "memoryd" / "magicdocs.json"
    saved = {Path(d["path"]).name: d["sessions"] for d in json.loads(state.read_text())["docs"]}
    assert saved == {"theirs.md": ["s2"], "mine.md": ["s1"], "shared.md": ["s2", "s1"]}

    handle = await start_daemon(model_config)  # the first daemon again
    try:
        reply = await handle.call("after_turn", session_id="s1", cwd=str(ws.cwd), messages=BREAK)
        assert reply["scheduled"]["magic_docs"] == 2  # mine.md and shared.md
        reply = await handle.call("after_turn", session_id="s2", cwd=str(ws.cwd), messages=BREAK)
        assert reply["scheduled"]["magic_docs"] == 2  # theirs.md and shared.md
        await handle.daemon.services.magic_docs.wait_idle()
    finally:
        await stop_daemon(handle)
