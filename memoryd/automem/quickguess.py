"""Quick-add without a model: a memory's type and title guessed from its text alone.

    guess_type(text)  -> "reference" | "project" | "feedback" | "user"
    guess_title(text) -> a short title made of the text's meaningful words

The type follows cue words, first match wins: a URL, a host name or "lives at/in" points to an
external system (`reference`); a decision, deadline or "by Friday" is `project`; "don't",
"always", "prefer" and their kin are `feedback`; a text in the first person singular ("I am",
"my") is about the `user`; anything else states a fact of the work (`project`: "Dana owns
billing", "the staging database is reset on Sundays"). The title
is the first clause with its filler dropped ("remember that", a leading "I"/"we", trailing
"the"/"of"), at most `TITLE_WORDS` words and `TITLE_CHARS` characters, cut at a word and never
ending in "…"; a location note becomes "Subject: where".
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from memoryd.automem.manifest import character_start

TITLE_WORDS = 7
TITLE_CHARS = 60

_URL = re.compile(r"\b(?:https?|ftp)://[^\s<>\"')]+", re.IGNORECASE)
# A bare host name with a suffix people use for services: grafana.example.com, db.internal.
# Found from its suffix backwards (`_has_host`): a pattern that starts at the host's first
# label backtracked over a long run like "db-db-db…" from every start, quadratic in its length.
_HOST_SUFFIX = re.compile(
    r"(?<=[a-z0-9-])\."
    r"(?:com|org|net|io|dev|app|cloud|internal|local|lan|corp|intra|example)(?::\d+)?\b",
    re.IGNORECASE,
)
_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
_LABEL_START = re.compile(r"\b[a-z0-9]", re.IGNORECASE)
# Only the start of a long note is read for its type and title: they are about its first words.
GUESS_CHARS = 4096
_LOCATION = re.compile(
    r"\b(?:lives?|living|is|are|sits?|can be found|(?:is |are )?(?:hosted|kept|tracked|filed))"
    r"\s+(?:at|in|on|under)\b(?![\s-]call\b)",  # "is on call" places no one
    re.IGNORECASE,
)
_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_PROJECT = re.compile(
    r"\b(?:we|they|the team|i)\s+(?:have\s+|has\s+)?(?:decided|agreed|chose|settled)\b"
    r"|\bdecision\b|\bdeadlines?\b|\bdue\s+(?:on|by|date)\b|\bfreeze\b|\bmilestone\b"
    rf"|\b(?:by|until|before|on)\s+(?:{_WEEKDAY}|tomorrow|next week|eod|end of (?:the )?"
    r"(?:day|week|month|sprint|quarter))\b",
    re.IGNORECASE,
)
_FEEDBACK = re.compile(
    r"\b(?:don'?t|do not|never|always|prefers?|preferred|avoid|stop|instead of|rather than"
    r"|please|must not|should not|shouldn'?t)\b",
    re.IGNORECASE,
)
_FILLER_START = re.compile(
    r"^(?:(?:please\s+)?(?:remember|note|fyi|reminder|keep in mind)\b[\s:,-]*(?:that\b)?\s*)",
    re.IGNORECASE,
)
# A stop followed by a lower-case word ends no sentence: "run bazel test //... first", "e.g. ruff".
SENTENCE_END = r"(?<=[.!?])\s(?![a-z])"
_CLAUSE_END = re.compile(rf"(?<=;)\s|{SENTENCE_END}|\s[—–]\s|\s-\s|\n")
_WORD = re.compile(r"[^\s,;()\[\]{}\"“”]+")
_DECISION = re.compile(
    r"^(?:we|they|the team|i)\s+(?:have\s+|has\s+)?(?:decided|agreed|settled)\s+(?:to|that|on)?\s*",
    re.IGNORECASE,
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself)\b", re.IGNORECASE)
_PLAIN_WORD = re.compile(r"[a-z][a-z'-]*")
_SUBJECT_PRONOUNS = frozenset({"i", "we", "i'm", "we're", "i've", "we've"})
_BE = frozenset({"am", "are", "was", "were"})
_LEADING_ARTICLES = frozenset({"the", "a", "an", "our", "my", "their", "this", "that"})
# Words a title should not end on: it would read as cut off.
_WEAK_ENDINGS = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "for",
        "and",
        "or",
        "but",
        "in",
        "on",
        "at",
        "by",
        "with",
        "from",
        "that",
        "this",
        "is",
        "are",
        "was",
        "were",
        "be",
        "our",
        "my",
        "your",
        "their",
        "its",
        "as",
        "than",
        "then",
        "so",
        "if",
        "when",
        "while",
        "after",
        "before",
        "into",
        "onto",
    ]
)


def guess_type(text: str) -> str:
    text = text[:GUESS_CHARS]
    if _URL.search(text) or _has_host(text) or _LOCATION.search(text):
        return "reference"
    if _PROJECT.search(text):
        return "project"
    if _FEEDBACK.search(text):
        return "feedback"
    return "user" if _FIRST_PERSON.search(text.replace("\u2019", "'")) else "project"


def guess_title(text: str) -> str:
    """A short title for the memory; "note" when the text has no words at all."""
    text = text[:GUESS_CHARS]
    clause = _first_clause(_FILLER_START.sub("", _CONTROL.sub(" ", text).strip()))
    located = _location_title(clause)
    if located:
        return located
    decided = _DECISION.match(clause)
    if decided and clause[decided.end() :].strip():
        return "Decision: " + _fit(_words(clause[decided.end() :]), capitalize=False)
    words = _words(clause)
    if len(words) > 1 and words[0].lower() in _SUBJECT_PRONOUNS:
        words = words[1:]
        if len(words) > 1 and words[0].lower() in _BE:
            words = words[1:]
    if len(words) > 1 and words[0].lower() in ("the", "a", "an"):
        words = words[1:]
    if len(words) > TITLE_WORDS and "," in clause:
        # Too long: the part before its first comma is a whole phrase, when it says enough.
        dropped = len(_words(clause)) - len(words)  # the pronoun or article left out above
        before_comma = words[: max(0, len(_words(clause.split(",", 1)[0])) - dropped)]
        if 4 <= len(before_comma) <= TITLE_WORDS:
            words = before_comma
    return _fit(words) or "note"


def _has_host(text: str) -> bool:
    """A host name ending in a service suffix: the label before the suffix has a letter or
    digit at a word start. Each label is walked once (labels end at a dot), so this is linear."""
    for match in _HOST_SUFFIX.finditer(text):
        start = end = match.start()
        while start > 0 and text[start - 1] in _LABEL_CHARS:
            start -= 1
        if _LABEL_START.search(text, start, end):
            return True
    return False


def _words(text: str) -> list[str]:
    words = (_shorten_url(w.rstrip(":")).strip(".!?'\"") for w in _WORD.findall(text))
    return [w for w in words if w]


def _first_clause(text: str) -> str:
    for part in _CLAUSE_END.split(text):
        if part.strip(" .!?;"):
            return part.strip()
    return text


def _shorten_url(word: str) -> str:
    # A URL names its host; the path rarely means anything in a title.
    if _URL.fullmatch(word):
        return urlsplit(word).hostname or word
    return word


def _location_title(clause: str) -> str | None:
    """ "The staging DB lives at db.internal:5432" -> "Staging DB: db.internal:5432"."""
    match = _LOCATION.search(clause)
    if match is None:
        return None
    subject = _words(clause[: match.start()])
    while subject and subject[0].lower() in _LEADING_ARTICLES:
        subject = subject[1:]
    place = [w for w in _words(clause[match.end() :]) if w.lower() not in _LEADING_ARTICLES]
    head = _fit(subject, limit=4)
    if not head or not place:
        return None
    title = f"{head}: {_fit(place, limit=3, capitalize=False)}"
    return title if len(title) <= TITLE_CHARS else f"{head} location"


def _fit(words: list[str], limit: int = TITLE_WORDS, *, capitalize: bool = True) -> str:
    """At most `limit` words and `TITLE_CHARS` characters, not ending on a weak word."""
    chosen = words[:limit]
    while len(chosen) > 1 and len(" ".join(chosen)) > TITLE_CHARS:
        chosen.pop()
    if len(chosen) < len(words):
        # Cut short: end before the last joining word, so the title is a whole phrase.
        joins = [i for i, w in enumerate(chosen) if i >= 3 and w.lower() in _WEAK_ENDINGS]
        if joins:
            chosen = chosen[: joins[0]]
    while len(chosen) > 1 and chosen[-1].lower() in _WEAK_ENDINGS:
        chosen.pop()
    title = " ".join(chosen)
    if len(title) > TITLE_CHARS:
        # One word longer than that: cut where a character starts (not inside an emoji
        # sequence, a flag, or a letter and its accent: `manifest.one_line`'s cut).
        title = title[: character_start(title, TITLE_CHARS)]
    # A plain word is capitalized; a host name or identifier is kept as written.
    if capitalize and chosen and _PLAIN_WORD.fullmatch(chosen[0]):
        title = title[:1].upper() + title[1:]
    return title
