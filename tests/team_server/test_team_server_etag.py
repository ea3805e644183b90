"""If-Match / If-None-Match parsing."""

from __future__ import annotations

from memoryd_team.etag import if_none_match_hits, parse_if_match
from memoryd_team.storage.base import IfMatch


def test_absent_or_blank_if_match_is_none() -> None:
    assert parse_if_match(None) is None
    assert parse_if_match("   ") is None


def test_star_and_lists() -> None:
    assert parse_if_match("*") == IfMatch(any=True)
    assert parse_if_match('"a", "b"') == IfMatch(frozenset({'"a"', '"b"'}))
    assert parse_if_match(' "a" ,W/"b"') == IfMatch(frozenset({'"a"'}))  # weak never matches


def test_unquoted_value_is_one_opaque_tag() -> None:
    assert parse_if_match("abc") == IfMatch(frozenset({'"abc"'}))
    # A malformed list matches nothing (→ 412 and a refresh), rather than half of it.
    malformed = parse_if_match('"a", junk')
    assert malformed is not None
    assert '"a"' not in malformed.etags
    assert not malformed.any


def test_if_none_match_uses_weak_comparison() -> None:
    assert if_none_match_hits('"a"', '"a"')
    assert if_none_match_hits('W/"a"', '"a"')
    assert if_none_match_hits('"x", "a"', '"a"')
    assert if_none_match_hits("*", '"a"')
    assert not if_none_match_hits('"b"', '"a"')
    assert not if_none_match_hits(None, '"a"')
    assert not if_none_match_hits("", '"a"')


def test_empty_list_elements_are_skipped() -> None:
    # RFC 9110 §5.6.1.2: a recipient accepts empty elements; they were read as one opaque tag.
    both = IfMatch(frozenset({'"a"', '"b"'}))
    assert parse_if_match('"a",, "b"') == both
    assert parse_if_match(', "a", "b"') == both
    assert parse_if_match('"a", "b",') == both
    assert parse_if_match(' ,\t"a" ,  , "b"\t, ') == both
    assert if_none_match_hits(', W/"a",', '"a"')
    # Not a list of tags, however many commas: still one opaque tag that matches nothing.
    assert parse_if_match('"a" "b"') == IfMatch(frozenset({'"a" "b"'}))
    assert parse_if_match(",") == IfMatch(frozenset({'","'}))
