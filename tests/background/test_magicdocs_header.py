"""MagicDocs: the header as a user's files hold it, and as an update must leave it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from memoryd.magicdocs import DocHeader, _header_match, parse_header
from tests.background.conftest import Script, Workspace, transcript
from tests.fakes.messages_api import slow, text_reply, tool_use_reply

DOC = "# MAGIC DOC: Deployment notes\n_Keep the environments._\n\n- staging\n"
BREAK_TURN = transcript(("We added a prod environment.", "Noted."))


async def _update(ws: Workspace, doc: Path) -> Any:
    reply = await ws.handle.call(
        "after_turn",
        session_id="s1",
        cwd=str(ws.cwd),
        messages=BREAK_TURN,
        read_paths=[str(doc)],
    )
    await ws.handle.daemon.services.magic_docs.wait_idle()
    return reply


def _results(script: Script, request: int) -> list[dict[str, Any]]:
    content = script.seen["magic"][request]["messages"][-1]["content"]
    return [b for b in content if b["type"] == "tool_result"]


async def test_a_doc_saved_with_a_byte_order_mark_is_a_magic_doc(
    ws: Workspace, script: Script
) -> None:
    # Found by the third hunt: Windows editors save a BOM before the first line's `#`, `^`
    # did not match there, and such a doc was never registered nor updated.
    assert parse_header("\ufeff" + DOC) == parse_header(DOC)
    doc = ws.cwd / "DEPLOY.md"
    doc.write_bytes(("\ufeff" + DOC).encode())
    edit = {"file_path": str(doc), "old_string": "- staging\n", "new_string": "- staging\n- prod\n"}
    script.add("magic", tool_use_reply([("Edit", edit)]), text_reply("updated"))
    reply = await _update(ws, doc)
    assert reply["scheduled"]["magic_docs"] == 1
    listed = await ws.handle.call("magicdocs.list")
    assert [d["title"] for d in listed["docs"]] == ["Deployment notes"]
    assert doc.read_bytes() == ("\ufeff" + DOC + "- prod\n").encode()  # the BOM kept


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("# MAGIC DOC: Deployment notes\n_Keep the environments._\n", "# Deployment notes\n"),
        ("_Keep the environments._\n", "_Keep everything._\n"),
        ("# MAGIC DOC: Deployment notes", "# MAGIC DOC: Deploys"),
    ],
)
async def test_an_update_that_changes_the_header_is_not_written(
    ws: Workspace, script: Script, old: str, new: str
) -> None:
    # Found by the third hunt: the agent's Edit took the header line away; the doc, edited
    # as a magic doc, was one no longer, and its next update unregistered it.
    doc = ws.cwd / "DEPLOY.md"
    doc.write_text(DOC)
    edit = {"file_path": str(doc), "old_string": old, "new_string": new}
    script.add("magic", tool_use_reply([("Edit", edit)]), text_reply("done"))
    await _update(ws, doc)
    assert doc.read_text() == DOC
    (result,) = _results(script, 1)
    assert result["is_error"] is True
    assert "changes the `# MAGIC DOC: Deployment notes` header line" in result["content"]
    status = (await ws.handle.call("status"))["features"]["magic_docs"]
    assert (status["updated"], status["skipped"], status["registered"]) == (0, 1, 1)


async def test_a_doc_whose_header_the_user_removed_during_the_update_is_not_edited(
    ws: Workspace, script: Script
) -> None:
    # The user took the header away while the model thought: its Edit was refused as stale,
    # it read the doc again (as told) and edited a doc that was no longer magic.
    doc = ws.cwd / "DEPLOY.md"
    doc.write_text(DOC)
    edit = {"file_path": str(doc), "old_string": "- staging\n", "new_string": "- staging\n- prod\n"}
    script.add(
        "magic",
        slow(1.0, tool_use_reply([("Edit", edit)])),
        tool_use_reply([("Read", {"file_path": str(doc)})]),
        tool_use_reply([("Edit", edit)]),
        text_reply("stopped"),
    )
    update = asyncio.create_task(_update(ws, doc))
    while not script.seen["magic"]:  # the doc is in the prompt; the model thinks
        await asyncio.sleep(0.01)
    users = "# Deployment notes\n\n- staging\n"
    doc.write_text(users)
    await update
    assert doc.read_text() == users
    assert "changed since you read it" in _results(script, 1)[0]["content"]
    (result,) = _results(script, 3)
    assert result["is_error"] is True
    assert "is no longer a magic doc" in result["content"]


async def test_an_update_below_the_header_is_written(ws: Workspace, script: Script) -> None:
    doc = ws.cwd / "DEPLOY.md"
    doc.write_text(DOC)
    edit = {"file_path": str(doc), "old_string": "- staging\n", "new_string": "- staging\n- prod\n"}
    script.add("magic", tool_use_reply([("Edit", edit)]), text_reply("updated"))
    await _update(ws, doc)
    assert doc.read_text() == DOC + "- prod\n"
    assert (await ws.handle.call("status"))["features"]["magic_docs"]["updated"] == 1


async def test_an_update_may_not_grow_the_doc_past_what_a_magic_doc_may_be(
    ws: Workspace, script: Script
) -> None:
    # Found by the third hunt: the agent's Edit grew a 492 KB doc past 512,000 bytes (its
    # writes hold to 1,000,000); the next update dropped the doc as if its header were gone.
    doc = ws.cwd / "DECISIONS.md"
    text = DOC + "- decided x\n" * 41_000
    doc.write_text(text)
    grow = {"file_path": str(doc), "old_string": "- staging\n", "new_string": "z" * 20_001}
    script.add("magic", tool_use_reply([("Edit", grow)]), text_reply("done"))
    await _update(ws, doc)
    assert doc.read_text() == text
    (result,) = _results(script, 1)
    assert "over the 512,000 a magic doc may be; make it shorter" in result["content"]
    await _update(ws, doc)
    listed = await ws.handle.call("magicdocs.list")
    assert [d["title"] for d in listed["docs"]] == ["Deployment notes"]


async def test_the_log_says_why_a_doc_was_unregistered(ws: Workspace, script: Script) -> None:
    from structlog.testing import capture_logs

    doc = ws.cwd / "DEPLOY.md"
    doc.write_text(DOC)
    await _update(ws, doc)
    doc.write_text(DOC + "x" * 512_000)  # the user's text: no longer a magic doc
    with capture_logs() as logs:
        await ws.handle.call("after_turn", session_id="s1", cwd=str(ws.cwd), messages=BREAK_TURN)
        await ws.handle.daemon.services.magic_docs.wait_idle()
    (entry,) = [e for e in logs if e["event"] == "magic doc unregistered"]
    assert entry["reason"] == "over 512,000 bytes"  # it said "header gone"
    assert (await ws.handle.call("magicdocs.list"))["docs"] == []


async def test_the_docs_updated_after_one_turn_share_the_cached_conversation(
    ws: Workspace, script: Script
) -> None:
    # Found by the third hunt: the conversation and the doc were one block, so the N docs a
    # session read, each updated after the same natural break, shared no cached prefix and
    # each paid the whole conversation (up to 60,000 characters) again.
    docs = []
    for i in range(3):
        doc = ws.cwd / f"doc{i}.md"
        doc.write_text(DOC.replace("Deployment notes", f"Doc {i}"))
        docs.append(str(doc))
    await ws.handle.call(
        "after_turn", session_id="s1", cwd=str(ws.cwd), messages=BREAK_TURN, read_paths=docs
    )
    await ws.handle.daemon.services.magic_docs.wait_idle()
    requests = script.seen["magic"]
    assert len(requests) == 3
    talks = [r["messages"][0]["content"][0] for r in requests]
    assert all(t == talks[0] for t in talks)  # the same block, breakpoint and all
    assert talks[0]["cache_control"] == {"type": "ephemeral"}
    assert "We added a prod environment." in talks[0]["text"]
    assert "MAGIC DOC" not in talks[0]["text"]  # each doc's own part comes after it
    assert {
        (r["system"] == requests[0]["system"], r["tools"] == requests[0]["tools"]) for r in requests
    } == {(True, True)}
    for request, path in zip(requests, docs, strict=True):
        assert path in request["messages"][0]["content"][1]["text"]


async def test_a_bold_line_under_the_header_is_no_instruction_and_may_be_updated(
    ws: Workspace, script: Script
) -> None:
    # `*…*` matched `**Current release: 1.2**`: the bold line was read as the doc's italic
    # instruction, and the header screen refused every update of it.
    status = "# MAGIC DOC: Release status\n**Current release: 1.2**\n\n- notes\n"
    header = parse_header(status)
    assert header is not None
    assert header.instruction is None
    assert parse_header("# MAGIC DOC: T\n_snake_case is the rule_\n") == DocHeader(
        "T", "snake_case is the rule"
    )
    doc = ws.cwd / "STATUS.md"
    doc.write_text(status)
    edit = {"file_path": str(doc), "old_string": "1.2**", "new_string": "1.3**"}
    script.add("magic", tool_use_reply([("Edit", edit)]), text_reply("updated"))
    await _update(ws, doc)
    assert doc.read_text() == status.replace("1.2", "1.3")


async def test_an_edit_that_adds_an_italic_line_under_the_header_is_told_so(
    ws: Workspace, script: Script
) -> None:
    # The doc has no instruction; told that its edit changed "the italic line under it",
    # the agent looked for a line that was not there.
    text = "# MAGIC DOC: Release status\n\n- notes\n"
    doc = ws.cwd / "STATUS.md"
    doc.write_text(text)
    edit = {"file_path": str(doc), "old_string": "- notes\n", "new_string": "_Updated._\n- notes\n"}
    script.add("magic", tool_use_reply([("Edit", edit)]), text_reply("done"))
    await _update(ws, doc)
    assert doc.read_text() == text
    (result,) = _results(script, 1)
    assert "puts an italic line right under the `# MAGIC DOC: Release status`" in result["content"]


FENCED_EXAMPLE = (
    "# Our docs\n\nStart a living doc like this:\n\n"
    "```markdown\n# MAGIC DOC: Architecture\n_Keep the module list current._\n```\n"
)


@pytest.mark.parametrize(
    ("text", "header"),
    [
        (FENCED_EXAMPLE, None),
        (FENCED_EXAMPLE.replace("```", "~~~~"), None),
        (FENCED_EXAMPLE.replace("\n", "\r\n"), None),
        (FENCED_EXAMPLE.replace("```markdown", "```").replace("\n", "\r\n"), None),
        (
            DOC + "\n```\n# MAGIC DOC: Example\n```\n",
            DocHeader("Deployment notes", "Keep the environments."),
        ),
        (
            "```\n# MAGIC DOC: Example\n```\n" + DOC,
            DocHeader("Deployment notes", "Keep the environments."),
        ),
        # A fence left open runs to the end of the doc, as in CommonMark.
        ("```\nsome code\n" + DOC, None),
        # "```x```" on one line is a code span, not a fence.
        ("```x```\n" + DOC, DocHeader("Deployment notes", "Keep the environments.")),
    ],
)
def test_a_header_in_a_fenced_code_block_is_an_example_not_the_header(
    text: str, header: DocHeader | None
) -> None:
    assert parse_header(text) == header


class _CountedText(str):
    """A text that adds up how much of it `count` scans."""

    scanned = 0

    def count(self, sub: str, start: Any = None, end: Any = None) -> int:
        first, last, _ = slice(start, end).indices(len(self))
        self.scanned += max(0, last - first)
        return super().count(sub, start, end)


def test_header_lines_in_a_fence_are_read_once_each() -> None:
    # f2dbe98 counted each header line's line number from the doc's start: a 512 KB doc of
    # fenced header lines (34,000 of them) took 3 s a check, up to 500 docs a turn.
    text = _CountedText("```\n" + "# MAGIC DOC: x\n" * 2_000)
    assert _header_match(text) is None
    assert text.scanned <= len(text)


async def test_a_readme_that_shows_the_header_in_a_fence_is_not_updated(
    ws: Workspace, script: Script
) -> None:
    # Found by session 22's hunt: the fenced example was taken for the header, the README
    # was registered, and at the next natural break a background model rewrote it.
    readme = ws.cwd / "README.md"
    readme.write_text(FENCED_EXAMPLE)
    reply = await _update(ws, readme)
    assert reply["scheduled"]["magic_docs"] == 0
    assert (await ws.handle.call("magicdocs.list"))["docs"] == []
    assert script.seen.get("magic", []) == []
    assert readme.read_text() == FENCED_EXAMPLE


async def test_an_edit_that_puts_the_header_in_a_fence_is_not_written(
    ws: Workspace, script: Script
) -> None:
    doc = ws.cwd / "DEPLOY.md"
    doc.write_text(DOC)
    header = DOC.split("\n", 1)[0] + "\n"
    edit = {"file_path": str(doc), "old_string": header, "new_string": "```\n" + header + "```\n"}
    script.add("magic", tool_use_reply([("Edit", edit)]), text_reply("done"))
    await _update(ws, doc)
    assert doc.read_text() == DOC
    (result,) = _results(script, 1)
    assert "changes the `# MAGIC DOC: Deployment notes` header line" in result["content"]
