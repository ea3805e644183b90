"""Auto dream: on-demand and idle consolidation, history kept, last run persisted."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pytest

from memoryd.automem.dream import dream_state_path, idle_seconds
from memoryd_client import RpcError
from tests.background.conftest import Script, Workspace, transcript, workspace_for
from tests.conftest import DaemonHandle, IsolatedEnv
from tests.fakes.messages_api import slow, text_reply, tool_use_reply


async def _three_memories(ws: Workspace) -> tuple[Path, Path, Path]:
    paths = []
    for type_, name, body in (
        ("feedback", "Use pnpm", "Use pnpm.\n**Why:** lockfile.\n**How to apply:** always."),
        (
            "feedback",
            "Package manager pnpm",
            "Prefer pnpm over npm.\n**Why:** x\n**How to apply:** y",
        ),
        (
            "project",
            "Deadline March",
            "Ship by March 1.\n**Why:** launch.\n**How to apply:** plan.",
        ),
    ):
        result = await ws.am.write_memory(
            ws.project, type=type_, name=name, description=name.lower(), body=body
        )
        paths.append(result.path)
    return paths[0], paths[1], paths[2]


async def test_on_demand_dream_merges_retires_and_keeps_history(
    ws: Workspace, script: Script
) -> None:
    keep, duplicate, deadline = await _three_memories(ws)
    assert duplicate.exists()
    script.add(
        "dream",
        tool_use_reply(
            [("Read", {"file_path": str(keep)}), ("Read", {"file_path": str(duplicate)})]
        ),
        tool_use_reply(
            [
                (
                    "Edit",
                    {
                        "file_path": str(keep),
                        "old_string": "Use pnpm.",
                        "new_string": "Use pnpm, never npm.",
                    },
                ),
                ("RetireMemory", {"file_path": str(duplicate), "reason": "duplicate of use pnpm"}),
                ("RetireMemory", {"file_path": "/etc/passwd", "reason": "escape"}),
            ]
        ),
        text_reply("Merged the two pnpm memories."),
    )
    result = await ws.handle.call("memory.dream", cwd=str(ws.cwd))
    assert result["stop_reason"] == "end_turn"
    assert result["retired"] == [str(duplicate)]
    assert result["edited"] == [str(keep)]
    assert len(result["denied"]) == 1
    assert not duplicate.exists()
    assert "never npm" in keep.read_text()
    assert deadline.exists()
    index = (ws.memory_dir / "MEMORY.md").read_text()
    assert duplicate.name not in index
    assert keep.name in index
    # Every change is in history: the edited file's old text and the retired file.
    _, kept_versions = ws.am.versions(ws.project, str(keep))
    _, retired_versions = ws.am.versions(ws.project, str(duplicate))
    assert kept_versions
    assert retired_versions
    (block,) = script.seen["dream"][0]["messages"][0]["content"]
    # Sent again with each of up to 8 turns: a cache breakpoint on it.
    assert block["cache_control"] == {"type": "ephemeral"}
    assert script.seen["dream"][1]["messages"][0]["content"] == [block]
    prompt = block["text"]
    assert duplicate.name in prompt  # the manifest
    assert "RetireMemory" in [t["name"] for t in script.seen["dream"][0]["tools"]]
    state = json.loads(dream_state_path().read_text())
    assert str(ws.memory_dir) in state["last_run"]  # per memory dir


async def test_a_memory_saved_while_the_dream_thinks_is_not_reverted_or_retired(
    ws: Workspace, script: Script
) -> None:
    keep, duplicate, _ = await _three_memories(ws)
    stale = keep.read_text()
    script.add(
        "dream",
        tool_use_reply(
            [("Read", {"file_path": str(keep)}), ("Read", {"file_path": str(duplicate)})]
        ),
        slow(
            1.0,
            tool_use_reply(
                [
                    ("Write", {"file_path": str(keep), "content": stale.replace(".", "!", 1)}),
                    ("RetireMemory", {"file_path": str(duplicate), "reason": "duplicate"}),
                ]
            ),
        ),
        text_reply("done"),
    )
    dream = asyncio.create_task(ws.handle.call("memory.dream", cwd=str(ws.cwd)))
    while len(script.seen["dream"]) < 2:  # it has read both; its model is thinking
        await asyncio.sleep(0.01)
    for name, body in (("Use pnpm", "Use pnpm 9."), ("Package manager pnpm", "pnpm 9, not 8.")):
        written = await ws.handle.call(
            "memory.write", cwd=str(ws.cwd), type="feedback", name=name, description="d", body=body
        )
        assert written["created"] is False
    result = await dream
    assert "Use pnpm 9." in keep.read_text()
    assert duplicate.exists()
    assert "pnpm 9, not 8." in duplicate.read_text()
    assert (result["edited"], result["retired"]) == ([], [])
    results = script.seen["dream"][2]["messages"][-1]["content"]
    assert [r.get("is_error") for r in results] == [True, True]
    assert all("changed since you read it" in r["content"] for r in results)


async def test_the_dream_prompt_lists_the_newest_memories_only(
    ws: Workspace, script: Script, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every memory was listed: 10,000 are ~400,000 tokens, and each dream of such a dir
    # failed with HTTP 400 (prompt too long).
    from memoryd.automem import dream

    monkeypatch.setattr(dream, "MANIFEST_LIMIT", 2, raising=False)
    keep, duplicate, deadline = await _three_memories(ws)
    for age, path in enumerate((deadline, duplicate, keep)):
        os.utime(path, (1_700_000_000 - age * 86_400,) * 2)
    await ws.handle.call("memory.reconcile", cwd=str(ws.cwd))
    result = await ws.handle.call("memory.dream", cwd=str(ws.cwd))
    assert result["memories"] == 3
    prompt = script.seen["dream"][0]["messages"][0]["content"][0]["text"]
    assert deadline.name in prompt
    assert duplicate.name in prompt
    assert keep.name not in prompt  # the oldest
    assert f"1 older memories are not listed; Grep or Glob `{ws.memory_dir}`" in prompt


async def test_dream_with_one_memory_has_nothing_to_do(ws: Workspace, script: Script) -> None:
    await ws.am.write_memory(ws.project, type="user", name="Role", description="r", body="b")
    result = await ws.handle.call("memory.dream", cwd=str(ws.cwd))
    assert result["stop_reason"] == "nothing_to_do"
    assert script.seen["dream"] == []


async def test_dream_without_a_model_is_unavailable(daemon: DaemonHandle, tmp_path: Path) -> None:
    ws = workspace_for(daemon, tmp_path)
    with pytest.raises(RpcError) as info:
        await daemon.call("memory.dream", cwd=str(ws.cwd))
    assert info.value.code == -32003


async def test_idle_dream_runs_once_a_day_when_enabled(
    ws: Workspace, script: Script, isolated_env: IsolatedEnv
) -> None:
    await _three_memories(ws)
    dream = ws.handle.daemon.services.dream
    dream.idle_s = 0.05
    convo = transcript(("hello", "hi"))
    await ws.handle.call("after_turn", session_id="s1", cwd=str(ws.cwd), messages=convo)
    assert dream.feature_status()["auto_dream"]["armed"] == 0  # off by default
    isolated_env.config_dir.mkdir(parents=True, exist_ok=True)
    (isolated_env.config_dir / "settings.json").write_text('{"autoDreamEnabled": true}')
    await ws.handle.call("after_turn", session_id="s1", cwd=str(ws.cwd), messages=convo)
    assert dream.feature_status()["auto_dream"]["armed"] == 1
    # Activity re-arms the timer instead of running.
    await ws.handle.call("after_turn", session_id="s1", cwd=str(ws.cwd), messages=convo)
    for _ in range(200):
        if dream.counts["idle_runs"]:
            break
        await asyncio.sleep(0.02)
    assert dream.counts["idle_runs"] == 1
    assert len(script.seen["dream"]) == 1
    # Ran today: the next turns do not arm it again.
    await ws.handle.call("after_turn", session_id="s1", cwd=str(ws.cwd), messages=convo)
    assert dream.feature_status()["auto_dream"]["armed"] == 0


async def test_tool_calls_of_a_long_turn_keep_the_idle_dream_off(
    ws: Workspace, script: Script, isolated_env: IsolatedEnv
) -> None:
    # Found by the SPEC audit: only after_turn re-armed the idle timer, so a turn working
    # longer than the idle wait got a consolidation while the agent was busy.
    await _three_memories(ws)
    dream = ws.handle.daemon.services.dream
    dream.idle_s = 0.3
    isolated_env.config_dir.mkdir(parents=True, exist_ok=True)
    (isolated_env.config_dir / "settings.json").write_text('{"autoDreamEnabled": true}')
    convo = transcript(("refactor the parser", "on it"))
    await ws.handle.call("after_turn", session_id="s1", cwd=str(ws.cwd), messages=convo)
    for _ in range(10):  # 1 s of tool calls, 0.1 s apart: never 0.3 s idle
        await ws.handle.call(
            "after_tool", session_id="s1", cwd=str(ws.cwd), read_paths=[str(ws.cwd / "a.py")]
        )
        await asyncio.sleep(0.1)
    assert dream.counts["idle_runs"] == 0
    assert script.seen["dream"] == []
    for _ in range(100):  # then idle: it runs
        if dream.counts["idle_runs"]:
            break
        await asyncio.sleep(0.02)
    assert dream.counts["idle_runs"] == 1


def test_idle_seconds_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert idle_seconds() == 600.0
    monkeypatch.setenv("MEMORYD_DREAM_IDLE_S", "30")
    assert idle_seconds() == 30.0
    monkeypatch.setenv("MEMORYD_DREAM_IDLE_S", "soon")
    assert idle_seconds() == 600.0


async def test_memctl_dream_reports_the_run(ws: Workspace, script: Script) -> None:
    await _three_memories(ws)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memctl",
        "--socket",
        str(ws.handle.socket_path),
        "dream",
        "--cwd",
        str(ws.cwd),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert out.decode().startswith(f"dream of {ws.memory_dir}: end_turn")
    assert "already tidy" in out.decode()


async def test_memctl_dream_without_a_model_fails_clearly(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    ws = workspace_for(daemon, tmp_path)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memctl",
        "--socket",
        str(daemon.socket_path),
        "dream",
        "--cwd",
        str(ws.cwd),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate()
    assert proc.returncode == 1
    assert "-32003" in err.decode()
    assert "ANTHROPIC_API_KEY" in err.decode()


@pytest.mark.parametrize(
    ("content", "event"),
    [
        ("{not json", "dream state unreadable; starting afresh"),
        # An entry that is no time is dropped alone (test_damaged_state_files.py).
        ('{"last_run": [1, 2]}', "dream state: last runs that are no time ignored"),
        ('{"last_run": {"/p": "x"}}', "dream state: last runs that are no time ignored"),
    ],
)
async def test_unreadable_dream_state_is_logged_not_silent(
    daemon: DaemonHandle, content: str, event: str
) -> None:
    from structlog.testing import capture_logs

    dream_state_path().parent.mkdir(parents=True, exist_ok=True)
    dream_state_path().write_text(content)
    with capture_logs() as logs:
        assert daemon.daemon.services.dream.last_runs() == {}
    assert [e["event"] for e in logs] == [event]
    assert logs[0]["path"] == str(dream_state_path())


async def test_missing_dream_state_is_not_a_warning(daemon: DaemonHandle) -> None:
    from structlog.testing import capture_logs

    with capture_logs() as logs:
        assert daemon.daemon.services.dream.last_runs() == {}
    assert logs == []


async def test_a_last_run_recorded_ahead_of_the_clock_does_not_hold_the_dream_off(
    ws: Workspace,
) -> None:
    # Found by a bug hunt: a clock that once ran a year ahead (a restored VM) left a last run
    # in the future, and the project's idle dream was not due until the clock passed it.
    dream = ws.handle.daemon.services.dream
    now = time.time()
    dream_state_path().parent.mkdir(parents=True, exist_ok=True)
    dream_state_path().write_text(
        json.dumps({"last_run": {str(ws.project.root): now + 365 * 86400}})
    )
    dream._last_runs = None  # read the file again
    assert dream.due(ws.project, now)
    dream_state_path().write_text(json.dumps({"last_run": {str(ws.project.root): now - 60}}))
    dream._last_runs = None
    assert not dream.due(ws.project, now)  # a run a minute ago: not due for a day


async def test_a_read_only_memory_the_dream_retires_is_kept_and_its_agent_told_why(
    ws: Workspace, script: Script
) -> None:
    # Found in review: a memory its owner made read-only (chmod 444) is left as it is by
    # memory.delete, and the dream's Write of it is a tool error the agent hears; its
    # RetireMemory was a denial instead, a worker/error each run telling the user to undo
    # the protection (chmod u+w) and counted as a policy breach.
    _keep, duplicate, _ = await _three_memories(ws)
    duplicate.chmod(0o444)
    script.add(
        "dream",
        tool_use_reply([("Read", {"file_path": str(duplicate)})]),
        tool_use_reply([("RetireMemory", {"file_path": str(duplicate), "reason": "duplicate"})]),
        text_reply("done"),
    )
    result = await ws.handle.call("memory.dream", cwd=str(ws.cwd))
    assert duplicate.exists()
    assert (result["retired"], result["denied"]) == ([], [])
    (answer,) = script.seen["dream"][2]["messages"][-1]["content"]
    assert answer["is_error"] is True
    assert "read-only (mode 0444): its owner protected it" in str(answer["content"])
    assert ws.handle.daemon.worker_errors["dream"] == 0
