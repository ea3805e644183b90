"""Dates in memory text and queries."""

from __future__ import annotations

from datetime import date

import pytest

from memoryd.automem.recall.dates import (
    DateQuery,
    asks_when,
    first_date,
    mentions_time,
    query_date,
    relative_event,
    without_date_label,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Session date: 1:56 pm on 8 May, 2023", date(2023, 5, 8)),
        ("met on May 8, 2023 and again on 9 June, 2023", date(2023, 5, 8)),
        ("decided 2024-02-29 in standup", date(2024, 2, 29)),
        ("the 8th of December 2023", date(2023, 12, 8)),
        ("31 February, 2023 is not a day", None),
        ("no date here, may be later", None),
    ],
)
def test_first_date(text: str, expected: date | None) -> None:
    assert first_date(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What happened on 7 July, 2023?", DateQuery(2023, 7, 7)),
        ("after his trip in August 2023", DateQuery(2023, 8, None)),
        ("what did he get on Aug 15th?", DateQuery(None, 8, 15)),
        ("What did John get in December?", DateQuery(None, 12, None)),
        ("what happened in 2022", DateQuery(2022, None, None)),
        ("Where did she travel last May?", DateQuery(None, 5, None)),
        ("What did he do before June 2023?", DateQuery(2023, 6, None, "before")),
        ("anything after the 5th of May, 2023", DateQuery(2023, 5, 5, "after")),
        ("plans until early 2024", DateQuery(2024, None, None, "before")),
        ("what has she done since June 2023?", DateQuery(2023, 6, None, "since")),
        ("before the trip", None),
        ("may I deploy on Friday?", None),
        # "may" before a verb is no month
        ("this may affect the cache", None),
        ("by may be ready", None),
        ("what did she do last may for her birthday?", DateQuery(None, 5, None)),
        ("What did we decide in May about the cache?", DateQuery(None, 5, None)),
        ("In May Caroline adopted a dog", DateQuery(None, 5, None)),
        ("This may be off, but what did we decide in June?", DateQuery(None, 6, None)),
        ("last May she went to Rome", DateQuery(None, 5, None)),
        # two dates joined: a range from the first's start to the second's end
        (
            "Where was John between August 11 and August 15 2023?",
            DateQuery(2023, 8, 11, through=DateQuery(2023, 8, 15)),
        ),
        ("between 11 and 15 August 2023", DateQuery(2023, 8, 11, through=DateQuery(2023, 8, 15))),
        ("between August 11 and 15, 2023", DateQuery(2023, 8, 11, through=DateQuery(2023, 8, 15))),
        ("from May to July 2023", DateQuery(2023, 5, None, through=DateQuery(2023, 7, None))),
        ("from 2021 until 2023", DateQuery(2021, None, None, through=DateQuery(2023, None, None))),
        ("May 1-10, 2023", DateQuery(2023, 5, 1, through=DateQuery(2023, 5, 10))),
        ("on 1–10 May 2023", DateQuery(2023, 5, 1, through=DateQuery(2023, 5, 10))),
        ("from 2019-03-01 to 2019-03-05", DateQuery(2019, 3, 1, through=DateQuery(2019, 3, 5))),
        # not a range: read as before
        ("between 2 and 3 tests failed in May 2023", DateQuery(2023, 5, None)),
        ("between May 10 and May 1, 2023", DateQuery(2023, 5, 1)),  # backwards
        ("between February 30 and March 2, 2023", DateQuery(2023, 3, 2)),  # no such day
        ("between May 3 and June", DateQuery(None, 5, 3)),  # no year
        ("from the api to the db", None),
        # across a year's or a month's end
        (
            "between December 28 and January 3, 2024",
            DateQuery(2023, 12, 28, through=DateQuery(2024, 1, 3)),
        ),
        ("from the 28th to March 3, 2023", DateQuery(2023, 2, 28, through=DateQuery(2023, 3, 3))),
        ("May 28 – 3 June 2023", DateQuery(2023, 5, 28, through=DateQuery(2023, 6, 3))),
        (
            "between the 11th and 15th of August 2023",
            DateQuery(2023, 8, 11, through=DateQuery(2023, 8, 15)),
        ),
        # a year ends joined dates only when nothing but a question follows
        (
            "what happened from 2021 to 2023?",
            DateQuery(2021, None, None, through=DateQuery(2023, None, None)),
        ),
        ("copy from 2019 to 2020 folder", None),
        ("a timeout from 2000 to 2048 ms", None),
        ("between 1 and 2, 2023", None),  # days with no month
        # a direction word before joined dates: that side of the whole range
        (
            "what did he do before May 1-10, 2023?",
            DateQuery(2023, 5, 1, "before", through=DateQuery(2023, 5, 10)),
        ),
        (
            "anything after the 3–5 June 2023?",
            DateQuery(2023, 6, 3, "after", through=DateQuery(2023, 6, 5)),
        ),
        (
            "what changed since May 1-10, 2023?",
            DateQuery(2023, 5, 1, "since", through=DateQuery(2023, 5, 10)),
        ),
        (
            "plans until May 28 - 3 June 2023",
            DateQuery(2023, 5, 28, "before", through=DateQuery(2023, 6, 3)),
        ),
        (
            "what did we ship prior to the 1–10 May 2023 freeze?",
            DateQuery(2023, 5, 1, "before", through=DateQuery(2023, 5, 10)),
        ),
    ],
)
def test_query_date(text: str, expected: DateQuery | None) -> None:
    assert query_date(text) == expected


def test_a_side_of_a_range() -> None:
    june = DateQuery(2023, 6, None, "since")
    assert june.matches(date(2023, 6, 1), 0)  # "since June" takes June in
    assert june.matches(date(2024, 1, 1), 0)
    assert not june.matches(date(2023, 5, 31), 0)
    after = DateQuery(2023, 6, None, "after")
    assert not after.matches(date(2023, 6, 30), 0)  # "after June" starts in July
    assert after.matches(date(2023, 7, 1), 0)
    days = DateQuery(2023, 5, 1, "before", through=DateQuery(2023, 5, 10))
    assert days.matches(date(2023, 4, 30), 0)
    assert not days.matches(date(2023, 5, 5), 14)  # in the range is not before it
    later = DateQuery(2023, 5, 1, "after", through=DateQuery(2023, 5, 10))
    assert later.matches(date(2023, 5, 11), 0)
    assert not later.matches(date(2023, 5, 10), 0)
    since = DateQuery(2023, 5, 1, "since", through=DateQuery(2023, 5, 10))
    assert since.matches(date(2023, 5, 1), 0)
    assert since.matches(date(2023, 9, 1), 0)


def test_matches_with_slack() -> None:
    q = DateQuery(2023, 8, 15)
    assert q.matches(date(2023, 8, 15), 0)
    assert q.matches(date(2023, 8, 20), 7)  # written a few days after the event
    assert not q.matches(date(2023, 8, 14), 7)  # before it
    assert not q.matches(date(2023, 8, 30), 7)
    month = DateQuery(None, 12, None)
    assert month.matches(date(2021, 12, 31), 0)
    assert month.matches(date(2022, 1, 5), 7)


# 3 December 2026 is a Thursday.
TODAY = date(2026, 12, 3)


def _day(when: date, direction: str = "on", through: date | None = None) -> DateQuery:
    last = DateQuery(through.year, through.month, through.day) if through else None
    return DateQuery(when.year, when.month, when.day, direction, last)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("what did we decide yesterday?", _day(date(2026, 12, 2))),
        ("anything from today", _day(TODAY)),
        ("the day before yesterday", _day(date(2026, 12, 1))),
        ("three days ago", _day(date(2026, 11, 30))),
        ("last Friday", _day(date(2026, 11, 27))),
        ("last Thursday", _day(date(2026, 11, 26))),  # on a Thursday: a week ago
        # a calendar week (from Monday), month or year; the current one ends today
        (
            "what we agreed last week about the API",
            _day(date(2026, 11, 23), through=date(2026, 11, 29)),
        ),
        ("this week", _day(date(2026, 11, 30), through=TODAY)),
        ("2 weeks ago", _day(date(2026, 11, 16), through=date(2026, 11, 22))),
        ("last month", _day(date(2026, 11, 1), through=date(2026, 11, 30))),
        ("a couple of months ago", _day(date(2026, 10, 1), through=date(2026, 10, 31))),
        ("this month", _day(date(2026, 12, 1), through=TODAY)),
        ("last year", _day(date(2025, 1, 1), through=date(2025, 12, 31))),
        ("in the past week", _day(date(2026, 11, 27), through=TODAY)),  # seven days
        ("in the last month", _day(date(2026, 11, 3), through=TODAY)),
        ("a year ago", _day(date(2025, 1, 1), through=date(2025, 12, 31))),
        ("since last week", _day(date(2026, 11, 23), through=TODAY)),
        ("before last month", _day(date(2026, 11, 1), "before")),
        ("after last week", _day(date(2026, 11, 29), "after")),
        ("what did we fix last night?", _day(date(2026, 12, 2))),
        # vaguer: "the other day" within the week; "a few" two to five of the unit back
        ("the other day you said", _day(date(2026, 11, 26), through=date(2026, 12, 2))),
        ("a few days ago", _day(date(2026, 11, 28), through=date(2026, 12, 1))),
        ("several weeks ago", _day(date(2026, 10, 29), through=date(2026, 11, 19))),
        # a named date comes first; no time, no range
        ("what happened last week on 8 May, 2023?", DateQuery(2023, 5, 8)),
        ("deploy on Fridays", None),
        ("an hour ago", None),
    ],
)
def test_a_time_named_from_now(text: str, expected: DateQuery | None) -> None:
    assert query_date(text, TODAY) == expected


def test_a_time_from_now_needs_today() -> None:
    assert query_date("what did we decide yesterday?") is None
    assert relative_event("what did she paint before the trip, last week?") == ("before", "trip")
    assert relative_event("what did she paint before the trip, last week?", TODAY) is None


def test_a_range_of_joined_dates_matches_its_days_and_the_slack_after() -> None:
    span = DateQuery(2023, 8, 11, through=DateQuery(2023, 8, 15))
    assert span.matches(date(2023, 8, 11), 0)
    assert span.matches(date(2023, 8, 13), 0)
    assert span.matches(date(2023, 8, 20), 7)
    assert not span.matches(date(2023, 8, 10), 7)
    assert not span.matches(date(2023, 8, 16), 0)
    months = DateQuery(2023, 5, None, through=DateQuery(2023, 7, None))
    assert months.matches(date(2023, 7, 31), 0)
    assert not months.matches(date(2023, 4, 30), 0)


def test_before_and_after_a_range() -> None:
    before = DateQuery(2023, 6, None, "before")
    assert before.matches(date(2023, 5, 31), 14)
    assert not before.matches(date(2023, 6, 1), 14)
    after = DateQuery(2023, None, None, "after")
    assert after.matches(date(2024, 1, 1), 0)
    assert not after.matches(date(2023, 12, 31), 0)
    assert DateQuery(None, 6, None, "before").matches(date(2020, 6, 3), 0)  # no year: "on"


def test_relative_event() -> None:
    assert relative_event("What did she do before the trip?") == ("before", "trip")
    assert relative_event("How did he feel after his basketball career") == (
        "after",
        "basketball career",
    )
    assert relative_event("What did he do before June 2023?") is None  # a date: query_date
    assert relative_event("What did she do before?") is None
    assert relative_event("what has she painted since the trip?") == ("since", "trip")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Nate has had turtles for 3 years", True),
        ("went to Rome last week", True),
        ("moved here in May", True),
        ("we went hiking this May, it was great", True),
        ("Changing the TTL this may affect the cache hit rate", False),  # the verb
        ("the launch slipped to next month", True),
        ("we met on Friday", True),
        ("back in 2019 we used Jenkins", True),
        ("two days ago the build broke", True),
        ("TWO DAYS AGO the build broke", True),  # any case
        ("Met in MAY, on 8 May, 2023", True),  # a month besides the full date
        ("met on 8 MAY, 2023", False),
        ("Session date: 10:31 am on 13 October, 2023", False),  # its own date only
        ("She may go to Rome", False),
        ("prefers tabs over spaces", False),
    ],
)
def test_mentions_time(text: str, expected: bool) -> None:
    assert mentions_time(text) is expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("When did Melanie get hurt?", True),
        ("What year did they move?", True),
        ("How long has Nate had turtles?", True),
        ("What did Melanie paint?", False),
        ("Which whenever-flag do we use?", False),
    ],
)
def test_asks_when(query: str, expected: bool) -> None:
    assert asks_when(query) is expected


def test_without_date_label_keeps_the_date() -> None:
    text = (
        "Ate lunch.\n  Session date: 8 May, 2023\nsession DATE: no label mid-line: Session date: x"
    )
    # the label at a line's start, in any case, is left out; the date and the rest stay
    assert without_date_label(text) == (
        "Ate lunch.\n  8 May, 2023\n  no label mid-line: Session date: x"
    )
    assert without_date_label("Lunch.\nSESSION DATE: 8 May") == "Lunch.\n  8 May"  # any case
