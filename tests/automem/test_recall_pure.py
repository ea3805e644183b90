"""Recall helpers: staleness, parsing the selector's answer, quick-add derivation."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.automem import memfile, quickadd, quickguess
from memoryd.automem.manifest import MemoryHeader, format_manifest
from memoryd.automem.recall import pick as recall


def test_staleness_threshold() -> None:
    now = 1_000_000.0
    assert recall.staleness(now - 86_000, now) == (False, None)
    stale, note = recall.staleness(now - 86_401, now)
    assert stale
    assert note is not None
    assert note.startswith("This memory is 1 day old; verify")
    assert "3 days old" in (recall.staleness(now - 3 * 86_400 - 5, now)[1] or "")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"selected": ["a.md", "b.md"]}', ["a.md", "b.md"]),
        ('Sure! {"selected": []} done', []),
        ("not json", None),
        ('{"selected": "a.md"}', None),
        ('{"selected": [1]}', None),
        ("[1, 2]", None),
        ('{"selected": ["a.md"', None),
    ],
)
def test_parse_selection(text: str, expected: list[str] | None) -> None:
    assert recall.parse_selection(text) == expected


def test_a_reply_nested_past_the_parsers_depth_or_all_braces_is_no_selection() -> None:
    # Found by a bug hunt: nesting deeper than the parser recurses failed recall with
    # -32603 (a RecursionError), and a megabyte of braces was parsed from each one.
    assert recall.parse_selection('{"a":' * 5000 + "1" + "}" * 5000) is None
    braces = '{"a": ' * (recall.MAX_SELECTION_BRACES + 1) + '{"selected": ["a.md"]}'
    assert recall.parse_selection(braces) is None  # read no further than its bound
    assert recall.parse_selection('{"a": ' * 3 + '{"selected": ["a.md"]}') == ["a.md"]


def test_manifest_lines_have_no_body() -> None:
    h = MemoryHeader(Path("/m/a.md"), "Name", "Desc", "user", 0.0, False, None, "a.md")
    bad = MemoryHeader(Path("/m/b.md"), "b", "", None, 86_400.0, False, "no frontmatter", "b.md")
    assert (
        format_manifest([h, bad])
        == "- a.md [user] (1970-01-01) Name: Desc\n- b.md [invalid] (1970-01-02) b"
    )
    # a file system may keep a time past the year 9999: the line says so, the manifest is made
    far = MemoryHeader(Path("/m/c.md"), "c", "", "user", 1e12, False, None, "c.md")
    assert format_manifest([far]) == "- c.md [user] (unknown date) c"


def test_derive_from_text() -> None:
    q = quickadd.derive(
        "The staging database is at db-staging.internal. Ask Dana for access.", None
    )
    assert q.type == "reference"
    assert q.name == "Staging database: db-staging.internal"
    assert q.description == "The staging database is at db-staging.internal."
    assert q.body.endswith("Ask Dana for access.")
    assert q.derived_by == "local"


def test_derived_and_model_fields_drop_control_characters() -> None:
    q = quickadd.derive("Ring the bell\x07 before\x1b[0m deploys. Always.", None)
    assert "\x07" not in q.name + q.description
    assert "\x1b" not in q.name + q.description
    assert q.description == "Ring the bell before [0m deploys."
    assert "\x07" in q.body  # the body is the user's text as given
    memfile.check_fields(q.type, q.name, q.description, q.body)
    m = quickadd.parse_model_choice(
        '{"type": "user", "name": "Bell\\u0007", "description": "d\\u007f x"}', "t", None
    )
    assert m is not None
    assert (m.name, m.description) == ("Bell", "d x")


def test_a_stop_before_a_lower_case_word_ends_no_sentence() -> None:
    q = quickadd.derive("The monorepo uses Bazel; run bazel test //... before a PR", None)
    assert q.description == "The monorepo uses Bazel; run bazel test //... before a PR"
    q = quickadd.derive("Lint with e.g. ruff before pushing. Then run mypy.", None)
    assert q.description == "Lint with e.g. ruff before pushing."


def test_derive_long_text_is_cut_at_words_without_an_ellipsis() -> None:
    text = "word " * 100
    q = quickadd.derive(text, "project")
    assert q.type == "project"
    assert q.name == "Word word word word word word word"
    assert len(q.description) <= 150


@pytest.mark.parametrize(
    ("text", "kind", "name"),
    [
        ("I prefer small, focused commits", "feedback", "Prefer small focused commits"),
        ("Don't mock the database in integration tests", "feedback", None),
        ("Always run the linter before pushing", "feedback", None),
        (
            "We decided to freeze merges after March 5",
            "project",
            "Decision: freeze merges after March 5",
        ),
        ("Remember that the release deadline is Friday", "project", "Release deadline is Friday"),
        ("The API review must be done by Friday", "project", None),
        ("Grafana dashboards: https://grafana.example.com/d/abc?x=1", "reference", None),
        (
            "The on-call runbook lives in Confluence, space OPS",
            "reference",
            "On-call runbook: Confluence space OPS",
        ),
        (
            "Bugs are tracked in the Linear project INGEST",
            "reference",
            "Bugs: Linear project INGEST",
        ),
        ("Dana owns the billing service", "project", "Dana owns the billing service"),
        ("I am a data scientist learning Go", "user", "Data scientist learning Go"),
        ("My timezone is CET; mornings are best for reviews", "user", None),
        ("I\u2019m new to the frontend code", "user", None),
        (
            "Deploys happen on Thursdays after the QA sign-off.",
            "project",
            "Deploys happen on Thursdays",
        ),
        ("The staging database is reset every Sunday night", "project", None),
        # "I" inside a word or a name is not the first person.
        ("Imports in the iOS app go through the CI mirror", "project", None),
        # Too long for a title: the part before the comma, not three words cut at "the".
        (
            "Deploys go through the canary cluster first, then all regions",
            "project",
            "Deploys go through the canary cluster first",
        ),
        # Being on call is not a place: no "Payments team: call for checkout".
        (
            "The payments team is on call for the checkout flow; page them through PagerDuty",
            "project",
            "Payments team",
        ),
    ],
)
def test_zero_model_type_and_title(text: str, kind: str, name: str | None) -> None:
    q = quickadd.derive(text, None)
    assert q.type == kind
    if name is not None:
        assert q.name == name
    assert not q.name.endswith("…")
    assert 0 < len(q.name) <= quickguess.TITLE_CHARS
    assert len(q.name.split()) <= quickguess.TITLE_WORDS + 1  # "Decision:" is not a text word
    memfile.check_fields(q.type, q.name, q.description, q.body)


def test_a_url_title_names_its_host() -> None:
    q = quickadd.derive("https://docs.example.com/api/v2/reference/index.html", None)
    assert (q.type, q.name) == ("reference", "docs.example.com")


def test_explicit_type_and_name_win() -> None:
    q = quickadd.derive("Always use tabs", "user", "Indentation")
    assert (q.type, q.name) == ("user", "Indentation")
    m = quickadd.parse_model_choice(
        '{"type": "reference", "name": "G", "description": "d"}', "t", None, "Mine"
    )
    assert m is not None
    assert (m.type, m.name) == ("reference", "Mine")


def test_parse_model_choice() -> None:
    good = quickadd.parse_model_choice(
        '{"type": "reference", "name": "Grafana", "description": "dashboards"}', "t", None
    )
    assert good is not None
    assert (good.type, good.name, good.derived_by) == ("reference", "Grafana", "model")
    forced = quickadd.parse_model_choice(
        '{"type": "reference", "name": "G", "description": "d"}', "t", "feedback"
    )
    assert forced is not None
    assert forced.type == "feedback"
    assert (
        quickadd.parse_model_choice('{"type": "bogus", "name": "G", "description": "d"}', "t", None)
        is None
    )
    assert quickadd.parse_model_choice("nope", "t", None) is None
