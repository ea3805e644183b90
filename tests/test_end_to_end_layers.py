"""Every layer together, through the real daemon socket: instruction files, auto memory and
recall, extraction, session memory and compaction, team sync with its secret scanner, and the
status report — one git project, the scripted fake model, a real `memoryd-team` server."""

from __future__ import annotations

import asyncio
import json
import random
import re
import string
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memoryd.core.team_config import TeamConfig
from memoryd.session.compaction import BOUNDARY_TAG
from memoryd.team.protocol import TEAM_MEMORY_PATH
from memoryd_client import AsyncClient
from memoryd_team.settings import ServerSettings
from tests.conftest import (
    DaemonHandle,
    IsolatedEnv,
    daemon_config,
    fake_model_config,
    start_daemon,
    stop_daemon,
)
from tests.fakes.messages_api import FakeMessagesAPI, Reply, json_reply, text_reply, tool_use_reply
from tests.session.builders import assistant, conversation, tool_call, tool_result, user
from tests.session.conftest import MARKER as SESSION_MARKER
from tests.session.test_compaction import assert_pairs_intact
from tests.team.conftest import eventually
from tests.team_server.conftest import ThreadedServer

REPO = "acme/widgets"
SID = "e2e-session"
TITLE_LINE = "_A short, specific title for this session (5-10 words)._"
DRAFT = re.compile(r"(/[^\s\"'`]*\.summary\.draft\.md)")


class Router:
    """The fake model's replies, routed by which part of the daemon is asking (background
    workers run concurrently, so one FIFO would be consumed in a racy order)."""

    def __init__(self, fake: FakeMessagesAPI) -> None:
        self.queues: dict[str, list[Reply | Callable[[Any], Reply]]] = {
            "extraction": [],
            "session": [],
            "recall": [],
            "dream": [],
        }
        self.seen: dict[str, list[str]] = {k: [] for k in (*self.queues, "other")}
        fake.handler = self

    @staticmethod
    def kind(body: Any) -> str:
        text = json.dumps(body)
        system = json.dumps(body.get("system", "")) if isinstance(body, dict) else ""
        if SESSION_MARKER in text:
            return "session"
        if "memory extraction" in system:
            return "extraction"
        if '{\\"selected\\"' in system or '{"selected"' in system:
            return "recall"
        if "consolidation agent" in system:
            return "dream"
        return "other"

    def __call__(self, body: Any) -> Reply:
        kind = self.kind(body)
        self.seen[kind].append(json.dumps(body))
        queue = self.queues.get(kind, [])
        if queue:
            reply = queue.pop(0)
            return reply(body) if callable(reply) else reply
        return text_reply("NOTHING_TO_SAVE" if kind == "extraction" else "ok")


def edit_session_title(body: Any) -> Reply:
    """Edit the draft summary the session-notes prompt names (found in the request)."""
    match = DRAFT.search(json.dumps(body))
    assert match, "the session-notes prompt names its draft file"
    return tool_use_reply(
        [
            (
                "Edit",
                {
                    "file_path": match.group(1),
                    "old_string": TITLE_LINE,
                    "new_string": f"{TITLE_LINE}\nShip the widgets API",
                },
            )
        ]
    )


def git_project(root: Path) -> Path:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(
        ["git", "-C", str(root), "remote", "add", "origin", f"git@github.com:{REPO}.git"],
        check=True,
    )
    (root / "CLAUDE.md").write_text("# Widgets\nProject rule: run `make test` before pushing.\n")
    (root / "CLAUDE.local.md").write_text("Local note: my sandbox is at localhost:8080.\n")
    rules = root / ".claude" / "rules"
    rules.mkdir(parents=True)
    (rules / "api.md").write_text(
        '---\npaths: ["src/api/**"]\n---\nAPI rule: every handler validates its input.\n'
    )
    (root / "src" / "api").mkdir(parents=True)
    (root / "src" / "api" / "users.py").write_text("def users(): ...\n")
    return root.resolve()


def fake_aws_secret() -> str:
    """A credential-shaped file, assembled at run time so no secret sits in the source."""
    rng = random.Random(20261202)
    key_id = "AK" + "IA" + "".join(rng.choice(string.ascii_uppercase + "234567") for _ in range(16))
    secret = "".join(rng.choice(string.ascii_letters + string.digits + "/+") for _ in range(40))
    return (
        "---\nname: Deploy credentials\ndescription: how CI deploys\ntype: reference\n---\n\n"
        f"aws_access_key_id = {key_id}\naws_secret_access_key = {secret}\n"
    )


async def next_event(
    client: AsyncClient, method: str, timeout: float = 10.0, **expected: Any
) -> dict[str, Any]:
    """The next notification called `method` with `expected` params (others are skipped)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        note = await client.next_notification(max(0.1, deadline - loop.time()))
        params: dict[str, Any] = note["params"]
        if note["method"] == method and all(params.get(k) == v for k, v in expected.items()):
            return params


@pytest.fixture
def team_server(tmp_path: Path) -> Iterator[ThreadedServer]:
    server = ThreadedServer(f"sqlite://{tmp_path / 'team.sqlite3'}", ServerSettings()).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def handle(
    short_tmp: Path, fake_model: FakeMessagesAPI, team_server: ThreadedServer
) -> AsyncIterator[DaemonHandle]:
    token = team_server.token(REPO, name="e2e")
    config = daemon_config(
        short_tmp,
        model=fake_model_config(fake_model),
        team=TeamConfig(url=team_server.url, token=token, debounce_s=30.0),
    )
    daemon = await start_daemon(config)
    try:
        yield daemon
    finally:
        await stop_daemon(daemon)


async def test_every_layer_together(
    handle: DaemonHandle,
    fake_model: FakeMessagesAPI,
    team_server: ThreadedServer,
    isolated_env: IsolatedEnv,
    tmp_path: Path,
) -> None:
    router = Router(fake_model)
    root = git_project(tmp_path / "widgets")
    isolated_env.config_dir.mkdir(parents=True, exist_ok=True)
    (isolated_env.config_dir / "CLAUDE.md").write_text("User rule: answer in English.\n")
    client = await handle.client()
    listener = await handle.client()
    try:
        await _scenario(client, listener, router, root, team_server, isolated_env)
    finally:
        await client.close()
        await listener.close()


async def _scenario(
    client: AsyncClient,
    listener: AsyncClient,
    router: Router,
    root: Path,
    team_server: ThreadedServer,
    isolated_env: IsolatedEnv,
) -> None:
    cwd = str(root)
    api_file = str(root / "src" / "api" / "users.py")
    await listener.subscribe(
        ["memory/saved", "session/summary_updated", "team/secret_blocked", "worker/error"]
    )

    # -- 0. a fresh daemon already reports every feature --------------------------------------
    fresh = await client.status()
    for name in ("model", "auto_memory", "extraction", "session_memory", "team_sync"):
        assert fresh["features"][name]["enabled"] is True, (name, fresh["features"])
    assert fresh["model"]["usage"] == {}

    # -- 1. instruction files, in load order, with the auto memory index -----------------------
    plain = await client.get_context(cwd, session_id=SID)
    kinds = [(Path(f["path"]).name, f["type"], f["reason"]) for f in plain["files"]]
    assert kinds[:3] == [
        ("CLAUDE.md", "User", "session_start"),
        ("CLAUDE.md", "Project", "session_start"),
        ("CLAUDE.local.md", "Local", "session_start"),
    ]
    assert plain["files"][0]["path"] == str(isolated_env.config_dir / "CLAUDE.md")
    assert not any(name == "api.md" for name, _, _ in kinds)
    text = plain["claude_md"]
    assert text.index("User rule") < text.index("Project rule") < text.index("Local note")
    assert not any(f["type"] == "AutoMem" for f in plain["files"])  # no MEMORY.md yet
    memory_dir = Path(plain["memory_dir"])
    assert memory_dir.is_relative_to(isolated_env.config_dir / "projects")

    touched = await client.get_context(cwd, session_id=SID, touched_paths=[api_file])
    rule = [f for f in touched["files"] if Path(f["path"]).name == "api.md"]
    assert rule == [
        {
            "path": str(root / ".claude" / "rules" / "api.md"),
            "type": "Project",
            "parent": None,
            "reason": "path_glob",
            "globs": ["src/api/**"],
        }
    ]
    assert "API rule: every handler validates its input." in touched["claude_md"]

    # -- 2. a memory, its index line, recall with both selectors --------------------------------
    written = await client.memory_write(
        cwd,
        type="feedback",
        name="Tabs in Go",
        description="the user wants tabs, not spaces, in Go files",
        body="Indent Go with tabs.\n\n**Why:** gofmt.\n\n**How to apply:** run gofmt on save.",
    )
    feedback = Path(written["path"])
    assert written["created"] is True
    assert feedback.parent == memory_dir
    index = (memory_dir / "MEMORY.md").read_text()
    assert f"({feedback.name})" in index
    assert "Tabs in Go" in index
    context = await client.get_context(cwd, session_id=SID)
    automem = [f for f in context["files"] if f["type"] == "AutoMem"]
    assert [f["path"] for f in automem] == [str(memory_dir / "MEMORY.md")]
    assert context["files"][-1]["type"] == "AutoMem"  # after User, Project, Local
    assert context["claude_md"].index("Local note") < context["claude_md"].index("Tabs in Go")

    local = await client.call(
        "recall", {"cwd": cwd, "query": "tabs or spaces in Go files?", "selector": "local"}
    )
    assert local["selector"] == "local"
    assert [m["path"] for m in local["memories"]] == [str(feedback)]
    router.queues["recall"].append(json_reply({"selected": [feedback.name]}))
    picked = await client.recall(cwd, "how should I indent Go?", session_id=SID)
    assert picked["selector"] == "model"
    assert [m["path"] for m in picked["memories"]] == [str(feedback)]
    assert "Indent Go with tabs." in picked["memories"][0]["content"]

    # -- 3. extraction after a turn writes a memory, announced by memory/saved ------------------
    freeze = memory_dir / "project_release_freeze.md"
    router.queues["extraction"] += [
        tool_use_reply(
            [
                (
                    "Write",
                    {
                        "file_path": str(freeze),
                        "content": "---\nname: Release freeze\ndescription: no merges during the"
                        " freeze from March 5\ntype: project\n---\n\nFreeze starts March 5.\n",
                    },
                )
            ]
        ),
        text_reply("Saved project_release_freeze.md"),
    ]
    turn = [
        user("Heads up: merges freeze on March 5 for the mobile release."),
        assistant("Noted, no merges after March 5."),
    ]
    after = await client.after_turn(SID, cwd, turn)
    assert after["scheduled"]["extraction"] is True
    assert after["scheduled"]["session_memory"] is False
    saved = await next_event(listener, "memory/saved", path=str(freeze))
    assert saved == {"path": str(freeze), "project": cwd}
    assert "Freeze starts March 5." in freeze.read_text()
    assert f"({freeze.name})" in (memory_dir / "MEMORY.md").read_text()
    # A client that reacts to the notification sees the new memory in its context at once.
    context = await client.get_context(cwd, session_id=SID)
    assert "Release freeze" in context["claude_md"]
    found = await client.call(
        "recall", {"cwd": cwd, "query": "when is the merge freeze?", "selector": "local"}
    )
    assert found["memories"][0]["path"] == str(freeze)

    # -- 4. a long session: the summary is written, compact uses it -----------------------------
    router.queues["session"] += [edit_session_title, text_reply("notes updated")]
    long = [*turn, *conversation(12_000), assistant("The API is done.")]
    after = await client.after_turn(SID, cwd, long)
    assert after["tokens"] > 10_000
    assert after["scheduled"]["session_memory"] is True
    updated = await next_event(listener, "session/summary_updated")
    assert updated["session_id"] == SID
    compacted = await client.compact(SID, cwd, long)
    assert compacted["used_session_memory"] is True, compacted["reason"]
    messages = compacted["messages"]
    assert messages[0]["content"][0]["text"].startswith(BOUNDARY_TAG)
    assert "Ship the widgets API" in json.dumps(messages[1])
    assert len(messages) < len(long)
    assert_pairs_intact(messages[2:])
    assert messages[-1] == long[-1]

    # The session goes on from the compacted list; a turn with many tool calls makes it
    # longer than the transcript extraction saw before: extraction still gets the whole turn.
    turn = [user("From now on NEW-REQUEST: never mock the database in tests.")]
    for number in range(8):
        call = tool_call(file_path=f"/src/api/f{number}.py")
        turn += [call, tool_result(call, f"contents {number}")]
    turn.append(assistant("NEW-ANSWER: understood."))
    going_on = [*messages, *turn]
    assert len(going_on) > len(long)
    after = await client.after_turn(SID, cwd, going_on)
    assert after["scheduled"]["extraction"] is True
    await eventually(lambda: any("NEW-ANSWER" in body for body in router.seen["extraction"]))
    extraction = next(body for body in router.seen["extraction"] if "NEW-ANSWER" in body)
    assert "NEW-REQUEST" in extraction
    assert BOUNDARY_TAG not in extraction  # what came before was extracted already

    after_compact = await client.call("get_context", {"cwd": cwd, "session_id": SID})
    assert after_compact["cached"] is False  # compact dropped the cache
    assert any(Path(f["path"]).name == "api.md" for f in after_compact["files"])
    assert "API rule: every handler validates its input." in after_compact["claude_md"]

    # -- 5. team memory: pushed to the real server; a secret never leaves ----------------------
    team_written = await client.memory_write(
        cwd,
        type="reference",
        name="Incident runbook",
        description="where the on-call runbook lives",
        body="The runbook is the wiki page Ops/On-call.",
        team=True,
    )
    team_file = Path(team_written["path"])
    team_dir = memory_dir / "team"
    assert team_file.parent == team_dir
    pushed = await client.team_push(cwd)
    assert pushed["ok"] is True, pushed
    assert pushed["repo"] == REPO
    assert team_file.name in pushed["pushed"]
    token = team_server.token(REPO, name="reader")
    server_view = httpx.get(
        f"{team_server.url}{TEAM_MEMORY_PATH}",
        params={"repo": REPO},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert server_view.status_code == 200
    entries = server_view.json()["entries"]
    assert "Ops/On-call" in entries[team_file.name]

    secret_file = team_dir / "reference_deploy_credentials.md"
    secret_file.write_text(fake_aws_secret())
    pushed = await client.team_push(cwd)
    blocked = await next_event(listener, "team/secret_blocked")
    assert blocked["path"] == str(secret_file)
    assert blocked["rule"].startswith("aws-")
    assert secret_file.name not in pushed["pushed"]
    assert any(s.get("rule", "").startswith("aws-") for s in pushed["skipped"]), pushed
    assert "aws_secret_access_key" not in json.dumps(pushed)
    server_view = httpx.get(
        f"{team_server.url}{TEAM_MEMORY_PATH}",
        params={"repo": REPO},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert secret_file.name not in server_view.json()["entries"]

    context = await client.get_context(cwd, session_id=SID)
    assert [f["type"] for f in context["files"]][-2:] == ["AutoMem", "TeamMem"]
    assert context["files"][-1]["path"] == str(team_dir / "MEMORY.md")
    assert "Incident runbook" in context["claude_md"]
    found = await client.call(
        "recall", {"cwd": cwd, "query": "where is the on-call runbook?", "selector": "local"}
    )
    assert found["memories"][0]["path"] == str(team_file)
    assert found["memories"][0]["team"] is True

    # -- 5b. dream consolidates on demand; its edit is announced after the index is in step --
    router.queues["dream"] += [
        tool_use_reply(
            [
                ("Read", {"file_path": str(feedback)}),  # a write needs a fresh read first
                (
                    "Edit",
                    {
                        "file_path": str(feedback),
                        "old_string": "Indent Go with tabs.",
                        "new_string": "Indent Go with tabs, always.",
                    },
                ),
            ]
        ),
        text_reply("Tightened one memory."),
    ]
    dreamt = await client.memory_dream(cwd)
    assert dreamt["edited"] == [str(feedback)], dreamt
    assert await next_event(listener, "memory/saved", path=str(feedback))
    assert "tabs, always" in feedback.read_text()

    # -- 6. status: features and model usage per feature ---------------------------------------
    status = await client.call("status")
    features = status["features"]
    for name in ("model", "instruction_files", "auto_memory", "extraction", "session_memory"):
        assert features[name]["enabled"] is True, (name, features[name])
    assert features["team_sync"]["enabled"] is True
    assert features["team_sync"]["folders"] == 1
    usage = status["model"]["usage"]
    for feature in ("extraction", "recall", "session_memory", "dream"):
        assert usage[feature]["calls"] >= 1, (feature, usage)
        assert usage[feature]["input_tokens"] >= 100 * usage[feature]["calls"]
        assert usage[feature]["output_tokens"] >= 20 * usage[feature]["calls"]
    assert status["worker_errors"] == {}
    assert len(router.seen["session"]) == 2
    assert len(router.seen["recall"]) == 1

    errors = []
    while not listener.notifications.empty():
        note = listener.notifications.get_nowait()
        if note["method"] == "worker/error":
            errors.append(note["params"])
    assert errors == []
