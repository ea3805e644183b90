"""Secrets in what a background agent writes: refused with memorydRefuseSecrets, else a warning.

Found by a bug hunt: `memory.write` refused a memory holding an AWS key (-32005), but
extraction (and dream) saved the very same memory from the conversation with no warning, and
MagicDocs wrote the key into a repository doc unscanned.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from memoryd.agent.secret_screen import added_secrets
from tests.background.conftest import Script, Workspace, memory_text, transcript
from tests.conftest import IsolatedEnv
from tests.fakes.messages_api import text_reply, tool_use_reply

# Built at run time so that no literal here looks like a key to a scanner.
AWS_KEY = "AK" + "IA" + "Z7QHW2KD4MNB3XPL"
GITHUB_TOKEN = "gh" + "p_" + "N3r8wq5Vb2Zt7LkPf0HsXa9Jc4Ue6Ym1Dg8R"
CONVO = transcript((f"our deploy key is {AWS_KEY}", "noted"))


def _refuse(env: IsolatedEnv, on: bool = True) -> None:
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "settings.json").write_text(json.dumps({"memorydRefuseSecrets": on}))


async def _subscribe(ws: Workspace) -> Any:
    client = await ws.handle.client()
    await client.call("subscribe", {"events": ["worker/error", "memory/saved", "magicdoc/updated"]})
    return client


def _notes(client: Any) -> list[dict[str, Any]]:
    out = []
    while not client.notifications.empty():
        note = client.notifications.get_nowait()
        out.append({"event": note["method"], **note["params"]})
    return out


def _tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]


async def _extract(ws: Workspace) -> None:
    await ws.handle.call("after_turn", session_id="s1", cwd=str(ws.cwd), messages=CONVO)
    await ws.handle.daemon.services.extraction.wait_idle()
    await asyncio.sleep(0.05)


@pytest.mark.parametrize(
    ("name", "body", "where"),
    [
        ("reference_aws.md", f"deploy key {AWS_KEY}", "line 7"),
        # Found by a bug hunt: only the text a write adds was scanned, so a memory file named
        # by a key (its name goes into MEMORY.md's index line) was saved with the refusal on,
        # where memory.write refuses such a `file`.
        (f"reference_{AWS_KEY}.md", "ask the ops team", "the file name"),
    ],
)
async def test_extraction_is_refused_a_secret_when_the_user_says_so(
    ws: Workspace, script: Script, isolated_env: IsolatedEnv, name: str, body: str, where: str
) -> None:
    _refuse(isolated_env)
    target = ws.memory_dir / name
    content = memory_text("AWS keys", "the deploy keys", "reference", body)
    script.add(
        "extraction",
        tool_use_reply([("Write", {"file_path": str(target), "content": content})]),
        text_reply("NOTHING_TO_SAVE"),
    )
    client = await _subscribe(ws)
    await _extract(ws)
    assert not target.exists()
    (result,) = _tool_results(script.seen["extraction"][1])
    assert result["is_error"] is True
    assert f"{where} matches secret rule aws-access-token" in result["content"]
    assert "memorydRefuseSecrets is on" in result["content"]
    assert AWS_KEY not in result["content"]
    notes = _notes(client)
    assert not [n for n in notes if n["event"] == "memory/saved"]
    errors = [n["message"] for n in notes if n["event"] == "worker/error"]
    assert any("denied Write" in m and "aws-access-token" in m for m in errors)
    assert AWS_KEY not in json.dumps(notes)
    await client.close()


async def test_extraction_saves_a_secret_with_a_warning_otherwise(
    ws: Workspace, script: Script
) -> None:
    target = ws.memory_dir / "reference_aws.md"
    content = memory_text("AWS keys", "the deploy keys", "reference", f"deploy key {AWS_KEY}")
    script.add(
        "extraction",
        tool_use_reply([("Write", {"file_path": str(target), "content": content})]),
        text_reply("Saved reference_aws.md"),
    )
    client = await _subscribe(ws)
    await _extract(ws)
    assert AWS_KEY in target.read_text()  # as memory.write does: saved, and said so
    notes = _notes(client)
    (warning,) = [n for n in notes if n["event"] == "worker/error"]
    assert warning["worker"] == "extraction"
    assert str(target) in warning["message"]
    assert "line 7 matches secret rule aws-access-token" in warning["message"]
    assert "set memorydRefuseSecrets to true" in warning["message"]
    assert AWS_KEY not in json.dumps(notes)
    (result,) = _tool_results(script.seen["extraction"][1])
    assert "is_error" not in result
    assert "Warning:" in result["content"]
    await client.close()


async def test_an_edit_beside_a_secret_already_there_is_not_refused(
    ws: Workspace, script: Script, isolated_env: IsolatedEnv
) -> None:
    # Only what a write adds is judged: a memory saved with a warning before the user turned
    # the refusal on can still be edited.
    existing = await ws.am.write_memory(
        ws.project, type="reference", name="Deploy", description="deploys", body=f"key {AWS_KEY}"
    )
    _refuse(isolated_env)
    edit = {"file_path": str(existing.path), "old_string": "deploys", "new_string": "how we deploy"}
    read = {"file_path": str(existing.path)}  # a write of a file there needs a Read first
    script.add(
        "extraction", tool_use_reply([("Read", read), ("Edit", edit)]), text_reply("updated")
    )
    client = await _subscribe(ws)
    await _extract(ws)
    assert "how we deploy" in existing.path.read_text()
    assert not [n for n in _notes(client) if n["event"] == "worker/error"]
    await client.close()


async def test_dream_is_refused_a_secret_too(
    ws: Workspace, script: Script, isolated_env: IsolatedEnv
) -> None:
    first = await ws.am.write_memory(
        ws.project, type="user", name="Tabs", description="tabs", body="The user likes tabs."
    )
    await ws.am.write_memory(
        ws.project, type="user", name="Tea", description="tea", body="The user drinks tea."
    )
    _refuse(isolated_env)
    edit = {
        "file_path": str(first.path),
        "old_string": "likes tabs.",
        "new_string": f"likes tabs.\ntoken {GITHUB_TOKEN}",
    }
    read = {"file_path": str(first.path)}
    script.add("dream", tool_use_reply([("Read", read), ("Edit", edit)]), text_reply("done"))
    result = await ws.handle.call("memory.dream", cwd=str(ws.cwd))
    assert GITHUB_TOKEN not in first.path.read_text()
    assert result["edited"] == []
    assert any("github-pat" in d for d in result["denied"])
    assert GITHUB_TOKEN not in json.dumps(result)


DOC = "# MAGIC DOC: Deploy\n_how we deploy_\n\nNothing yet.\n"


async def _update_doc(ws: Workspace, script: Script) -> Path:
    doc = ws.cwd / "docs" / "deploy.md"
    doc.parent.mkdir()
    doc.write_text(DOC)
    edit = {
        "file_path": str(doc),
        "old_string": "Nothing yet.",
        # Not at a sentence's end: the scanner's token rules (gitleaks') want a space, quote,
        # `;` or the line's end after the key.
        "new_string": f"Deploy with key {AWS_KEY} (the CI user).",
    }
    script.add("magic", tool_use_reply([("Edit", edit)]), text_reply("updated"))
    await ws.handle.call(
        "after_turn", session_id="s1", cwd=str(ws.cwd), messages=CONVO, read_paths=[str(doc)]
    )
    await ws.handle.daemon.services.magic_docs.wait_idle()
    await asyncio.sleep(0.05)
    return doc


async def test_magicdocs_is_refused_a_secret_when_the_user_says_so(
    ws: Workspace, script: Script, isolated_env: IsolatedEnv
) -> None:
    _refuse(isolated_env)
    client = await _subscribe(ws)
    doc = await _update_doc(ws, script)
    assert doc.read_text() == DOC
    (result,) = _tool_results(script.seen["magic"][1])
    assert result["is_error"] is True
    assert "secret rule aws-access-token" in result["content"]
    notes = _notes(client)
    assert not [n for n in notes if n["event"] == "magicdoc/updated"]
    assert any(n["event"] == "worker/error" and "aws-access-token" in n["message"] for n in notes)
    assert AWS_KEY not in json.dumps(notes)
    await client.close()


async def test_magicdocs_warns_about_a_secret_it_writes_otherwise(
    ws: Workspace, script: Script, isolated_env: IsolatedEnv
) -> None:
    # A repository cannot turn the refusal on or off; the user's setting says off here.
    _refuse(isolated_env, on=False)
    client = await _subscribe(ws)
    doc = await _update_doc(ws, script)
    assert AWS_KEY in doc.read_text()
    notes = _notes(client)
    (warning,) = [n for n in notes if n["event"] == "worker/error"]
    assert warning["worker"] == "magic_docs"
    assert f"{doc} written" in warning["message"]
    assert "line 4 matches secret rule aws-access-token" in warning["message"]
    assert "repository" in warning["message"]
    assert AWS_KEY not in json.dumps(notes)
    assert [n["event"] for n in notes if n["event"] == "magicdoc/updated"] == ["magicdoc/updated"]
    await client.close()


@pytest.mark.parametrize(
    ("old", "new", "rules"),
    [
        (None, f"key {AWS_KEY}\n", ["aws-access-token"]),  # a new file: all of it
        (f"key {AWS_KEY}\n", f"intro\nkey {AWS_KEY}\n", []),  # the line was there
        (f"key {AWS_KEY}\n", f"key {AWS_KEY}\nmore {GITHUB_TOKEN}\n", ["github-pat"]),
        ("clean\n", "clean\n", []),
    ],
)
def test_only_the_text_a_write_adds_is_judged(old: str | None, new: str, rules: list[str]) -> None:
    assert [s.rule for s in added_secrets(old, new)] == rules
