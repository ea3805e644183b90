"""Temporal recall through the real daemon: a memory's date is the session date in its text,
and a query naming a time ("last May", "in 2023", "before the trip", "yesterday") ranks by it.

In each case the memory the date points at has fewer words in common with the query than
its rival, so only the date can put it first.
"""

from __future__ import annotations

import os
from datetime import date, datetime, time, timedelta
from pathlib import Path

import pytest

from tests.automem.conftest import memory_text, write_memory
from tests.conftest import DaemonHandle

# (name, description, session date) — written through `memory.write`, the session date in
# the body as an agent records it.
MEMORIES = [
    ("Lake painting", "Melanie painted a lake", "8 May, 2023"),
    (
        "Lake painting again",
        "Melanie painted a lake, a lake at dawn, her best lake",
        "3 September, 2023",
    ),
    ("Jazz concert", "Jon went to a jazz concert downtown", "2 April, 2023"),
    (
        "Jazz concert again",
        "Jon went to a jazz concert, jazz all night, a concert to remember",
        "14 March, 2022",
    ),
    ("Road trip", "Caroline went on a road trip to Utah", "10 June, 2023"),
    ("Sunset painting", "Caroline painted a sunset", "1 May, 2023"),
    (
        "Sunset painting again",
        "Caroline painted a sunset again, sunset over sunset",
        "1 September, 2023",
    ),
]


@pytest.fixture
async def dated(daemon: DaemonHandle, project: Path) -> dict[str, str]:
    """{memory name: file}"""
    files = {}
    for name, description, when in MEMORIES:
        body = f"{description}.\nSession date: 1:56 pm on {when}"
        files[name] = (await write_memory(daemon, project, "user", name, description, body)).name
    return files


async def _first(daemon: DaemonHandle, project: Path, query: str, among: list[str]) -> str:
    got = await daemon.call("recall", cwd=str(project), query=query, selector="local")
    ranked = [Path(m["path"]).name for m in got["memories"]]
    return next(f for f in ranked if f in among)


@pytest.mark.parametrize(
    ("query", "expected", "rival"),
    [
        ("What did Melanie paint last May?", "Lake painting", "Lake painting again"),
        ("Which jazz concert did Jon go to in 2023?", "Jazz concert", "Jazz concert again"),
        (
            "What sunset did Caroline paint before the trip?",
            "Sunset painting",
            "Sunset painting again",
        ),
        (
            "What sunset did Caroline paint after the trip?",
            "Sunset painting again",
            "Sunset painting",
        ),
    ],
)
async def test_a_query_naming_a_time_ranks_by_the_session_date(
    daemon: DaemonHandle,
    project: Path,
    dated: dict[str, str],
    query: str,
    expected: str,
    rival: str,
) -> None:
    among = [dated[expected], dated[rival]]
    assert await _first(daemon, project, query, among) == dated[expected]
    # Without the time, the rival's extra words win: the date is what decided.
    plain = query.replace(" last May", "").replace(" in 2023", "")
    plain = plain.replace(" before the trip", "").replace(" after the trip", "")
    if expected != "Sunset painting again":
        assert await _first(daemon, project, plain, among) == dated[rival]


async def test_a_time_named_from_now_counts_from_the_daemons_today(
    daemon: DaemonHandle, project: Path
) -> None:
    # dated as the extraction agent dates what it saves: yesterday's session, and last year's
    yesterday = date.today() - timedelta(days=1)
    written = {}
    for name, description, when in [
        ("Cache decision", "we chose Redis for the cache", yesterday),
        ("Cache decision before", "we chose Redis for the cache, Redis cache", date(2020, 3, 2)),
    ]:
        body = f"{description}.\nSession date: {when.day} {when:%B}, {when.year}"
        path = await write_memory(daemon, project, "project", name, description, body)
        written[name] = str(path)
    got = await daemon.call(
        "recall", cwd=str(project), query="which cache did we choose yesterday?", explain=True
    )
    first = got["memories"][0]
    assert first["path"] == written["Cache decision"]
    assert first["why"]["date"] == yesterday.isoformat()
    assert first["why"]["date_signals"] == ["dated as asked"]
    # without "yesterday", the other's extra words win
    got = await daemon.call("recall", cwd=str(project), query="which cache did we choose?")
    assert got["memories"][0]["path"] == written["Cache decision before"]


@pytest.mark.parametrize(
    ("query", "asked", "rival"),
    [
        # "since" takes the month it names in
        (
            "Which jazz concert did Jon go to since April 2023?",
            ("Jon went to a jazz concert", date(2023, 4, 2)),
            ("Jon planned in April 2023 a jazz concert, jazz all night", date(2023, 3, 1)),
        ),
        # a direction word before joined dates asks for that side of them all
        (
            "What did Melanie paint before May 10-20, 2023?",
            ("Melanie painted a lake", date(2023, 5, 8)),
            ("Melanie painted a lake, her best lake, for May 2023", date(2023, 9, 3)),
        ),
    ],
)
async def test_a_side_of_a_named_time(
    daemon: DaemonHandle,
    project: Path,
    query: str,
    asked: tuple[str, date],
    rival: tuple[str, date],
) -> None:
    written = []
    for name, (description, when) in (("Asked", asked), ("Rival", rival)):
        body = f"{description}.\nSession date: {when.day} {when:%B}, {when.year}"
        written.append(str(await write_memory(daemon, project, "user", name, description, body)))
    got = await daemon.call("recall", cwd=str(project), query=query, selector="local")
    assert [m["path"] for m in got["memories"]][:2] == written
    # without the time, the rival's extra words win: the date is what decided
    plain = query.replace(" since April 2023", "").replace(" before May 10-20, 2023", "")
    got = await daemon.call("recall", cwd=str(project), query=plain, selector="local")
    assert [m["path"] for m in got["memories"]][:2] == written[::-1]


async def test_a_memory_that_names_no_date_is_dated_by_its_files_last_write(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    # as a user or Claude Code writes them: no `Session date:` line
    yesterday = datetime.combine(date.today() - timedelta(days=1), time(12))
    written = {}
    for file, description, when in [
        ("cache_decision.md", "we chose Redis for the cache", yesterday),
        (
            "cache_decision_before.md",
            "we chose Redis for the cache, Redis cache",
            datetime(2020, 3, 2),
        ),
        ("team/cache_team.md", "we chose Redis for the cache", yesterday),
    ]:
        path = memdir / file
        path.parent.mkdir(parents=True, exist_ok=True)
        name = f"Decision {len(written)}"  # no word of the query
        path.write_text(memory_text(name, description, "project", f"{description}."))
        os.utime(path, (when.timestamp(), when.timestamp()))
        written[file] = str(path)
    got = await daemon.call(
        "recall", cwd=str(project), query="which cache did we choose yesterday?", explain=True
    )
    first = got["memories"][0]
    assert first["path"] == written["cache_decision.md"]
    assert first["why"]["date"] == yesterday.date().isoformat()
    assert first["why"]["date_from"] == "file"
    assert first["why"]["date_signals"] == ["dated as asked"]
    # a team memory's file time is when it was synced: it has no date
    team = next(m for m in got["memories"] if m["path"] == written["team/cache_team.md"])
    assert "date" not in team["why"]
    # without "yesterday", the older one's extra words win
    got = await daemon.call("recall", cwd=str(project), query="which cache did we choose?")
    assert got["memories"][0]["path"] == written["cache_decision_before.md"]
