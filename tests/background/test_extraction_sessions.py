"""Extraction with several sessions of one memory dir, and with a client that compacts on
its own (Claude Code), against the scripted fake Messages API."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from memoryd.automem.cursors import cursors_path
from memoryd.automem.extraction import cursor_after, session_place
from memoryd.automem.extraction_prompts import NOTHING_MARKER
from tests.background.conftest import Workspace, transcript, workspace_for
from tests.conftest import DaemonHandle, IsolatedEnv
from tests.fakes.messages_api import FakeMessagesAPI, slow, text_reply


async def _after_turn(ws: Workspace, session_id: str, messages: list[dict[str, Any]]) -> Any:
    return await ws.handle.call(
        "after_turn", session_id=session_id, cwd=str(ws.cwd), messages=messages
    )


def _offered(fake: FakeMessagesAPI, marker: str) -> bool:
    return any(marker in json.dumps(r.json) for r in fake.message_requests())


async def test_a_turn_waiting_behind_a_run_is_not_replaced_by_another_sessions_turn(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    fake_model.enqueue(slow(0.5, text_reply(NOTHING_MARKER)))
    fake_model.handler = lambda _req: text_reply(NOTHING_MARKER)
    first = transcript(("first thing in A", "ok"))
    assert (await _after_turn(ws, "A", first))["scheduled"]["extraction"] is True
    while not fake_model.message_requests():
        await asyncio.sleep(0.01)
    # While A's first run waits for the model: A's next turn, then B's (same memory dir).
    last_of_a = [*first, *transcript(("our on-call rota is PagerDuty KIWI-ROTA", "noted"))]
    await _after_turn(ws, "A", last_of_a)
    await _after_turn(ws, "B", transcript(("an unrelated question in B", "ok")))
    await ws.handle.daemon.services.extraction.wait_idle()
    # Before, B's turn took A's place as the dir's one pending turn: A's never ran.
    assert _offered(fake_model, "KIWI-ROTA")
    assert _offered(fake_model, "an unrelated question in B")
    status = (await ws.handle.call("status"))["features"]["extraction"]
    assert status["runs"] == 3
    assert status["coalesced"] == 0


def _filler(i: int) -> str:
    return f"step {i}: " + "lorem ipsum dolor sit amet " * 150


def _long_session(turns: int) -> list[dict[str, Any]]:
    return transcript(*((f"please do step {i}", _filler(i)) for i in range(turns)))


async def test_after_the_clients_own_compaction_its_first_turn_is_offered_whole(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    """Claude Code's PreCompact hook calls `compact`, then Claude Code compacts on its own:
    its next transcript is not memoryd's compacted list."""
    fake_model.handler = lambda _req: text_reply(NOTHING_MARKER)
    session = "cc-1"
    before = _long_session(12)  # ~12k tokens
    await _after_turn(ws, session, before)
    await ws.handle.daemon.services.extraction.wait_idle()
    sm = ws.handle.daemon.services.session_memory
    summary = sm.summary_path(ws.project, session)
    await sm.wait_idle(sm.session(ws.project, session))
    summary.parent.mkdir(parents=True, exist_ok=True)
    summary.write_text("# Session Title\nSteps of the migration\n")
    result = await ws.handle.call("compact", session_id=session, cwd=str(ws.cwd), messages=before)
    assert result["used_session_memory"] is True
    # Claude Code's list: its own summary with the next prompt (one user message), then a
    # long turn: more messages than memoryd's compacted list had.
    after: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "This session is being continued. Summary: steps."},
                {"type": "text", "text": "From now on never mock the database: ZEBRA-RULE"},
            ],
        }
    ]
    for k in range(len(result["messages"]) + 5):
        after.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{k}", "name": "Read", "input": {}}],
            }
        )
        after.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{k}"}]})
    after.append({"role": "assistant", "content": [{"type": "text", "text": "Understood."}]})
    await _after_turn(ws, session, after)
    await ws.handle.daemon.services.extraction.wait_idle()
    last = fake_model.message_requests()[-1].json
    # Before, the run started at the count memoryd's compaction left: the prompt was skipped.
    assert "ZEBRA-RULE" in json.dumps(last)


def test_new_messages_start_finds_where_the_offered_part_ends() -> None:
    from memoryd.automem.extraction import Cursor, cursor_after, new_messages_start

    convo = _long_session(6)
    offered = cursor_after(convo[:8])
    assert new_messages_start(convo, offered) == 8
    # Only the newest messages sent (the hook's size cap): the same messages, other indexes.
    assert new_messages_start(convo[4:], offered) == 4
    # A list without the offered messages (compacted by the client) is new from its start.
    assert new_messages_start(transcript(("other", "list"), ("and", "more")), offered) == 0
    # After `compact` dropped every offered message, the count holds for memoryd's list only.
    dropped = Cursor(2, None)
    boundary = {
        "role": "user",
        "content": [{"type": "text", "text": "[memoryd:compact_boundary] x"}],
    }
    ours = [boundary, {"role": "user", "content": "summary"}, *convo[-2:]]
    assert new_messages_start(ours, dropped) == 2
    assert new_messages_start(convo, dropped) == 0
    # A reply whose later lines were merged into its message keeps its mark.
    grown = [
        *convo[:7],
        {**convo[7], "content": [*convo[7]["content"], {"type": "text", "text": "more"}]},
    ]
    assert new_messages_start([*grown, *convo[8:]], offered) == 8


def test_a_short_reply_seen_again_after_a_compaction_skips_nothing() -> None:
    # Found by a review: the mark was the last offered message alone, and "Done." is in
    # every other reply; after the client's own compaction the offered part was found at a
    # later "Done.", and the prompt between ("deploys need the VPN") was never offered.
    from memoryd.automem.extraction import cursor_after, new_messages_start

    def user(text: str) -> dict[str, Any]:
        return {"role": "user", "content": text}

    def done() -> dict[str, Any]:
        return {"role": "assistant", "content": [{"type": "text", "text": "Done."}]}

    offered = cursor_after([user("fix the build"), done(), user("x"), done()])
    compacted = [
        user("<summary>"),
        done(),
        user("Remember: deploys need the VPN"),
        done(),
        user("and never push on Fridays"),
        done(),
    ]
    start = new_messages_start(compacted, offered)
    assert start <= 2  # the VPN prompt is offered
    # The same list again: the count and the last messages agree.
    whole = [user("fix the build"), done(), user("x"), done(), user("next"), done()]
    assert new_messages_start(whole, offered) == 4


async def test_a_turn_the_main_agent_saved_folds_in_the_sessions_waiting_turn(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    """The session's earlier turn, queued behind a run, is folded into the skipped turn:
    left queued, it ran after the cursor had moved past the skipped turn, was offered the
    whole conversation again, and moved the cursor back before the skipped turn."""
    fake_model.enqueue(slow(0.5, text_reply(NOTHING_MARKER)))
    fake_model.handler = lambda _req: text_reply(NOTHING_MARKER)
    first = transcript(("FIRST-PROMPT hello", "hi"))
    await _after_turn(ws, "A", first)
    while not fake_model.message_requests():
        await asyncio.sleep(0.01)
    second = [*first, *transcript(("SECOND-PROMPT what now", "let us see"))]
    assert (await _after_turn(ws, "A", second))["scheduled"]["extraction"] is True
    target = str(ws.memory_dir / "user_tabs.md")
    third = [
        *second,
        {"role": "user", "content": "THIRD-PROMPT remember that I like tabs"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "tu1",
                    "name": "Write",
                    "input": {"file_path": target, "content": "tabs"},
                }
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "ok"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Saved."}]},
    ]
    assert (await _after_turn(ws, "A", third))["scheduled"]["extraction"] is False
    await ws.handle.daemon.services.extraction.wait_idle()
    assert len(fake_model.message_requests()) == 1  # the waiting turn did not run
    fourth = [*third, *transcript(("FOURTH-PROMPT next thing", "done"))]
    await _after_turn(ws, "A", fourth)
    await ws.handle.daemon.services.extraction.wait_idle()
    requests = fake_model.message_requests()
    assert len(requests) == 2
    last = json.dumps(requests[-1].json)
    assert "FOURTH-PROMPT" in last
    assert "THIRD-PROMPT" not in last  # the main agent's own save is not extracted again
    assert "FIRST-PROMPT" not in last
    status = (await ws.handle.call("status"))["features"]["extraction"]
    assert status["skipped_main_agent"] == 1
    assert status["coalesced"] == 1


async def test_a_turn_with_no_new_message_is_not_extracted_again(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    """The same transcript again (a client's retry, a Stop hook fired twice) has nothing to
    offer: before, it was offered whole, every turn already looked at extracted again."""
    fake_model.handler = lambda _req: text_reply(NOTHING_MARKER)
    convo = transcript(("FIRST-PROMPT I am a data engineer", "ok"))
    await _after_turn(ws, "A", convo)
    await ws.handle.daemon.services.extraction.wait_idle()
    convo = [*convo, *transcript(("SECOND-PROMPT use polars", "sure"))]
    await _after_turn(ws, "A", convo)
    await ws.handle.daemon.services.extraction.wait_idle()
    assert len(fake_model.message_requests()) == 2
    await _after_turn(ws, "A", convo)
    await ws.handle.daemon.services.extraction.wait_idle()
    assert len(fake_model.message_requests()) == 2
    convo = [*convo, *transcript(("THIRD-PROMPT and now", "fine"))]
    await _after_turn(ws, "A", convo)
    await ws.handle.daemon.services.extraction.wait_idle()
    requests = fake_model.message_requests()
    assert len(requests) == 3
    assert "THIRD-PROMPT" in json.dumps(requests[-1].json)
    assert "FIRST-PROMPT" not in json.dumps(requests[-1].json)


async def test_a_newest_message_over_the_render_budget_is_shown_cut(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    """Without the main prefix, the conversation is rendered as text within 60,000
    characters; a newest message longer than that left the agent shown no conversation."""
    fake_model.handler = lambda _req: text_reply(NOTHING_MARKER)
    log = "\n".join(f"2026-12-04 12:00:{i % 60:02d} worker[{i}] ok" for i in range(2_500))
    convo = [
        *transcript(("hello", "hi")),
        {"role": "user", "content": f"Here is the CI log:\n{log}\n\nREMEMBER-ME: run tests -x"},
        {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]},
    ]
    await _after_turn(ws, "A", convo)
    await ws.handle.daemon.services.extraction.wait_idle()
    # The extraction's request (the session notes' update is shown the messages themselves).
    (request,) = [
        r
        for r in fake_model.message_requests()
        if "background memory extraction" in json.dumps(r.json)
    ]
    text = json.dumps(request.json)
    assert "REMEMBER-ME" in text
    assert "Here is the CI log" in text
    # The one prompt is sent again with each turn of the run: it carries a cache breakpoint.
    (block,) = request.json["messages"][0]["content"]
    assert block["cache_control"] == {"type": "ephemeral"}


async def test_turns_had_while_auto_memory_was_off_are_never_offered(
    ws: Workspace, fake_model: FakeMessagesAPI, isolated_env: IsolatedEnv
) -> None:
    """The user turns auto memory off not to have a part of the session remembered: before,
    the first extraction once it was on again was offered every message since the last one
    made while it was on, that part included."""
    fake_model.handler = lambda _req: text_reply(NOTHING_MARKER)
    settings = isolated_env.config_dir / "settings.json"
    isolated_env.config_dir.mkdir(parents=True, exist_ok=True)
    settings.write_text('{"autoMemoryEnabled": true}')
    convo = transcript(("ON-BEFORE I use vim", "ok"))
    await _after_turn(ws, "A", convo)
    await ws.handle.daemon.services.extraction.wait_idle()
    settings.write_text('{"autoMemoryEnabled": false}')
    convo = [*convo, *transcript(("WHILE-OFF my health issue, do not keep it", "understood"))]
    assert (await _after_turn(ws, "A", convo))["scheduled"]["extraction"] is False
    settings.write_text('{"autoMemoryEnabled": true }')
    convo = [*convo, *transcript(("ON-AGAIN use pytest -x", "sure"))]
    assert (await _after_turn(ws, "A", convo))["scheduled"]["extraction"] is True
    await ws.handle.daemon.services.extraction.wait_idle()
    requests = fake_model.message_requests()
    assert len(requests) == 2
    last = json.dumps(requests[-1].json)
    assert "ON-AGAIN" in last
    assert "WHILE-OFF" not in last


def _extractions(fake: FakeMessagesAPI) -> list[str]:
    return [
        text
        for text in (json.dumps(r.json) for r in fake.message_requests())
        if "background memory extraction" in text
    ]


async def test_two_projects_sessions_of_one_id_keep_their_own_places(
    daemon_with_model: DaemonHandle, tmp_path: Path, fake_model: FakeMessagesAPI
) -> None:
    """The protocol's own example session id ("s1") in two projects: kept by the id alone,
    B's turn moved A's cursor, and A's next extraction was offered A's first turn again."""
    fake_model.handler = lambda _req: text_reply(NOTHING_MARKER)
    a = workspace_for(daemon_with_model, tmp_path / "a")
    b = workspace_for(daemon_with_model, tmp_path / "b")
    assert a.project.key != b.project.key
    first_of_a = transcript(("A-FIRST I prefer tabs", "noted"))
    await _after_turn(a, "s1", first_of_a)
    await a.handle.daemon.services.extraction.wait_idle()
    await _after_turn(b, "s1", transcript(("B-FIRST deploys are on fridays", "ok")))
    await b.handle.daemon.services.extraction.wait_idle()
    await _after_turn(a, "s1", [*first_of_a, *transcript(("A-SECOND fix the bug", "fixed"))])
    await a.handle.daemon.services.extraction.wait_idle()
    requests = _extractions(fake_model)
    assert len(requests) == 3
    assert "A-SECOND" in requests[-1]
    assert "A-FIRST" not in requests[-1]
    assert "most recent turn" in requests[-1]


async def test_a_place_saved_under_the_bare_session_id_is_taken_over(
    ws: Workspace, fake_model: FakeMessagesAPI
) -> None:
    """A daemon before places were per project saved them by session id: after the upgrade,
    the session's next turn is offered only what came after that place, not all of it."""
    fake_model.handler = lambda _req: text_reply(NOTHING_MARKER)
    first = transcript(("OLD-DAEMON I prefer tabs", "noted"))
    saved = cursor_after(first)
    cursors_path().parent.mkdir(parents=True, exist_ok=True)
    cursors_path().write_text(
        json.dumps({"version": 1, "sessions": [["s1", saved.count, saved.mark]]})
    )
    await _after_turn(ws, "s1", [*first, *transcript(("NEW-DAEMON fix the bug", "fixed"))])
    await ws.handle.daemon.services.extraction.wait_idle()
    (request,) = _extractions(fake_model)
    assert "NEW-DAEMON" in request
    assert "OLD-DAEMON" not in request
    # Taken over once: written back under its place, the bare id gone.
    saved_now = json.loads(cursors_path().read_text())["sessions"]
    assert [entry[0] for entry in saved_now] == [session_place(ws.project, "s1")]


async def test_a_bare_id_place_is_taken_over_by_the_project_whose_transcript_holds_it(
    daemon_with_model: DaemonHandle, tmp_path: Path, fake_model: FakeMessagesAPI
) -> None:
    """Found in review (session 24): after the upgrade, one session id in two projects, the
    first to have a turn (B) took the old place over, found its mark nowhere in its own
    messages, and A, left with none, was offered its whole conversation again."""
    fake_model.handler = lambda _req: text_reply(NOTHING_MARKER)
    a = workspace_for(daemon_with_model, tmp_path / "a")
    b = workspace_for(daemon_with_model, tmp_path / "b")
    first_of_a = transcript(("OLD-DAEMON-A I prefer tabs", "noted"))
    saved = cursor_after(first_of_a)
    cursors_path().parent.mkdir(parents=True, exist_ok=True)
    cursors_path().write_text(
        json.dumps({"version": 1, "sessions": [["s1", saved.count, saved.mark]]})
    )
    await _after_turn(b, "s1", transcript(("B-ONLY deploys are on fridays", "ok")))
    await b.handle.daemon.services.extraction.wait_idle()
    await _after_turn(a, "s1", [*first_of_a, *transcript(("A-NEW fix the bug", "fixed"))])
    await a.handle.daemon.services.extraction.wait_idle()
    of_b, of_a = _extractions(fake_model)
    assert "B-ONLY" in of_b
    assert "A-NEW" in of_a
    assert "OLD-DAEMON-A" not in of_a
    saved_now = json.loads(cursors_path().read_text())["sessions"]
    assert sorted(entry[0] for entry in saved_now) == sorted(
        session_place(ws.project, "s1") for ws in (a, b)
    )
