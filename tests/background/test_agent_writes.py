"""What background agents may write in a memory dir, and what their writes are taken for."""

from __future__ import annotations

import asyncio
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.automem.extraction_prompts import NOTHING_MARKER
from tests.background.conftest import Script, Workspace, memory_text, transcript, workspace_for
from tests.conftest import (
    DaemonHandle,
    IsolatedEnv,
    daemon_config,
    fake_model_config,
    start_daemon,
    stop_daemon,
)
from tests.fakes.messages_api import FakeMessagesAPI, Reply, text_reply, tool_use_reply

CONVO = transcript(("I like tabs, not spaces.", "Noted."))


async def _turn(ws: Workspace, messages: list[dict[str, Any]]) -> None:
    await ws.handle.call("after_turn", session_id="s1", cwd=str(ws.cwd), messages=messages)
    await ws.handle.daemon.services.extraction.wait_idle()


async def _subscribe(ws: Workspace) -> Any:
    client = await ws.handle.client()
    await client.call("subscribe", {"events": ["memory/saved", "worker/error"]})
    return client


def _saved(client: Any) -> list[str]:
    paths = []
    while not client.notifications.empty():
        note = client.notifications.get_nowait()
        if note["method"] == "memory/saved":
            paths.append(note["params"]["path"])
    return paths


def _write(path: Path, content: str) -> tuple[str, dict[str, Any]]:
    return ("Write", {"file_path": str(path), "content": content})


async def test_extraction_writes_only_memory_files_and_announces_only_memories(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    memory = ws.memory_dir / "user_tabs.md"
    fake_model.enqueue(
        tool_use_reply(
            [
                _write(memory, memory_text("Tabs", "likes tabs", "user", "The user likes tabs.")),
                _write(ws.memory_dir / "notes.txt", "scratch"),
                _write(ws.memory_dir / ".draft.md", "scratch"),
                _write(ws.memory_dir / ".hidden" / "x.md", "scratch"),
            ]
        ),
        tool_use_reply([_write(ws.memory_dir / "MEMORY.md", "- [Tabs](user_tabs.md) — tabs\n")]),
        text_reply("saved"),
    )
    client = await _subscribe(ws)
    await _turn(ws, CONVO)
    await asyncio.sleep(0.05)
    assert memory.exists()
    assert not (ws.memory_dir / "notes.txt").exists()
    assert not (ws.memory_dir / ".draft.md").exists()
    assert not (ws.memory_dir / ".hidden").exists()
    assert _saved(client) == [str(memory)]
    status = (await ws.handle.call("status"))["features"]["extraction"]
    assert status["written"] == 1
    assert status["last_run"]["written"] == [str(memory)]
    assert status["last_run"]["denied"] == 3
    await client.close()


async def test_extraction_writes_no_name_the_store_never_reads(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    text = memory_text("Tabs", "likes tabs", "user", "The user likes tabs.")
    never = [
        ws.memory_dir / "user_tabs.conflict-20261204T101010Z.md",
        ws.memory_dir / "team" / "drafts~" / "x.md",
        ws.memory_dir / "notes" / "MEMORY.md",  # neither an index nor a memory
    ]
    fake_model.enqueue(tool_use_reply([_write(p, text) for p in never]), text_reply("saved"))
    await _turn(ws, CONVO)
    assert not any(p.exists() for p in never)
    status = (await ws.handle.call("status"))["features"]["extraction"]
    assert status["last_run"]["denied"] == 3
    results = fake_model.message_requests()[1].json["messages"][-1]["content"]
    assert "conflict copy" in results[0]["content"]
    assert "editor backup" in results[1]["content"]
    assert "names the index" in results[2]["content"]


async def test_extraction_writes_no_index_named_in_another_case(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    """`memory.md` was created: read neither as the index (read as `MEMORY.md`) nor as a
    memory (a file of the index's name never is), what the agent saved there was lost."""
    (ws.memory_dir / "team").mkdir(parents=True)
    text = memory_text("Tabs", "likes tabs", "user", "The user likes tabs.")
    refused = [
        ws.memory_dir / "memory.md",
        ws.memory_dir / "Memory.MD",
        ws.memory_dir / "team" / "memory.md",
    ]
    index = ws.memory_dir / "MEMORY.md"
    fake_model.enqueue(
        tool_use_reply([*(_write(p, text) for p in refused), _write(index, "- [Tabs](t.md)\n")]),
        text_reply("saved"),
    )
    await _turn(ws, CONVO)
    assert sorted(p.name for p in ws.memory_dir.iterdir()) == ["MEMORY.md", "team"]
    assert not any((ws.memory_dir / "team").iterdir())
    results = fake_model.message_requests()[1].json["messages"][-1]["content"]
    assert [r.get("is_error", False) for r in results] == [True, True, True, False]
    for path, result in zip(refused, results, strict=False):
        key = "/".join(path.relative_to(ws.memory_dir).parts)
        assert result["content"].startswith(f"Permission denied: {key} is not the index")
        assert "named exactly MEMORY.md" in result["content"]


async def test_the_team_index_an_extraction_writes_is_not_announced_as_a_memory(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    team = ws.memory_dir / "team"
    note = team / "reference_ci.md"
    fake_model.enqueue(
        tool_use_reply(
            [
                _write(note, memory_text("CI", "where CI results are", "reference", "ci.example")),
                _write(team / "MEMORY.md", "- [CI](reference_ci.md) — where CI results are\n"),
            ]
        ),
        text_reply("saved"),
    )
    client = await _subscribe(ws)
    await _turn(ws, CONVO)
    await asyncio.sleep(0.05)
    assert "(reference_ci.md)" in (team / "MEMORY.md").read_text()
    assert _saved(client) == [str(note)]
    status = (await ws.handle.call("status"))["features"]["extraction"]
    assert status["written"] == 1
    assert status["last_run"]["written"] == [str(note)]
    await client.close()


async def test_extraction_overwrites_no_memory_it_did_not_read(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    existing = await ws.am.write_memory(
        ws.project, type="user", name="Tabs", description="likes tabs", body="Tabs, width 8."
    )
    blind = memory_text("Tabs", "likes tabs", "user", "The user likes tabs.")
    fake_model.enqueue(tool_use_reply([_write(existing.path, blind)]), text_reply("saved"))
    await _turn(ws, CONVO)
    assert "Tabs, width 8." in existing.path.read_text()
    result = fake_model.message_requests()[1].json["messages"][-1]["content"][0]
    assert "you have not read it in this run" in result["content"]
    status = (await ws.handle.call("status"))["features"]["extraction"]
    assert status["last_run"]["written"] == []


async def test_memoryds_own_index_rewrite_does_not_skip_the_next_extraction(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    first = await ws.am.write_memory(
        ws.project, type="user", name="Wrong", description="a wrong fact", body="wrong"
    )
    await ws.am.write_memory(
        ws.project, type="user", name="Right", description="a right fact", body="right"
    )
    fake_model.enqueue(text_reply(NOTHING_MARKER))
    await _turn(ws, CONVO)
    await asyncio.sleep(0.01)
    await ws.handle.call(
        "memory.delete", cwd=str(ws.cwd), path=first.path.name
    )  # rewrites the index
    fake_model.enqueue(text_reply(NOTHING_MARKER))
    await _turn(ws, [*CONVO, *transcript(("and 4-space YAML", "ok"))])
    status = (await ws.handle.call("status"))["features"]["extraction"]
    assert status["skipped_main_agent"] == 0
    assert status["runs"] == 2


async def test_a_run_that_breaks_off_still_indexes_and_announces_what_it_wrote(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    memory = ws.memory_dir / "user_tabs.md"
    broken = Reply(200, {**text_reply("x").body, "content": None})
    fake_model.enqueue(
        tool_use_reply(
            [
                _write(memory, memory_text("Tabs", "likes tabs", "user", "The user likes tabs.")),
                _write(ws.memory_dir / "user_lone.md", "half a pair: \ud800"),
            ]
        ),
        broken,
    )
    client = await _subscribe(ws)
    await _turn(ws, CONVO)
    await asyncio.sleep(0.05)
    assert "(user_tabs.md)" in (ws.memory_dir / "MEMORY.md").read_text()
    assert not (ws.memory_dir / "user_lone.md").exists()
    assert _saved(client) == [str(memory)]
    request = fake_model.message_requests()[1].json["messages"][-1]["content"]
    assert request[1]["is_error"] is True  # the surrogate went back to the model as an error
    status = (await ws.handle.call("status"))["features"]["extraction"]
    assert status["last_run"]["stop_reason"] == "error"
    assert status["failed"] == 1
    await client.close()


@pytest.fixture
async def linked_config(
    isolated_env: IsolatedEnv, short_tmp: Path, fake_model: FakeMessagesAPI
) -> AsyncIterator[DaemonHandle]:
    """A daemon whose `~/.claude` is a link into a dotfiles repository."""
    dotfiles = isolated_env.home / "dotfiles" / "claude"
    dotfiles.mkdir(parents=True)
    isolated_env.config_dir.symlink_to(dotfiles)
    handle = await start_daemon(daemon_config(short_tmp, model=fake_model_config(fake_model)))
    try:
        yield handle
    finally:
        await stop_daemon(handle)


async def test_a_linked_config_dir_tells_its_writes_by_the_memory_dirs_path(
    linked_config: DaemonHandle, fake_model: FakeMessagesAPI, tmp_path: Path
) -> None:
    ws = workspace_for(linked_config, tmp_path)
    assert ws.memory_dir.resolve() != ws.memory_dir
    memory = ws.memory_dir / "user_tabs.md"
    fake_model.enqueue(
        tool_use_reply(
            [_write(memory, memory_text("Tabs", "likes tabs", "user", "The user likes tabs."))]
        ),
        text_reply("saved"),
    )
    client = await _subscribe(ws)
    await _turn(ws, CONVO)
    await asyncio.sleep(0.05)
    assert _saved(client) == [str(memory)]
    fake_model.enqueue(text_reply(NOTHING_MARKER))
    await _turn(ws, [*CONVO, *transcript(("and 4-space YAML", "ok"))])
    status = (await ws.handle.call("status"))["features"]["extraction"]
    assert status["skipped_main_agent"] == 0  # its own write is not the main agent's
    assert status["runs"] == 2
    await client.close()


async def test_a_linked_config_dir_names_a_memory_the_dream_never_read_as_given(
    linked_config: DaemonHandle, fake_model: FakeMessagesAPI, tmp_path: Path
) -> None:
    # Session 22: through a linked ~/.claude, the dream's RetireMemory of a memory it had not
    # read was refused naming the memory dir's real path, not the one the model was given.
    ws = workspace_for(linked_config, tmp_path)
    real_dir = ws.memory_dir.resolve()
    assert real_dir != ws.memory_dir
    await ws.am.write_memory(ws.project, type="user", name="A", description="a", body="a")
    b = await ws.am.write_memory(ws.project, type="user", name="B", description="b", body="b")
    target = ws.memory_dir / b.path.name
    fake_model.enqueue(
        tool_use_reply([("RetireMemory", {"file_path": str(target), "reason": "duplicate"})]),
        text_reply("done"),
    )
    result = await ws.handle.call("memory.dream", cwd=str(ws.cwd))
    assert result["retired"] == []
    assert target.exists()
    (answer,) = fake_model.message_requests()[1].json["messages"][-1]["content"]
    assert answer["is_error"] is True
    assert answer["content"].startswith(f"Error: {target} exists and you have not read it")
    assert str(real_dir) not in answer["content"]


async def test_a_linked_config_dir_refuses_a_non_memory_write_without_its_real_path(
    linked_config: DaemonHandle, fake_model: FakeMessagesAPI, tmp_path: Path
) -> None:
    # Session 22: auto memory's own refusals (a team memory, an index name, not .md, a name
    # the store never reads) named the real path of a memory dir reached through a link;
    # they name the file by its key under the memory dir, whatever path reached it.
    ws = workspace_for(linked_config, tmp_path)
    real_dir = ws.memory_dir.resolve()
    await ws.am.write_memory(ws.project, type="user", name="A", description="a", body="a")
    await ws.am.write_memory(ws.project, type="user", name="B", description="b", body="b")
    (ws.memory_dir / "team").mkdir()
    text = memory_text("Deploys", "how we deploy", "project", "make deploy")
    keys = ["team/project_deploys.md", "notes/MEMORY.md", "notes.txt", ".draft.md"]
    fake_model.enqueue(
        tool_use_reply([_write(ws.memory_dir / key, text) for key in keys]), text_reply("done")
    )
    result = await ws.handle.call("memory.dream", cwd=str(ws.cwd))
    assert len(result["denied"]) == len(keys)
    assert not any((ws.memory_dir / key).exists() for key in keys)
    answers = fake_model.message_requests()[1].json["messages"][-1]["content"]
    for key, answer in zip(keys, answers, strict=True):
        assert answer["content"].startswith(f"Permission denied: {key} ")
        assert str(real_dir) not in answer["content"]
        assert str(ws.memory_dir) not in answer["content"]


# -- dream ---------------------------------------------------------------------------------
async def _two_memories_and_a_team_one(ws: Workspace) -> tuple[Path, Path, Path]:
    a = await ws.am.write_memory(ws.project, type="user", name="A", description="a", body="a")
    b = await ws.am.write_memory(ws.project, type="user", name="B", description="b", body="b")
    team = ws.memory_dir / "team"
    team.mkdir()
    shared = team / "project_deploys.md"
    shared.write_text(memory_text("Deploys", "how we deploy", "project", "make deploy"))
    return a.path, b.path, shared


async def test_dream_leaves_team_memories_alone(ws: Workspace, script: Script) -> None:
    _, b, shared = await _two_memories_and_a_team_one(ws)
    script.add(
        "dream",
        tool_use_reply(
            [
                ("RetireMemory", {"file_path": str(shared), "reason": "stale"}),
                (
                    "Edit",
                    {"file_path": str(shared), "old_string": "make", "new_string": "just"},
                ),
                ("RetireMemory", {"file_path": str(ws.memory_dir / "gone.md"), "reason": "x"}),
            ]
        ),
        text_reply("done"),
    )
    result = await ws.handle.call("memory.dream", cwd=str(ws.cwd))
    assert shared.read_text() == memory_text("Deploys", "how we deploy", "project", "make deploy")
    assert result["retired"] == []
    assert result["edited"] == []
    assert len(result["denied"]) == 2  # the team memory, twice; a missing file is no denial
    prompt = script.seen["dream"][0]["messages"][0]["content"][0]["text"]
    assert "project_deploys.md" not in prompt
    assert b.name in prompt
    results = script.seen["dream"][1]["messages"][-1]["content"]
    assert results[2]["content"].startswith("Error: ")


async def test_no_dream_is_armed_while_auto_memory_is_off(
    ws: Workspace, script: Script, isolated_env: IsolatedEnv
) -> None:
    await _two_memories_and_a_team_one(ws)
    isolated_env.config_dir.mkdir(parents=True, exist_ok=True)
    (isolated_env.config_dir / "settings.json").write_text(
        '{"autoDreamEnabled": true, "autoMemoryEnabled": false}'
    )
    dream = ws.handle.daemon.services.dream
    dream.idle_s = 0.05
    await ws.handle.call("after_turn", session_id="s1", cwd=str(ws.cwd), messages=CONVO)
    assert dream.feature_status()["auto_dream"]["armed"] == 0
    await asyncio.sleep(0.2)
    assert script.seen["dream"] == []


# -- MagicDocs -------------------------------------------------------------------------------
def _magic_doc(ws: Workspace, name: str = "DEPLOY.md") -> Path:
    doc = ws.cwd / name
    doc.write_text("# MAGIC DOC: Deployment notes\n_Keep it current._\n\n- staging\n")
    return doc


MAGIC_TURN = transcript(("We added a prod environment.", "Noted."))
READ_TURN = [
    {"role": "user", "content": "deploy?"},
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/x"}}],
    },
]


async def _magic_turn(ws: Workspace, read: list[Path], messages: list[dict[str, Any]]) -> None:
    await ws.handle.call(
        "after_turn",
        session_id="s1",
        cwd=str(ws.cwd),
        messages=messages,
        read_paths=[str(p) for p in read],
    )
    await ws.handle.daemon.services.magic_docs.wait_idle()


def _edit_doc(doc: Path) -> Reply:
    return tool_use_reply(
        [("Edit", {"file_path": str(doc), "old_string": "- staging\n", "new_string": "- prod\n"})]
    )


async def test_a_magic_doc_keeps_its_mode_when_updated(ws: Workspace, script: Script) -> None:
    doc = _magic_doc(ws)
    doc.chmod(0o644)
    await _magic_turn(ws, [doc], READ_TURN)
    script.add("magic", _edit_doc(doc), text_reply("updated"))
    await _magic_turn(ws, [], MAGIC_TURN)
    assert "- prod" in doc.read_text()
    assert stat.S_IMODE(doc.stat().st_mode) == 0o644


async def test_a_magic_doc_swapped_for_a_link_is_unregistered_not_followed(
    ws: Workspace, script: Script, tmp_path: Path
) -> None:
    doc = _magic_doc(ws)
    await _magic_turn(ws, [doc], READ_TURN)
    private = tmp_path / "other-project" / "PRIVATE.md"
    private.parent.mkdir()
    private.write_text("# MAGIC DOC: Private\n_mine_\n\n- staging\n")
    doc.unlink()
    doc.symlink_to(private)
    script.add("magic", _edit_doc(private), text_reply("updated"))
    await _magic_turn(ws, [], MAGIC_TURN)
    assert private.read_text() == "# MAGIC DOC: Private\n_mine_\n\n- staging\n"
    assert script.seen["magic"] == []
    assert (await ws.handle.call("magicdocs.list"))["docs"] == []


async def test_a_magic_doc_that_is_not_utf8_is_not_registered(
    ws: Workspace, script: Script
) -> None:
    doc = ws.cwd / "LEGACY.md"
    doc.write_bytes(b"# MAGIC DOC: Legacy\n_keep it_\n\nRen\xe9e wrote this\n")
    await _magic_turn(ws, [doc], READ_TURN)
    assert (await ws.handle.call("magicdocs.list"))["docs"] == []


@pytest.mark.parametrize(
    ("content", "fault"),
    [
        (memory_text("Big", "word " * 20_000, "project", "body"), "a description of"),
        (memory_text("N" * 300, "short", "project", "body"), "a name of"),
        (memory_text("Big", "short", "project", "line\n" * 50_000), "bytes, over 200,000"),
        (memory_text("Tabs", "likes tabs", "mood", "The user likes tabs."), "invalid type"),
        ("The user likes tabs.\n", "no frontmatter"),
        # Session 22: memory.write refused bidirectional controls in both, an agent's Write not.
        (memory_text("Ta\u202ebs", "short", "project", "body"), "name: must not hold a bidi"),
        (memory_text("Tabs", "li\u2067kes", "user", "body"), "description: must not hold a bidi"),
    ],
)
async def test_extraction_writes_memories_as_memory_write_would(
    ws: Workspace, fake_model: FakeMessagesAPI, content: str, fault: str
) -> None:
    # Unchecked, an agent saved a memory with a 100 KB description: a 100 KB line of
    # MEMORY.md (the index the prompt loads is cut at 25,000 bytes) and of every later prompt.
    target = ws.memory_dir / "big.md"
    fake_model.enqueue(tool_use_reply([_write(target, content)]), text_reply("saved"))
    await _turn(ws, CONVO)
    assert not target.exists()
    result = fake_model.message_requests()[1].json["messages"][-1]["content"][0]
    assert result["is_error"] is True
    assert "would not be a valid memory" in result["content"]
    assert fault in result["content"]
    index = ws.memory_dir / "MEMORY.md"
    assert not index.exists() or index.stat().st_size < 1_000


async def test_a_memory_that_was_already_faulty_may_still_be_edited(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    # A hand-written memory without frontmatter: the agent may correct its facts (the fault
    # was there before), but may not make a valid memory invalid.
    legacy = ws.memory_dir / "legacy.md"
    valid = ws.memory_dir / "valid.md"
    ws.memory_dir.mkdir(parents=True, exist_ok=True)
    legacy.write_text("We deploy on Fridays.\n")
    valid.write_text(memory_text("Deploys", "when we deploy", "project", "On Fridays."))
    fake_model.enqueue(
        tool_use_reply([("Read", {"file_path": str(legacy)}), ("Read", {"file_path": str(valid)})]),
        tool_use_reply(
            [
                ("Edit", {"file_path": str(legacy), "old_string": "Fridays", "new_string": "Mondays"}),
                ("Edit", {"file_path": str(valid), "old_string": "type: project", "new_string": "type: x"}),
            ]
        ),
        text_reply("done"),
    )  # fmt: skip
    await _turn(ws, CONVO)
    assert legacy.read_text() == "We deploy on Mondays.\n"
    assert "type: project" in valid.read_text()
    results = fake_model.message_requests()[2].json["messages"][-1]["content"]
    assert "is_error" not in results[0]
    assert "invalid type 'x'" in results[1]["content"]


async def test_an_index_rewritten_alone_is_reconciled(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    # A run that wrote only MEMORY.md skipped the reconcile (only memories count as written):
    # an index that dropped a memory's line and listed 300 files that do not exist stayed so,
    # and the prompt's index (its first 200 lines) held none of the real memories.
    saved = await ws.am.write_memory(
        ws.project, type="user", name="Tabs", description="likes tabs", body="Tabs."
    )
    index = ws.memory_dir / "MEMORY.md"
    junk = "".join(f"- [Idea {i}](idea_{i}.md) — brainstorm {i}\n" for i in range(300))
    fake_model.enqueue(
        tool_use_reply([("Read", {"file_path": str(index)})]),
        tool_use_reply([_write(index, junk)]),
        text_reply(NOTHING_MARKER),
    )
    await _turn(ws, CONVO)
    lines = index.read_text().splitlines()
    assert len(lines) == 1
    assert saved.path.name in lines[0]


async def test_a_memory_written_then_edited_counts_once(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    # Each write of a run was counted: a memory written, then corrected with an Edit, was two
    # in status.features.extraction.written and listed twice in last_run.written.
    memory = ws.memory_dir / "user_tabs.md"
    fake_model.enqueue(
        tool_use_reply([_write(memory, memory_text("Tabs", "likes tabs", "user", "Tabs."))]),
        tool_use_reply([("Edit", {"file_path": str(memory), "old_string": "Tabs.", "new_string": "Tabs, width 4."})]),
        text_reply("saved"),
    )  # fmt: skip
    client = await _subscribe(ws)
    await _turn(ws, CONVO)
    await ws.handle.call("status")  # after every notification already sent
    assert _saved(client) == [str(memory)]
    extraction = (await ws.handle.call("status"))["features"]["extraction"]
    assert extraction["written"] == 1
    assert extraction["last_run"]["written"] == [str(memory)]
    await client.close()


@pytest.mark.parametrize(
    "char",
    [
        "\u202e",  # a bidi override: the line shown reversed
        "\x1b",  # ESC, and the C1 CSI: a terminal's escape sequence (review: only bidi refused)
        "\x9b",
    ],
)
async def test_an_index_line_with_a_bidi_or_control_character_is_refused_unless_there(
    ws: Workspace, fake_model: FakeMessagesAPI, char: str
) -> None:
    # Session 22: the agent copied a hand-made memory's name holding U+202E into MEMORY.md,
    # which a terminal editor then showed reordered; memoryd's own index lines hold none (nor
    # a control character, `memfile.UNSAFE_CHARACTERS`).
    saved = await ws.am.write_memory(
        ws.project, type="user", name="Tabs", description="likes tabs", body="Tabs."
    )
    index = ws.memory_dir / "MEMORY.md"
    before = index.read_text()
    forged = f"- [Tabs](user_tabs.md) — likes {char}[2Jspaces\n"
    fake_model.enqueue(
        tool_use_reply([("Read", {"file_path": str(index)})]),
        tool_use_reply([_write(index, forged)]),
        text_reply(NOTHING_MARKER),
    )
    await _turn(ws, CONVO)
    assert index.read_text() == before
    result = fake_model.message_requests()[2].json["messages"][-1]["content"][0]
    assert result["is_error"] is True
    assert f"(U+{ord(char):04X})" in result["content"]
    # One the index held already (written by hand) may stay through the agent's Edit.
    index.write_text(forged)
    fake_model.enqueue(
        tool_use_reply([("Read", {"file_path": str(index)})]),
        tool_use_reply(
            [("Edit", {"file_path": str(index), "old_string": "likes", "new_string": "hates"})]
        ),
        text_reply(NOTHING_MARKER),
    )
    await _turn(ws, CONVO + transcript(("I use four-space tabs.", "Noted.")))
    assert index.read_text() == f"- [Tabs]({saved.path.name}) — hates {char}[2Jspaces\n"
