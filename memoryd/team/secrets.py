"""Secret scanner: finds credentials in a team-memory entry before it leaves the machine.

The daemon runs it on every entry before every push and the team server on every PUT, so it is
built for speed: one Aho-Corasick pass over a lowercased copy finds every rule keyword at once,
a rule whose keywords are absent never runs its regex, and a rule whose matches always contain a
keyword only runs on the few lines around the keyword hits. The rules themselves live in
`memoryd.team.secret_rules`.

    scan(text) -> list[Finding]       every finding, in text order
    first_finding(text)               the first one, or None
    key_text(key)                     what is scanned of an entry key (its name is data too)
    redact(text)                      every finding replaced by "[REDACTED:<rule_id>]"

A `Finding` names the rule and where the secret is; it never carries the secret itself, so it
is safe to log, to show, and to send in a `team/secret_blocked` notification.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import ahocorasick_rs

from memoryd.team.secret_rules import GLOBAL_ALLOW, GLOBAL_STOPWORDS, RULES, Rule
from memoryd.team.secret_views import Rewrite, rewrites

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

__all__ = ["RULES", "RULE_COUNT", "Finding", "first_finding", "key_text", "redact", "scan"]

RULE_COUNT: int = len(RULES)

# A local rule's match starts at most this far before its keyword (gitleaks' identifier
# prefix is `[\w.-]{0,50}`) and ends within this many lines after it.
_LOOKBEHIND_CHARS = 64
_FOLLOWING_LINES = 3
_IDENTIFIER_CHARS = 50
# Past this many keyword hits, windows cover most of the text: scan it whole instead.
_MAX_WINDOWS = 256


@dataclass(frozen=True)
class Finding:
    rule_id: str  # e.g. "anthropic-api-key"
    description: str  # human text, e.g. "Anthropic API key"
    line: int  # 1-based line number of the secret's first character
    start: int  # character offsets of the secret in the scanned text
    end: int


def shannon_entropy(text: str) -> float:
    """Bits per character of `text` (0.0 for the empty string)."""
    if not text:
        return 0.0
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in Counter(text).values())


class _Index:
    """Keyword → rules, compiled once: the prefilter's automaton and the rules it gates."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules = tuple(rules)
        self.always = tuple(r for r in self.rules if not r.keywords)
        by_keyword: dict[str, list[Rule]] = defaultdict(list)
        for rule in self.rules:
            for keyword in rule.keywords:
                by_keyword[keyword].append(rule)
        self.keywords = sorted(by_keyword)
        self.rules_for = [tuple(by_keyword[k]) for k in self.keywords]
        self.automaton = ahocorasick_rs.AhoCorasick(self.keywords)


_INDEX = _Index(RULES)


def _owned(rules: Iterable[Rule]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What vendor rules own, so a catch-all rule can stand down: the distinctive keywords a
    vendor token carries (looked for in the secret) and declared identifiers (looked for in
    the whole match, e.g. npm's `_authToken`)."""
    in_secret: set[str] = set()
    in_match: set[str] = set()
    for rule in rules:
        if rule.defers or rule.family in ("generic", "network"):
            continue
        in_match.update(rule.owns)
        in_secret.update(k for k in rule.keywords if len(k) >= 4)
    return tuple(sorted(in_secret)), tuple(sorted(in_match))


_OWNED_IN_SECRET, _OWNED_IN_MATCH = _owned(RULES)
# One automaton and one regex for what every candidate is tested against: testing each of the
# 235 owned keywords and 14 allow patterns in turn took most of a keyword-dense scan.
_OWNED_IN_SECRET_AC = ahocorasick_rs.AhoCorasick(_OWNED_IN_SECRET) if _OWNED_IN_SECRET else None
_GLOBAL_ALLOW = (
    re.compile("|".join(f"(?:{p.pattern})" for p in GLOBAL_ALLOW)) if GLOBAL_ALLOW else None
)
_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def _lowered(text: str) -> str:
    """Lowercase without moving any character: keyword offsets must be text offsets."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    # A few characters (e.g. "İ") lowercase to two; keywords are ASCII, so ASCII is enough.
    return text.translate(_ASCII_LOWER)


def _windows(text: str, hits: list[int]) -> list[tuple[int, int]]:
    """Merged spans around keyword hits: the hit's line (from a little before the keyword)
    through a few following lines."""
    spans: list[tuple[int, int]] = []
    for hit in sorted(hits):
        line_start = text.rfind("\n", 0, hit) + 1
        start = max(line_start, hit - _LOOKBEHIND_CHARS)
        end = hit
        for _ in range(_FOLLOWING_LINES + 1):
            newline = text.find("\n", end)
            if newline < 0:
                end = len(text)
                break
            end = newline + 1
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    return spans


def _secret_span(rule: Rule, match: re.Match[str]) -> tuple[int, int]:
    if rule.group:
        return match.span(rule.group)
    for index in range(1, (match.re.groups or 0) + 1):
        if match.group(index):
            return match.span(index)
    return match.span()


def _line_of(text: str, start: int) -> str:
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", start)
    return text[line_start : line_end if line_end >= 0 else len(text)]


def _identifier_start(text: str, hit: int) -> int:
    """Where the identifier around a keyword begins (gitleaks' 50-character prefix)."""
    start = hit
    while start > 0 and hit - start < _IDENTIFIER_CHARS and _is_identifier_char(text[start - 1]):
        start -= 1
    return start


def _is_identifier_char(char: str) -> bool:
    return char.isalnum() or char in "_.-"


_STOPWORDS: dict[str, ahocorasick_rs.AhoCorasick | None] = {}


def _has_stopword(rule: Rule, lowered: str) -> bool:
    """Whether a global or the rule's stopword occurs in the (lowercased) secret: one automaton
    pass, where testing each of generic-api-key's ~1,400 stopwords in turn took most of a scan
    of a text full of `api_key: …` lines."""
    try:
        automaton = _STOPWORDS[rule.id]
    except KeyError:
        # Built at first use (a race builds it twice, harmlessly): most rules never need it.
        words = sorted({*GLOBAL_STOPWORDS, *rule.stopwords})
        automaton = _STOPWORDS[rule.id] = ahocorasick_rs.AhoCorasick(words) if words else None
    return automaton is not None and bool(automaton.find_matches_as_indexes(lowered))


def _accepted(rule: Rule, text: str, match_start: int, match_text: str, secret: str) -> bool:
    """The checks after the regex: entropy, digits, validators and allowlists."""
    if rule.entropy and shannon_entropy(secret) <= rule.entropy:
        return False
    if rule.need_digit and not any(c.isdigit() for c in secret):
        return False
    if rule.validate is not None and not rule.validate(secret):
        return False
    lowered = secret.lower()
    if rule.defers and (
        (_OWNED_IN_SECRET_AC is not None and _OWNED_IN_SECRET_AC.find_matches_as_indexes(lowered))
        or any(owned in match_text.lower() for owned in _OWNED_IN_MATCH)
    ):
        # A vendor rule knows this token's exact shape; if it did not report it, nor do we.
        return False
    if _GLOBAL_ALLOW is not None and _GLOBAL_ALLOW.search(secret):
        return False
    if _has_stopword(rule, lowered):
        return False
    for target, pattern in rule.allow:
        subject = (
            secret
            if target == "secret"
            else match_text
            if target == "match"
            else _line_of(text, match_start)
        )
        if pattern.search(subject):
            return False
    return True


def _candidates(rule: Rule, text: str, hits: list[int]) -> Iterator[tuple[int, re.Match[str]]]:
    """(match start, match) for every regex match, run the cheapest way the rule allows."""
    if rule.anchored is not None and hits:
        for hit in sorted(set(hits)):
            match = rule.anchored.match(text, hit)
            if match is not None:
                yield _identifier_start(text, hit), match
        return
    spans = (
        _windows(text, hits)
        if rule.local and hits and len(hits) <= _MAX_WINDOWS
        else [(0, len(text))]
    )
    for pos, endpos in spans:
        for match in rule.pattern.finditer(text, pos, endpos):
            yield match.start(), match


def _run_rule(rule: Rule, text: str, hits: list[int]) -> Iterator[tuple[int, int]]:
    for match_start, match in _candidates(rule, text, hits):
        start, end = _secret_span(rule, match)
        if start < end and _accepted(
            rule, text, match_start, text[match_start : match.end()], text[start:end]
        ):
            yield start, end


def _raw_findings(text: str, skip: frozenset[str] = frozenset()) -> list[tuple[int, int, Rule]]:
    """(start, end, rule) of every rule's finding in `text` as written, but the rules `skip`."""
    lowered = _lowered(text)
    hits: dict[str, list[int]] = defaultdict(list)
    for keyword_index, start, _end in _INDEX.automaton.find_matches_as_indexes(
        lowered, overlapping=True
    ):
        for rule in _INDEX.rules_for[keyword_index]:
            hits[rule.id].append(start)
    found: list[tuple[int, int, Rule]] = []
    for rule in (*_INDEX.always, *(r for r in _INDEX.rules if r.id in hits)):
        if rule.id in skip:
            continue
        found.extend((start, end, rule) for start, end in _run_rule(rule, text, hits[rule.id]))
    return found


# The catch-all rules, not run on rewritten text (see `_rewritten_findings`); they are also
# the costliest to run (`generic-api-key` wakes at every "key", "api" or "auth").
_NOT_ON_REWRITTEN = frozenset(r.id for r in RULES if r.defers or r.family == "network")


def _rewritten_findings(text: str) -> list[tuple[int, int, Rule, str]]:
    """Findings of a secret written in pieces or encoded (`secret_views`), in `text`'s offsets
    (the whole encoded or split span), with how it was written. The rules run on the lines
    around each change, and a finding counts only when it crosses a change. The catch-all
    rules are left out: a token with a shape of its own, whole only when rewritten, is one."""
    found: list[tuple[int, int, Rule, str]] = []
    for view in rewrites(text):
        for chunk_start, chunk_end in _changed_lines(view):
            chunk = view.text[chunk_start:chunk_end]
            for start, end, rule in _raw_findings(chunk, _NOT_ON_REWRITTEN):
                kinds = view.kinds_within(chunk_start + start, chunk_start + end)
                if kinds:
                    found.append(
                        (
                            view.back_start(chunk_start + start),
                            view.back_end(chunk_start + end),
                            rule,
                            f"{rule.description} ({', '.join(sorted(kinds))})",
                        )
                    )
    return found


# Changed lines closer than this are scanned as one chunk: a text changed on every line (URLs
# full of `%20`) is scanned once, not once a line.
_CHUNK_GAP = 4096


def _changed_lines(view: Rewrite) -> list[tuple[int, int]]:
    """Merged spans of the view's lines holding a change, each with the line before it (an
    identifier a rule wants may stand there, as in YAML's `key: >-`)."""
    text = view.text
    spans: list[tuple[int, int]] = []
    for v_start, v_end in zip(view.view_starts, view.view_ends, strict=True):
        if spans and v_end < spans[-1][1]:
            continue  # on lines taken already (looking for them again was quadratic)
        start = text.rfind("\n", 0, max(0, text.rfind("\n", 0, v_start))) + 1
        newline = text.find("\n", v_end)
        end = len(text) if newline < 0 else newline + 1
        if spans and start <= spans[-1][1] + _CHUNK_GAP:
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    return spans


# A rewritten finding is matched to the findings it overlaps through buckets of this many
# characters, each listing the findings touching it: searching every finding for each one
# was quadratic (12,000 keys as written beside 12,000 split ones, 756 KB: 22 s).
_BUCKET_CHARS = 256

_Found = tuple[int, int, Rule, str]  # start, end, rule, description


def _buckets(start: int, end: int) -> range:
    return range(start // _BUCKET_CHARS, max(start, end - 1) // _BUCKET_CHARS + 1)


def _merge_rewritten(found: list[_Found], rewritten: Iterable[_Found]) -> None:
    """Each rewritten finding into `found`: merged into the first (in `found`'s order) of its
    rule it overlaps, taking its description, else added."""
    index: dict[tuple[str, int], list[int]] = defaultdict(list)

    def enter(i: int, buckets: Iterable[int]) -> None:
        for bucket in buckets:
            index[(found[i][2].id, bucket)].append(i)

    for i, (start, end, _rule, _description) in enumerate(found):
        enter(i, _buckets(start, end))
    last: tuple[int, int, str, int] | None = None  # the previous one and where it went
    for start, end, rule, description in rewritten:
        if last is not None and last[:3] == (start, end, rule.id):
            # Again (each key of one decoded blob spans the whole blob): the same place.
            found[last[3]] = (*found[last[3]][:3], description)
            continue
        overlapping = [
            i
            for bucket in _buckets(start, end)
            for i in index.get((rule.id, bucket), ())
            if found[i][0] < end and start < found[i][1]
        ]
        if not overlapping:
            found.append((start, end, rule, description))
            same = len(found) - 1
            enter(same, _buckets(start, end))
        else:
            same = min(overlapping)
            old = found[same]
            found[same] = (min(start, old[0]), max(end, old[1]), rule, description)
            grown = _buckets(found[same][0], found[same][1])
            enter(same, (b for b in grown if b not in _buckets(old[0], old[1])))
        last = (start, end, rule.id, same)


def scan(text: str) -> list[Finding]:
    """Every finding in `text`, ordered by position then rule id; one per rule and span.

    A secret also found rewritten (joined across lines, decoded) where the text itself has one
    of the same rule (the first line of a wrapped key) is one finding, spanning both."""
    found = [(start, end, rule, rule.description) for start, end, rule in _raw_findings(text)]
    _merge_rewritten(found, _rewritten_findings(text))
    seen: set[tuple[int, int, str]] = set()
    findings: list[Finding] = []
    line, counted = 1, 0  # findings come in text order: count each newline once, not per finding
    for start, end, rule, description in sorted(found, key=lambda f: (f[0], f[1], f[2].id)):
        key = (start, end, rule.id)
        if key in seen:
            continue
        seen.add(key)
        line += text.count("\n", counted, start)
        counted = start
        findings.append(Finding(rule.id, description, line, start, end))
    return findings


def first_finding(text: str) -> Finding | None:
    """The first finding in text order, or None when `text` is clean."""
    findings = scan(text)
    return findings[0] if findings else None


def key_text(key: str) -> str:
    """What is scanned of an entry key or a file's name (a `/`-separated path), so a name is
    scanned like content: the key, then each segment and each segment without its extension,
    one per line, and each stem's parts split at `_` and `-`. A token used as a file name
    (`<token>.md`, `ci_<token>.md`) then stands alone as a word, as the rules' word boundaries
    want. Offsets of a finding in it mean nothing; its rule does."""
    lines = [key]
    parts: list[str] = []
    for segment in key.split("/"):
        lines.append(segment)
        stem, dot, _ = segment.rpartition(".")
        if dot and stem:
            lines.append(stem)
        parts += [part for part in re.split(r"[_-]", stem if dot and stem else segment) if part]
    return "\n".join(lines + parts) + "\n"


def redact(
    text: str, *, findings: Iterable[Finding] | None = None, placeholder: str | None = None
) -> str:
    """`text` with every finding replaced by `[REDACTED:<rule_id>]`, or by `placeholder`.

    `findings` (in text order) are some of `scan(text)`'s, when not all are to go. Overlapping
    findings are merged into one replacement named after the first of them, so no part of any
    secret survives.
    """
    merged: list[tuple[int, int, str]] = []
    for finding in scan(text) if findings is None else findings:
        if merged and finding.start < merged[-1][1]:
            start, end, rule_id = merged[-1]
            merged[-1] = (start, max(end, finding.end), rule_id)
        else:
            merged.append((finding.start, finding.end, finding.rule_id))
    parts: list[str] = []
    cursor = 0
    for start, end, rule_id in merged:
        parts.append(text[cursor:start])
        parts.append(placeholder if placeholder is not None else f"[REDACTED:{rule_id}]")
        cursor = end
    parts.append(text[cursor:])
    return "".join(parts)
