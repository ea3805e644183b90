"""Auto dream: when it runs (the idle trigger against an on-demand run), and its prompt bound."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from memoryd.automem.dream import RETRY_AFTER_S, Dream, dream_state_path, idle_seconds
from memoryd_client import RpcError
from tests.background.conftest import Script, Workspace, refusal, transcript
from tests.conftest import IsolatedEnv
from tests.fakes.full_disk import SmallDisks
from tests.fakes.messages_api import slow, text_reply


async def _memories(ws: Workspace, count: int) -> None:
    for i in range(count):
        await ws.am.write_memory(
            ws.project, type="user", name=f"Memory {i}", description=f"memory {i}", body="b"
        )


async def _armed(ws: Workspace, isolated_env: IsolatedEnv, idle_s: float) -> Dream:
    """Auto dream on in user settings, its idle wait `idle_s`, armed by a turn."""
    isolated_env.config_dir.mkdir(parents=True, exist_ok=True)
    (isolated_env.config_dir / "settings.json").write_text('{"autoDreamEnabled": true}')
    dream = ws.handle.daemon.services.dream
    dream.idle_s = idle_s
    await ws.handle.call(
        "after_turn", session_id="s1", cwd=str(ws.cwd), messages=transcript(("hi", "hello"))
    )
    assert dream.feature_status()["auto_dream"]["armed"] == 1
    return dream


async def test_an_idle_dream_due_during_an_on_demand_one_does_not_run_again(
    ws: Workspace, script: Script, isolated_env: IsolatedEnv
) -> None:
    # Found by the third hunt: the idle timer found the dream due while `memctl dream` ran,
    # waited for the run lock, and consolidated the dir a second time right after it.
    await _memories(ws, 3)
    dream = await _armed(ws, isolated_env, 0.2)
    script.add("dream", slow(0.8, text_reply("merged nothing")))
    result = await ws.handle.call("memory.dream", cwd=str(ws.cwd))
    assert result["trigger"] == "on_demand"
    await asyncio.sleep(0.6)  # the idle timer fired during the run
    assert len(script.seen["dream"]) == 1
    assert (dream.counts["on_demand_runs"], dream.counts["idle_runs"]) == (1, 0)


async def test_an_idle_dream_still_runs_when_due(
    ws: Workspace, script: Script, isolated_env: IsolatedEnv
) -> None:
    await _memories(ws, 2)
    dream = await _armed(ws, isolated_env, 0.05)
    for _ in range(200):
        if dream.counts["idle_runs"]:
            break
        await asyncio.sleep(0.02)
    assert dream.counts["idle_runs"] == 1
    assert dream.last is not None
    assert dream.last["trigger"] == "idle"


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e400"])
def test_an_idle_wait_that_is_no_finite_number_is_ignored(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    # "nan" parsed as a float: the idle timer slept forever (no idle dream, silently) and
    # status.features.auto_dream.idle_s came out null.
    monkeypatch.setenv("MEMORYD_DREAM_IDLE_S", value)
    assert idle_seconds() == 600.0


async def test_the_dream_prompt_is_bounded_in_characters_too(ws: Workspace, script: Script) -> None:
    # Found by the third hunt: 1,000 memories were listed whatever their length, and with
    # 1,000-character descriptions (memory.write takes them) the prompt was ~1,000,000
    # characters, past the model's context: every dream of the dir failed with HTTP 400.
    ws.memory_dir.mkdir(parents=True, exist_ok=True)
    words = ("deploy staging cluster kubernetes namespace " * 30)[:990]
    for i in range(400):
        (ws.memory_dir / f"m{i:03}.md").write_text(
            f"---\nname: memory {i}\ndescription: {i} {words}\ntype: project\n---\n\nbody\n"
        )
    result = await ws.handle.call("memory.dream", cwd=str(ws.cwd))
    assert result["memories"] == 400
    prompt = script.seen["dream"][0]["messages"][0]["content"][0]["text"]
    assert 200_000 < len(prompt) < 205_000  # the manifest's 200,000 and the instructions
    listed = prompt.count("[project] ")
    assert 150 < listed < 400
    assert f"{400 - listed} older memories are not listed; Grep or Glob" in prompt


@pytest.mark.parametrize("wait", [True, False])
async def test_a_dream_with_auto_memory_off_is_refused_up_front(
    ws: Workspace, script: Script, isolated_env: IsolatedEnv, wait: bool
) -> None:
    # Found by the third hunt: `memctl dream --no-wait` answered "dream started" and the dream
    # failed in the background (only worker_errors told), where waiting gave a clear -32003.
    isolated_env.config_dir.mkdir(parents=True, exist_ok=True)
    (isolated_env.config_dir / "settings.json").write_text('{"autoMemoryEnabled": false}')
    with pytest.raises(RpcError) as info:
        await ws.handle.call("memory.dream", cwd=str(ws.cwd), wait=wait)
    assert info.value.code == -32003
    assert "auto memory is off" in info.value.message
    await asyncio.sleep(0.1)  # a background run would have failed by now
    assert ws.handle.daemon.worker_errors.get("dream", 0) == 0
    assert script.seen["dream"] == []


async def test_status_tells_a_dream_in_progress(ws: Workspace, script: Script) -> None:
    # Found by the third hunt: during a dream status said armed 0 and the last run before it;
    # nothing told that one was running.
    await _memories(ws, 2)
    script.add("dream", slow(0.5, text_reply("tidy")))
    run = asyncio.create_task(ws.handle.call("memory.dream", cwd=str(ws.cwd)))
    while not script.seen["dream"]:
        await asyncio.sleep(0.01)
    status = (await ws.handle.call("status"))["features"]["auto_dream"]
    assert (status["running"], status["armed"], status["last_run"]) == (1, 0, None)
    await run
    status = (await ws.handle.call("status"))["features"]["auto_dream"]
    assert status["running"] == 0
    assert status["last_run"]["summary"] == "tidy"


async def _settled(dream: Dream) -> None:
    """Until a dream ran and none is armed, waiting for the run lock or running."""
    for _ in range(500):
        await dream.extraction.wait_idle()  # the run lock an idle dream may wait for
        if dream.counts["runs"] and not dream._timers and not dream._running:
            await asyncio.sleep(0.1)  # an idle run that waits for the lock: not in either
            if not dream._timers and not dream._running:
                return
        await asyncio.sleep(0.02)
    raise AssertionError("the dream did not settle")


async def test_a_refused_idle_dream_is_not_tried_again_at_every_idle_wait(
    ws: Workspace, script: Script, isolated_env: IsolatedEnv
) -> None:
    # Found by the third hunt: a refused (or failed) dream is not the day's run, and the
    # next idle wait ran it again, and the next: a full prompt after every burst of work.
    await _memories(ws, 2)
    script.add("dream", refusal(), refusal())
    dream = await _armed(ws, isolated_env, 0.05)
    await _settled(dream)
    assert len(script.seen["dream"]) == 1
    for _ in range(2):  # two more bursts of work, each followed by an idle wait
        await ws.handle.call(
            "after_turn", session_id="s1", cwd=str(ws.cwd), messages=transcript(("hi", "hey"))
        )
        await asyncio.sleep(0.2)
        await _settled(dream)
    assert len(script.seen["dream"]) == 1
    assert dream.last is not None
    assert dream.last["stop_reason"] == "error"
    now = time.time()
    assert not dream.due(ws.project, now + RETRY_AFTER_S - 60)
    assert dream.due(ws.project, now + RETRY_AFTER_S + 60)  # then tried again


async def test_a_dream_whose_last_run_cannot_be_saved_still_answers(
    ws: Workspace, script: Script, small_disks: SmallDisks
) -> None:
    # Found by the third hunt: with the state dir's disk full, a dream that had run answered
    # -32603 (ENOSPC saving its last-run time), what it did untold.
    await _memories(ws, 2)
    small_disks.mount(dream_state_path().parent, kib=64)
    small_disks.fill(dream_state_path().parent)
    script.add("dream", text_reply("merged nothing, all tidy"))
    result = await ws.handle.call("memory.dream", cwd=str(ws.cwd))
    assert (result["stop_reason"], result["summary"]) == ("end_turn", "merged nothing, all tidy")
    assert not ws.handle.daemon.services.dream.due(ws.project)  # the day's, in this daemon


async def test_a_refused_dream_is_not_tried_again_by_the_next_daemon_either(
    ws: Workspace, script: Script
) -> None:
    # Kept in memory only, the back-off went with the daemon: a restart (`memctl restart`, a
    # crash, an --idle-timeout exit and the next start) ran the refused dream again at its
    # first idle wait.
    await _memories(ws, 2)
    script.add("dream", refusal())
    assert (await ws.handle.call("memory.dream", cwd=str(ws.cwd)))["stop_reason"] == "error"
    dream = ws.handle.daemon.services.dream
    after_restart = Dream(dream.host, dream.automem, dream.extraction)  # reads dream.json
    now = time.time()
    assert not after_restart.due(ws.project, now)
    assert after_restart.due(ws.project, now + RETRY_AFTER_S + 60)
    # What an older daemon reads: a failed run is no last run.
    assert json.loads(dream_state_path().read_text())["last_run"] == {}
    script.add("dream", text_reply("tidy"))
    assert (await ws.handle.call("memory.dream", cwd=str(ws.cwd)))["stop_reason"] == "end_turn"
    assert not Dream(dream.host, dream.automem, dream.extraction).due(ws.project)
    assert json.loads(dream_state_path().read_text())["failed_at"] == {}
