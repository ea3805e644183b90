"""MagicDocs: how many docs one natural break updates.

Found by the fourth hunt: every doc a session read was queued after each turn that ended
without a tool call, so a session that had read 50 docs paid 50 model runs per such turn.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from memoryd.magicdocs import MAX_UPDATES_PER_BREAK
from tests.background.conftest import Script, Workspace, transcript

_DOC_PATH = re.compile(r"The document `([^`]+)` is a magic doc")


def _docs(ws: Workspace, count: int) -> list[Path]:
    folder = ws.cwd / "docs"
    folder.mkdir(exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"d{i:02}.md"
        path.write_text(f"# MAGIC DOC: Doc {i}\n\ntext\n")
        paths.append(path)
    return paths


def _updated(script: Script, since: int) -> list[str]:
    """The docs of the model runs from the `since`th on, in order."""
    out = []
    for body in script.seen["magic"][since:]:
        match = _DOC_PATH.search(json.dumps(body["messages"][0]["content"]))
        assert match is not None
        out.append(Path(match.group(1)).name)
    return out


async def _break(ws: Workspace, read: list[Path] | None = None) -> Any:
    reply = await ws.handle.call(
        "after_turn",
        session_id="s1",
        cwd=str(ws.cwd),
        messages=transcript(("the release is on Friday", "noted")),
        read_paths=[str(p) for p in read or []],
    )
    await ws.handle.daemon.services.magic_docs.wait_idle()
    return reply


async def test_one_natural_break_updates_a_few_docs_and_the_rest_get_later_breaks(
    ws: Workspace, script: Script
) -> None:
    assert MAX_UPDATES_PER_BREAK == 5
    docs = _docs(ws, 12)  # read in this order: d11 most recently
    reply = await _break(ws, docs)
    assert reply["scheduled"]["magic_docs"] == 5
    first = _updated(script, 0)
    assert sorted(first) == [f"d{i:02}.md" for i in range(7, 12)]  # the ones read last
    status = (await ws.handle.call("status"))["features"]["magic_docs"]
    assert (status["registered"], status["per_break"], status["deferred"]) == (12, 5, 7)
    listed = {Path(d["path"]).name: d for d in (await ws.handle.call("magicdocs.list"))["docs"]}
    assert sorted(n for n, d in listed.items() if d["last_queued"] is not None) == sorted(first)

    # The next break takes the docs that waited, not the same five again.
    assert (await _break(ws))["scheduled"]["magic_docs"] == 5
    second = _updated(script, 5)
    assert sorted(second) == [f"d{i:02}.md" for i in range(2, 7)]
    # And the third the last two, then the two queued longest ago (read last among them).
    await _break(ws)
    third = _updated(script, 10)
    assert sorted(third) == ["d00.md", "d01.md", "d09.md", "d10.md", "d11.md"]
    assert (await ws.handle.call("status"))["features"]["magic_docs"]["deferred"] == 7


async def test_a_session_with_few_docs_has_them_all_updated_at_each_break(
    ws: Workspace, script: Script
) -> None:
    docs = _docs(ws, 3)
    assert (await _break(ws, docs))["scheduled"]["magic_docs"] == 3
    assert (await _break(ws))["scheduled"]["magic_docs"] == 3
    assert len(script.seen["magic"]) == 6
    assert (await ws.handle.call("status"))["features"]["magic_docs"]["deferred"] == 0
