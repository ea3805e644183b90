"""Dates in memory text and in queries, for the ranker's temporal signals (pure).

A memory's date is the first full date in its text (`8 May, 2023`, `May 8, 2023`,
`2023-05-08`). A query's date is a range: a full date is one day, `May 2023` a month,
`May` alone (or `May 8`) that month or day in any year; `last May`, `early 2023` name the
same ranges ("this may affect the cache" names none: the verb). `before`/`after` a date with a
year (`before June 2023`) asks for anything earlier or later than that range, `since` for it
and anything later. Two dates joined (`between August 11 and August 15, 2023`, `from May to
July 2023`, `May 1–10, 2023`) name the days from the first's start to the second's end; a
direction word before them (`before May 1–10, 2023`) asks for that side of them all. Given
today's date, a query may name a time from now: `yesterday`, `last week`, `this month`,
`three days ago`, `last Friday`, `since last week`, `a few days ago`.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass, replace
from datetime import date, timedelta

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_PATTERNS = (
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.I),
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.I),
    re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<month>[01]\d)-(?P<day>[0-3]\d)\b"),
)
_MONTH_YEAR = re.compile(rf"\b{_MONTH}(?:\s*+,)?\s++{_YEAR}\b", re.I)
_DAY_MONTH = re.compile(
    rf"\b(?:{_DAY}\s+(?:of\s+)?{_MONTH}|{_MONTH.replace('month', 'month2')}\s+(?P<day2>[0-3]?\d)(?:st|nd|rd|th)?)\b",
    re.I,
)
_MONTH_ONLY = re.compile(
    rf"\b(?P<lead>in|during|of|since|until|by|last|this|next)\s+(?:early\s+|late\s+|mid-?\s*)?"
    rf"{_MONTH}\b",
    re.I,
)
# "this may affect the cache": after "this" (or "by"), a lower-case "may" is the verb unless
# what follows is nothing, punctuation, a number or one of these ("this may we", "by may, or").
_MONTH_FOLLOWERS = (
    "and|or|to|through|until|till|when|while|i|we|you|he|she|they|it|the|a|an|my|our|his|"
    "her|their|of|in|on|at|for|with|from|did|was|were|is|are|this|that|last|next|so|but|then|"
    "before|after|about|during"
)
_AFTER_MONTH = re.compile(rf"\s*(?:$|[^\w\s]|\d|(?:{_MONTH_FOLLOWERS})\b)", re.I)
_YEAR_ONLY = re.compile(
    rf"\b(?:in|during|of|before|after|since|until|early|late|mid-?)\s+{_YEAR}\b", re.I
)
_MONTH_NAMES = "|".join(sorted(_MONTHS, key=len, reverse=True))
# "before June 2023", "after the 5th of May, 2023", "until early 2024": the word before a date.
_DIRECTION = re.compile(
    rf"\b(before|after|since|until|prior\s+to)\s+(?:the\s+)?(?:(?:early|late|mid)-?\s*)?"
    rf"(?:[0-3]?\d(?:st|nd|rd|th)?\s+(?:of\s+)?)?(?:{_MONTH_NAMES}|(?:19|20)\d\d)\b",
    re.I,
)


@dataclass(frozen=True)
class DateQuery:
    year: int | None
    month: int | None
    day: int | None
    # "on", "before", "after" or "since" the range (all but "on" need a year): "since June
    # 2023" takes June in, "after June 2023" starts in July
    direction: str = "on"
    # Two dates joined ("between May 1 and May 10, 2023"): the range runs on to the end of
    # this one's (both with a year)
    through: DateQuery | None = None

    def _bounds(self) -> tuple[date, date] | None:
        if self.year is None:
            return None
        if self.month is None:
            return date(self.year, 1, 1), date(self.year, 12, 31)
        if self.day is None:
            last = calendar.monthrange(self.year, self.month)[1]
            return date(self.year, self.month, 1), date(self.year, self.month, last)
        one = date(self.year, self.month, self.day)
        return one, one

    def matches(self, when: date, slack_days: int) -> bool:
        """Does `when` fall in this range, or at most `slack_days` after it (memories are
        often written a little after what they describe: "last week")? With a direction, is
        it before the range, after it, or in it or after it ("since")?"""
        bounds = self._bounds()
        if self.through is not None:
            last = self.through._bounds()
            if bounds is not None and last is not None:
                bounds = bounds[0], last[1]
        if bounds is not None and self.direction != "on":
            if self.direction == "before":
                return when < bounds[0]
            return when >= bounds[0] if self.direction == "since" else when > bounds[1]
        if self.through is not None and bounds is not None:
            return bounds[0] <= when and when.toordinal() <= bounds[1].toordinal() + slack_days
        for offset in range(min(slack_days, when.toordinal() - 1) + 1):  # none before 1 AD
            probe = date.fromordinal(when.toordinal() - offset)
            if (
                (self.year is None or probe.year == self.year)
                and (self.month is None or probe.month == self.month)
                and (self.day is None or probe.day == self.day)
            ):
                return True
        return False


def _month(text: str) -> int | None:
    if text.isdigit():
        value = int(text)
        return value if 1 <= value <= 12 else None
    return _MONTHS.get(text.lower().rstrip("."))


def _make(year: str, month: str, day: str) -> date | None:
    m = _month(month)
    if m is None:
        return None
    try:
        return date(int(year), m, int(day))
    except ValueError:
        return None


# The line the extraction agent ends each memory it writes with (extraction_prompts.py):
# the memory's date, for the date signals. Its label is in every such memory, so its words
# ("session", "date") are no content: `without_date_label` leaves them out of the index.
SESSION_DATE_LABEL = "Session date:"
_DATE_LABEL = re.compile(rf"^[ \t]*{SESSION_DATE_LABEL}", re.I | re.M)


def without_date_label(text: str) -> str:
    """`text` with the label of each `Session date:` line left out (the date stays)."""
    return _DATE_LABEL.sub(" ", text)


def first_date(text: str) -> date | None:
    """The earliest-positioned full date in `text`, or None."""
    best: tuple[int, date] | None = None
    for pattern in _PATTERNS:
        for match in pattern.finditer(text):
            found = _make(match.group("year"), match.group("month"), match.group("day"))
            if found is not None and (best is None or match.start() < best[0]):
                best = (match.start(), found)
            break
    return best[1] if best else None


def query_date(text: str, today: date | None = None) -> DateQuery | None:
    """The date range a query asks about, if it names one; with `today`, also a time named
    from now ("yesterday", "last week")."""
    joined = _joined_dates(text)
    if joined is not None:
        return joined
    found = _plain_query_date(text)
    if found is None and today is not None:
        return _from_now(text, today)
    if found is None or found.year is None:
        return found
    direction = _DIRECTION.search(text)
    if direction is None:
        return found
    return DateQuery(found.year, found.month, found.day, _side(direction.group(1)))


def _side(word: str) -> str:
    """The side a direction word asks for: before, until, prior to → before; after; since."""
    word = word.lower()
    if word in ("before", "until") or word.startswith("prior"):
        return "before"
    return "since" if word == "since" else "after"


def _plain_query_date(text: str) -> DateQuery | None:
    full = first_date(text)
    if full is not None:
        return DateQuery(full.year, full.month, full.day)
    match = _MONTH_YEAR.search(text)
    if match and _month(match.group("month")):
        return DateQuery(int(match.group("year")), _month(match.group("month")), None)
    match = _DAY_MONTH.search(text)
    if match:
        month = _month(match.group("month") or match.group("month2"))
        day = int(match.group("day") or match.group("day2"))
        if month and 1 <= day <= 31:
            return DateQuery(None, month, day)
    match = next((m for m in _MONTH_ONLY.finditer(text) if not _modal_may(m, text)), None)
    if match and _month(match.group("month")):
        return DateQuery(None, _month(match.group("month")), None)
    match = _YEAR_ONLY.search(text)
    if match:
        return DateQuery(int(match.group("year")), None, None)
    return None


def _modal_may(match: re.Match[str], text: str) -> bool:
    """Whether a month `_MONTH_ONLY` found is the verb "may" ("this may affect the cache")."""
    return (
        match.group("month") == "may"
        and match.group("lead").lower() in ("this", "by")
        and not _AFTER_MONTH.match(text, match.end())
    )


# Two dates joined: "between <a> and <b>", "from <a> to|until|through <b>", "<a> – <b>"; each
# part read from its start ("August 11", "the 11th", "May", "2021", "15 August 2023"). Each
# part starts and ends with a letter or digit, and the spaces around are taken possessively:
# a run of spaces after "from" would otherwise be tried at every split (seconds on a paste).
_END = r"[\w,.-](?:[\w ,.-]{0,23}?[\w,.-])?"
_JOINED = re.compile(
    rf"\b(?:between\s++(?:the\s++)?(?P<a1>{_END})\s++and|from\s++(?:the\s++)?(?P<a2>{_END})"
    r"\s++(?:to|until|till|through|thru))\s++(?:the\s++)?(?P<b>[\w,.-][\w ,.?!-]{0,23})",
    re.I,
)
_DAYS_JOINED = re.compile(  # "May 1-10, 2023", "1–10 May 2023", "May 28 – 3 June 2023"
    rf"\b(?:{_MONTH}\s++(?P<d1>[0-3]?\d)|(?P<d2>[0-3]?\d)(?=\s*+[-–]\s*+[0-3]?\d\s++[A-Za-z]))"
    rf"\s*+[-–]\s*+(?P<end>[0-3]?\d)(?:st|nd|rd|th)?(?:\s++{_MONTH.replace('month', 'month2')})?"
    rf",?\s++{_YEAR}\b",
    re.I,
)
# A year that ends joined dates is one when nothing but a question follows: "from 2021 to
# 2023?" is a time; "from 2019 to 2020 folder", "a timeout from 2000 to 2048 ms" are not.
_YEAR_END = re.compile(
    rf"\s*{_YEAR}\s*(?:$|[?.!,;:)]|(?:and|or|what|when|where|which|who|how|did|was|were|is|are)\b)",
    re.I,
)
_PART = (  # what a part of joined dates may be, read from its start
    *(re.compile(rf"\s*{pattern.pattern}", re.I) for pattern in _PATTERNS),
    re.compile(rf"\s*{_MONTH}\s*,?\s+{_YEAR}\b", re.I),
    re.compile(rf"\s*{_DAY}\s+(?:of\s+)?{_MONTH}(?!\w)", re.I),
    re.compile(rf"\s*{_MONTH}\s+{_DAY}\b", re.I),
    re.compile(rf"\s*{_MONTH}(?!\w)", re.I),
    _YEAR_END,
    re.compile(rf"\s*{_DAY},?\s+{_YEAR}\b"),
    re.compile(rf"\s*{_DAY}\b"),
)


Part = tuple[int | None, int | None, int | None]  # year, month, day: those named


def _part(text: str) -> Part | None:
    """(year, month, day) of a date read from the start of `text`, the parts it names."""
    for pattern in _PART:
        match = pattern.match(text)
        if match is None:
            continue
        found = match.groupdict()
        month = _month(found["month"]) if found.get("month") else None
        if found.get("month") and month is None:
            continue
        year = int(found["year"]) if found.get("year") else None
        day = int(found["day"]) if found.get("day") else None
        if day is not None and not 1 <= day <= 31:
            return None
        return year, month, day
    return None


# A direction word right before joined dates: "before May 1–10, 2023", "since the 3–5 June".
_DIRECTION_AHEAD = re.compile(r"\b(before|after|since|until|prior\s+to)\s+(?:the\s+)?$", re.I)


def _joined_dates(text: str) -> DateQuery | None:
    """The range two joined dates name, when both ends come to a year: the first end may
    take its year and month from the second ("between August 11 and 15, 2023"), the one
    before when that would run backwards ("between December 28 and January 3, 2024"); the
    second end may take its month from the first."""
    found = _joined_ends(text)
    if found is None:
        return None
    (year_a, month_a, day_a), (year_b, month_b, day_b), at = found
    if year_b is None:
        return None
    if month_b is None and day_b is not None:
        month_b = month_a
    if month_b is None and day_b is not None:
        return None
    borrowed = None  # what the first end takes from the second, to step back if backwards
    if month_a is None and day_a is not None:
        month_a, borrowed = month_b, "month"
    if month_a is None and day_a is not None:
        return None
    if year_a is None:
        year_a, borrowed = year_b, borrowed or "year"
    start, end = DateQuery(year_a, month_a, day_a), DateQuery(year_b, month_b, day_b)
    try:
        first, last = start._bounds(), end._bounds()
        if first is not None and last is not None and first[0] > last[1] and borrowed:
            # across a year's or a month's end; not a range written backwards
            crosses = (month_a or 0) > (month_b or 13) if borrowed == "year" else True
            if crosses:
                start = _step_back(start, borrowed)
                first = start._bounds()
    except ValueError:  # "February 30"
        return None
    if first is None or last is None or first[0] > last[1]:
        return None
    direction = _DIRECTION_AHEAD.search(text, max(0, at - 24), at)
    side = _side(direction.group(1)) if direction else "on"
    return replace(start, direction=side, through=end)


def _step_back(query: DateQuery, unit: str) -> DateQuery:
    """`query` a month or a year earlier."""
    assert query.year is not None
    if unit == "year" or query.month is None:
        return replace(query, year=query.year - 1)
    year, month = divmod(query.year * 12 + query.month - 2, 12)
    return replace(query, year=year, month=month + 1)


def _joined_ends(text: str) -> tuple[Part, Part, int] | None:
    """The two ends of joined dates, and where in `text` they start."""
    match = _DAYS_JOINED.search(text)
    if match is not None:
        first_month = _month(match.group("month")) if match.group("month") else None
        last_month = match.group("month2") or match.group("month")
        return (
            (None, first_month, int(match.group("d1") or match.group("d2"))),
            (
                int(match.group("year")),
                _month(last_month) if last_month else None,
                int(match.group("end")),
            ),
            match.start(),
        )
    match = _JOINED.search(text)
    if match is None:
        return None
    first, last = _part(match.group("a1") or match.group("a2")), _part(match.group("b"))
    return (first, last, match.start()) if first is not None and last is not None else None


# A time named from now. Counts in words up to twelve; "a"/"one" and "a couple of" too.
_NUMBER_WORDS = "zero one two three four five six seven eight nine ten eleven twelve"
_COUNTS = {word: i for i, word in enumerate(_NUMBER_WORDS.split())}
_COUNTS |= {"a": 1, "an": 1, "a couple of": 2, "couple of": 2}
_WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_PAST_DAYS = {"week": 6, "month": 30, "year": 365}  # days before today
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
_FROM_NOW = re.compile(
    r"\b(?:(?P<side>since|before|after)\s+)?(?:"
    r"(?P<day>today|tonight|this\s+(?:morning|afternoon|evening)|yesterday|last\s+night"
    r"|the\s+day\s+before\s+yesterday)"
    r"|(?P<other>the\s+other\s+day)"
    r"|(?:a\s+)?(?P<few>few|several)\s+(?P<fewunits>days|weeks|months|years)\s+ago"
    r"|(?P<the>the\s+)?(?P<which>last|this|past|previous)\s+(?P<unit>week|month|year)"
    r"|(?P<count>\d{1,3}|"
    + "|".join(sorted(_COUNTS, key=len, reverse=True))
    + r")\s+(?P<units>days?|weeks?|months?|years?)\s+ago"
    r"|last\s+(?P<weekday>" + "|".join(_WEEKDAYS) + r"))\b",
    re.I,
)


def _from_now(text: str, today: date) -> DateQuery | None:
    """The range a time named from now covers: a day, a calendar week, month or year; with
    "since", on to today; with "before"/"after", earlier or later than it."""
    match = _FROM_NOW.search(text)
    if match is None:
        return None
    first, last = _span_from_now(match, today)
    side = (match.group("side") or "").lower()
    if side == "before":
        return _day(first, "before", None)
    if side == "after":
        return _day(last, "after", None)
    return _day(first, "on", today if side == "since" else last)


def _span_from_now(match: re.Match[str], today: date) -> tuple[date, date]:
    day = " ".join((match.group("day") or "").lower().split())
    if day:
        back = 2 if day.startswith("the") else 1 if day in ("yesterday", "last night") else 0
        one = today - timedelta(days=back)
        return one, one
    if match.group("other"):  # "the other day": a few days back, within the week
        return today - timedelta(days=7), today - timedelta(days=1)
    if match.group("few"):  # "a few weeks ago": two to five of them back
        days = _UNIT_DAYS[match.group("fewunits").lower().rstrip("s")]
        return today - timedelta(days=5 * days), today - timedelta(days=2 * days)
    if match.group("weekday"):
        wanted = _WEEKDAYS[match.group("weekday").lower()]
        back = (today.weekday() - wanted) % 7 or 7  # "last Friday" on a Friday: a week ago
        one = today - timedelta(days=back)
        return one, one
    if match.group("unit"):
        unit, which = match.group("unit").lower(), match.group("which").lower()
        if which == "past" or (which == "last" and match.group("the")):
            # "the past week", "in the last month": today and the days before it
            return today - timedelta(days=_PAST_DAYS[unit]), today
        return _calendar_span(today, unit, 0 if which == "this" else 1)
    count = match.group("count").lower()
    n = int(count) if count.isdigit() else _COUNTS[" ".join(count.split())]
    unit = match.group("units").lower().rstrip("s")
    if unit == "day":
        one = today - timedelta(days=n)
        return one, one
    return _calendar_span(today, unit, n)


def _calendar_span(today: date, unit: str, ago: int) -> tuple[date, date]:
    """The calendar week (from Monday), month or year `ago` of them before today's; the
    current one ends today."""
    if unit == "week":
        monday = today - timedelta(days=today.weekday() + 7 * ago)
        return monday, min(today, monday + timedelta(days=6))
    if unit == "month":
        month_index = today.year * 12 + today.month - 1 - ago
        year, month = divmod(month_index, 12)
        last = calendar.monthrange(year, month + 1)[1]
        return date(year, month + 1, 1), min(today, date(year, month + 1, last))
    year = today.year - ago
    return date(year, 1, 1), min(today, date(year, 12, 31))


def _day(first: date, direction: str, last: date | None) -> DateQuery:
    """A DateQuery from `first` (to `last`, when it is another day)."""
    through = DateQuery(last.year, last.month, last.day) if last and last != first else None
    return DateQuery(first.year, first.month, first.day, direction, through)


# "before the trip", "after her wedding": a time relative to an event the memories describe.
_EVENT = re.compile(
    r"\b(before|after|since|prior\s+to)\s+(?:the|a|an|his|her|their|my|our|your)\s+"
    r"((?:[A-Za-z][\w'-]*\s*){1,3})",
    re.I,
)


def relative_event(text: str, today: date | None = None) -> tuple[str, str] | None:
    """("before"|"after"|"since", the event's words) when the query places itself around an
    event and names no date there (nor, with `today`, a time from now). The ranker reads
    "since" as "after" (both take the event's own day in)."""
    match = _EVENT.search(text)
    if match is None or query_date(text, today) is not None:
        return None
    return _side(match.group(1)), match.group(2).strip()


# What a memory that answers "when?" says besides a full date: a time relative to when it was
# written ("last week", "two years ago"), a weekday, a month, a season, a year.
_TIME_WORDS = (
    r"yesterday|today|tonight|tomorrow|ago|recently|lately|earlier|upcoming|soon|"
    r"weekend|weekends|monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    r"summer|winter|spring|autumn|" + _MONTH_NAMES.replace("|may|", "|") + r"|(?:19|20)\d\d|"
    r"(?:in|last|next|since|until)\s+may|this\s+may(?=\s*(?:$|[^\w\s]|\d|(?:"
    + _MONTH_FOLLOWERS
    + r")\b))|"
    r"(?:last|next|this|past|coming|previous|following)\s+(?:few\s+)?"
    r"(?:week|month|year|night|morning|evening|weekend|time|season|fall|day)s?|"
    r"(?:a|one|two|three|four|five|six|several|few|couple\s+of|\d+)\s+"
    r"(?:days?|weeks?|months?|years?)"
)
# Searched in lower-cased text: re.I over this many alternatives is several times slower.
_TIME_EXPRESSION = re.compile(rf"\b(?:{_TIME_WORDS})\b")
_ASKS_WHEN = re.compile(
    r"^\s*when\b|\b(?:what|which)\s+(?:year|month|day|date|time|week|season)\b|\bhow\s+long\b",
    re.I,
)


def mentions_time(text: str) -> bool:
    """Does `text` say when something happened, beyond a full date (a memory's own date)?
    Asked of every memory indexed, so the common answer comes from one search."""
    text = text.lower()
    if _TIME_EXPRESSION.search(text) is None:
        return False  # nor is there a full date: each holds a year, itself a time expression
    for pattern in _PATTERNS:
        text = pattern.sub(" ", text)
    return _TIME_EXPRESSION.search(text) is not None


def asks_when(query: str) -> bool:
    return _ASKS_WHEN.search(query) is not None
