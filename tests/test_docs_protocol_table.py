"""docs/protocol.md's "Methods at a glance" is what the daemon serves: every method, with
exactly its params fields, and no result field the daemon sends left out. Only auto memory's
own table (docs/auto-memory.md) was read against the code; the page client authors start
from was not."""

from __future__ import annotations

import re
from pathlib import Path

from memoryd.daemon.wiring import rpc_methods
from tests.conftest import DaemonHandle

REPO = Path(__file__).resolve().parent.parent


def _rows() -> dict[str, tuple[str, str]]:
    text = (REPO / "docs" / "protocol.md").read_text()
    section = text.split("\n## Methods at a glance\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, tuple[str, str]] = {}
    for names, params, result in re.findall(r"^\| (`[^|]*`) \| (.*?) \| (.*) \|$", section, re.M):
        for name in re.findall(r"`([a-z_.]+)`", names):
            rows[name] = (params, result)
    return rows


def _top_level(cell: str) -> set[str]:
    """The names a cell gives at its top level, not inside (…), […] or {…}."""
    top = cell
    for pattern in (r"\([^()]*\)", r"\[[^\[\]]*\]", r"\{[^{}]*\}"):
        while re.search(pattern, top):
            top = re.sub(pattern, "", top)
    return {
        word.strip().rstrip("?")
        for span in re.findall(r"`([^`]+)`", top)
        for word in span.split(",")
        if re.fullmatch(r"\s*\w+\??\s*", word)
    }


def test_every_method_is_in_the_table_with_exactly_its_params() -> None:
    rows = _rows()
    specs = rpc_methods()
    assert sorted(set(specs) ^ set(rows)) == []
    differ = {
        name: sorted(_top_level(rows[name][0]) ^ set(spec.params.model_fields))
        for name, spec in specs.items()
        if _top_level(rows[name][0]) != set(spec.params.model_fields)
    }
    assert differ == {}


async def test_no_result_field_is_left_out_of_the_table(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    # Auto memory's and team sync's methods are read against their own pages' tables
    # (test_docs_claims.py); these are the rest a daemon without a model or team answers.
    project = tmp_path / "proj"
    (project / "src").mkdir(parents=True)
    (project / "CLAUDE.md").write_text("Run make check.\n")
    cwd = str(project)
    messages = [
        {"role": "user", "content": "use tabs"},
        {"role": "assistant", "content": "ok"},
    ]
    replies = {
        "status": await daemon.call("status"),
        "rpc.methods": await daemon.call("rpc.methods"),
        "get_context": await daemon.call("get_context", cwd=cwd, session_id="s"),
        "after_turn": await daemon.call("after_turn", session_id="s", cwd=cwd, messages=messages),
        "after_tool": await daemon.call(
            "after_tool", session_id="s", cwd=cwd, tool="Read", read_paths=[f"{cwd}/src/a.py"]
        ),
        "compact": await daemon.call("compact", session_id="s", cwd=cwd, messages=messages),
        "settings.get": await daemon.call("settings.get", cwd=cwd),
        "settings.set": await daemon.call("settings.set", key="autoDreamEnabled", value=True),
        "includes.list": await daemon.call("includes.list", cwd=cwd),
        "includes.approve": await daemon.call("includes.approve", cwd=cwd),
        "includes.revoke": await daemon.call("includes.revoke", cwd=cwd),
        "magicdocs.list": await daemon.call("magicdocs.list", cwd=cwd),
        "subscribe": await daemon.call("subscribe", events=["memory/saved"]),
    }
    rows = _rows()
    left_out = {
        name: sorted(set(reply) - _top_level(rows[name][1]))
        for name, reply in replies.items()
        if not set(reply) <= _top_level(rows[name][1])
    }
    assert left_out == {}
