"""Recall with the model selector (scripted fake Messages API), and every fallback."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from memoryd.automem.recall import pick as recall_mod
from memoryd.automem.recall import query as recall_query
from tests.automem.conftest import file_day, memory_text, write_memory
from tests.conftest import DaemonHandle
from tests.fakes.messages_api import FakeMessagesAPI, error_reply, json_reply, slow, text_reply

MEMORIES = [
    (
        "user",
        "Prefers terse answers",
        "answer style",
        "The user wants short answers without preamble.",
    ),
    (
        "reference",
        "Grafana API dashboard",
        "latency graphs",
        "SECRET-BODY https://grafana.example/d/api",
    ),
    (
        "project",
        "Release freeze March 5",
        "mobile release date",
        "Freeze on March 5.\n**Why:** store review.\n**How to apply:** no merges.",
    ),
]


async def _seed(handle: DaemonHandle, project: Path) -> list[str]:
    return [str(await write_memory(handle, project, *memory)) for memory in MEMORIES]


async def test_model_selects(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, project: Path
) -> None:
    paths = await _seed(daemon_with_model, project)
    fake_model.enqueue(json_reply({"selected": [Path(paths[1]).name, "nonexistent.md"]}))
    got = await daemon_with_model.call(
        "recall",
        cwd=str(project),
        query="where are the latency graphs?",
        recent_tools=["Bash", "Read"],
        already_surfaced=[paths[0]],
    )
    assert got["selector"] == "model"
    assert [m["path"] for m in got["memories"]] == [paths[1]]
    assert "SECRET-BODY" in got["memories"][0]["content"]
    (request,) = fake_model.message_requests()
    body = request.json
    assert body["max_tokens"] == 256
    assert body["model"] == "claude-fake-small"
    prompt = body["messages"][0]["content"]
    assert "where are the latency graphs?" in prompt
    assert "Bash, Read" in prompt
    assert "Grafana API dashboard" in prompt
    assert "SECRET-BODY" not in prompt  # frontmatter only, never bodies
    assert "Prefers terse answers" not in prompt  # already surfaced
    assert '{"selected"' in body["system"]


async def test_explain_says_what_the_local_ranker_saw_in_the_models_choice(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, project: Path
) -> None:
    paths = await _seed(daemon_with_model, project)
    # The model chooses a memory the query shares no word with, and one it shares two with.
    fake_model.enqueue(json_reply({"selected": [Path(paths[2]).name, Path(paths[1]).name]}))
    got = await daemon_with_model.call(
        "recall", cwd=str(project), query="where are the latency graphs?", explain=True
    )
    assert got["selector"] == "model"
    # (neither names a date: each is dated by its file's last write)
    assert [m["why"] for m in got["memories"]] == [
        {"words": [], "lexical": 0.0, "date": file_day(paths[2]), "date_from": "file"},
        {
            "words": ["latency", "graphs"],
            "lexical": 1.0,
            "date": file_day(paths[1]),
            "date_from": "file",
        },
    ]


async def test_model_reads_the_ends_of_a_long_query_not_all_of_it(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, project: Path
) -> None:
    paths = await _seed(daemon_with_model, project)
    fake_model.enqueue(json_reply({"selected": [Path(paths[1]).name]}))
    pad = "lorem ipsum dolor " * 2_700  # ~48,600 characters each side
    query = f"where are the latency graphs? {pad} MIDDLE-MARK {pad} answer in one line"
    assert len(query) > 95_000
    got = await daemon_with_model.call("recall", cwd=str(project), query=query)
    assert got["selector"] == "model"
    assert [m["path"] for m in got["memories"]] == [paths[1]]
    (request,) = fake_model.message_requests()
    prompt = request.json["messages"][0]["content"]
    assert "where are the latency graphs?" in prompt
    assert "answer in one line" in prompt
    assert "MIDDLE-MARK" not in prompt
    assert len(prompt) < recall_query.QUERY_EXCERPT_CHARS + 2_000  # + tools and manifest


async def test_model_may_select_nothing(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, project: Path
) -> None:
    await _seed(daemon_with_model, project)
    fake_model.enqueue(json_reply({"selected": []}))
    got = await daemon_with_model.call("recall", cwd=str(project), query="unrelated")
    assert got == {"memories": [], "selector": "model"}


@pytest.mark.parametrize(
    "query",
    ["looks good, keep going", "Thanks!", "what do you think?", "👍", "never mind", "好的，谢谢"],
)
async def test_a_query_that_names_no_topic_is_not_ranked_nor_sent_to_the_model(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, project: Path, query: str
) -> None:
    await _seed(daemon_with_model, project)
    await write_memory(
        daemon_with_model, project, "feedback", "Keep going", "keep going", "Keep going, good work."
    )
    got = await daemon_with_model.call("recall", cwd=str(project), query=query)
    assert got == {"memories": [], "selector": "local", "not_ranked": recall_mod.NO_TOPIC}
    assert fake_model.message_requests() == []  # no model call for it
    # A topic beside those words is ranked as ever; asking for the local ranker changes nothing
    # for a reply.
    fake_model.enqueue(json_reply({"selected": []}))
    got = await daemon_with_model.call("recall", cwd=str(project), query=f"{query} grafana")
    assert "not_ranked" not in got
    assert len(fake_model.message_requests()) == 1
    local = await daemon_with_model.call(
        "recall", cwd=str(project), query="keep going", selector="local"
    )
    assert local["memories"] == []
    assert local["not_ranked"] == recall_mod.NO_TOPIC


async def test_limit_applies_to_model_choice(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, project: Path
) -> None:
    paths = await _seed(daemon_with_model, project)
    fake_model.enqueue(json_reply({"selected": [Path(p).name for p in paths]}))
    got = await daemon_with_model.call("recall", cwd=str(project), query="x", limit=2)
    assert [m["path"] for m in got["memories"]] == paths[:2]


@pytest.mark.parametrize(
    "reply",
    [
        error_reply(400, "invalid_request_error", "bad"),
        text_reply("I think the Grafana one"),
        json_reply({"chosen": ["a.md"]}),
    ],
)
async def test_falls_back_to_local(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, project: Path, reply: object
) -> None:
    paths = await _seed(daemon_with_model, project)
    fake_model.enqueue(reply)  # type: ignore[arg-type]
    got = await daemon_with_model.call("recall", cwd=str(project), query="release freeze date")
    assert got["selector"] == "local"
    assert got["memories"][0]["path"] == paths[2]


async def test_server_errors_fall_back_after_retries(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, project: Path
) -> None:
    paths = await _seed(daemon_with_model, project)
    fake_model.handler = lambda _: error_reply(529, "overloaded_error", "Overloaded")
    got = await daemon_with_model.call("recall", cwd=str(project), query="release freeze date")
    assert got["selector"] == "local"
    assert got["memories"][0]["path"] == paths[2]
    assert len(fake_model.message_requests()) == 4  # first try + 3 retries


async def test_timeout_falls_back(
    daemon_with_model: DaemonHandle,
    fake_model: FakeMessagesAPI,
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(recall_mod, "SELECTOR_TIMEOUT_S", 0.3)
    paths = await _seed(daemon_with_model, project)
    fake_model.enqueue(slow(3.0, json_reply({"selected": []})))
    got = await daemon_with_model.call("recall", cwd=str(project), query="terse answers")
    assert got["selector"] == "local"
    assert got["memories"][0]["path"] == paths[0]


async def test_no_model_is_local(daemon: DaemonHandle, project: Path) -> None:
    paths = await _seed(daemon, project)
    got = await daemon.call("recall", cwd=str(project), query="grafana latency")
    assert got["selector"] == "local"
    assert got["memories"][0]["path"] == paths[1]


async def test_remember_with_model(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, project: Path
) -> None:
    fake_model.enqueue(
        json_reply(
            {
                "type": "reference",
                "name": "Staging database",
                "description": "where staging data lives",
            }
        )
    )
    res = await daemon_with_model.call(
        "memory.remember", cwd=str(project), text="staging db is db-staging.internal"
    )
    assert (res["type"], res["name"], res["derived_by"]) == (
        "reference",
        "Staging database",
        "model",
    )
    assert "db-staging.internal" in Path(res["path"]).read_text()
    fake_model.enqueue(error_reply(400, "invalid_request_error", "nope"))
    res = await daemon_with_model.call(
        "memory.remember", cwd=str(project), text="Dana owns the billing service", type="project"
    )
    assert (res["type"], res["derived_by"]) == ("project", "local")


def _fill(memdir: Path, n: int) -> None:
    """`n` plain memories written straight into the directory (the store picks them up)."""
    memdir.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (memdir / f"user_note_{i:04d}.md").write_text(
            memory_text(f"Note {i}", f"filler topic {i} number{i}", "user", f"Filler body {i}."),
            encoding="utf-8",
        )
    (memdir / "user_kayak.md").write_text(
        memory_text("Kayak club", "the user rows with the harbour kayak club", "user", "Tuesdays."),
        encoding="utf-8",
    )


def _manifest_lines(fake_model: FakeMessagesAPI) -> list[str]:
    (request,) = fake_model.message_requests()
    prompt: str = request.json["messages"][0]["content"]
    return [line for line in prompt.split("Memories:\n", 1)[1].splitlines() if line.strip()]


async def test_large_manifest_model_picks_among_local_candidates(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, project: Path, memdir: Path
) -> None:
    _fill(memdir, recall_mod.MODEL_CANDIDATES_FROM)
    fake_model.enqueue(json_reply({"selected": ["user_kayak.md"]}))
    got = await daemon_with_model.call(
        "recall", cwd=str(project), query="when does the kayak club row in the harbour?"
    )
    assert got["selector"] == "model"
    assert [Path(m["path"]).name for m in got["memories"]] == ["user_kayak.md"]
    lines = _manifest_lines(fake_model)
    assert 1 <= len(lines) <= recall_mod.MODEL_CANDIDATES
    assert "user_kayak.md" in lines[0]  # the local ranker's best comes first


async def test_at_200_memories_the_model_gets_the_best_30_of_many_matches(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, project: Path, memdir: Path
) -> None:
    _fill(memdir, recall_mod.MODEL_CANDIDATES_FROM - 1)  # + the kayak memory: 200 in all
    fake_model.enqueue(json_reply({"selected": ["user_kayak.md"]}))
    # Every memory matches "filler" or "topic"; the kayak one matches the most.
    query = "kayak club harbour filler topic"
    got = await daemon_with_model.call("recall", cwd=str(project), query=query)
    assert got["selector"] == "model"
    lines = _manifest_lines(fake_model)
    assert len(lines) == recall_mod.MODEL_CANDIDATES  # not the 200 of the manifest
    files = [line.split()[1] for line in lines]
    assert len(set(files)) == recall_mod.MODEL_CANDIDATES
    assert files[0] == "user_kayak.md"
    # The local ranker's own best are among them.
    local = await daemon_with_model.call("recall", cwd=str(project), query=query, selector="local")
    best = [Path(m["path"]).name for m in local["memories"]]
    assert len(best) == 5
    assert best[0] == files[0]
    assert set(best) <= set(files)
    assert len(fake_model.message_requests()) == 1  # the local call asked no model


async def test_small_manifest_goes_to_the_model_whole(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, project: Path, memdir: Path
) -> None:
    _fill(memdir, recall_mod.MODEL_CANDIDATES_FROM - 2)  # + the kayak memory: 199 in all
    fake_model.enqueue(json_reply({"selected": ["user_kayak.md"]}))
    got = await daemon_with_model.call("recall", cwd=str(project), query="kayak club")
    assert got["selector"] == "model"
    assert len(_manifest_lines(fake_model)) == recall_mod.MODEL_CANDIDATES_FROM - 1


async def test_large_manifest_without_local_match_offers_the_newest(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, project: Path, memdir: Path
) -> None:
    _fill(memdir, recall_mod.MODEL_CANDIDATES_FROM)
    newest = memdir / "user_note_0007.md"
    os.utime(newest, (time.time() + 60, time.time() + 60))
    fake_model.enqueue(json_reply({"selected": [newest.name]}))
    got = await daemon_with_model.call("recall", cwd=str(project), query="zzqx")
    assert got["selector"] == "model"
    assert [Path(m["path"]).name for m in got["memories"]] == [newest.name]
    lines = _manifest_lines(fake_model)
    assert len(lines) == recall_mod.MODEL_CANDIDATES
    assert newest.name in lines[0]


async def test_a_binary_file_the_model_selects_is_not_returned(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, project: Path
) -> None:
    # The manifest lists a binary file with its problem; the model may still name it, and its
    # bytes would go into the prompt as a memory.
    paths = await _seed(daemon_with_model, project)
    photo = Path(paths[0]).parent / "reference_latency_graph.md"
    photo.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00latency graphs" * 50)
    fake_model.enqueue(json_reply({"selected": [photo.name, Path(paths[1]).name]}))
    got = await daemon_with_model.call("recall", cwd=str(project), query="latency graphs?")
    assert got["selector"] == "model"
    assert [m["path"] for m in got["memories"]] == [paths[1]]
