"""The pure write plan: ETags, preconditions, upsert, versions, the entry limit."""

from __future__ import annotations

import pytest

from memoryd.team.protocol import checksum
from memoryd_team.storage.base import IfMatch, KeyCollision, PreconditionFailed, TooManyEntries
from memoryd_team.storage.plan import EMPTY_ETAG, Current, etag_for, plan_put, precondition_holds


def _current(**contents: str) -> dict[str, Current]:
    return {key: Current(checksum(text), 1) for key, text in contents.items()}


def test_etag_is_order_independent_and_content_sensitive() -> None:
    a = etag_for({"a.md": checksum("1"), "b.md": checksum("2")})
    b = etag_for({"b.md": checksum("2"), "a.md": checksum("1")})
    assert a == b
    assert a != etag_for({"a.md": checksum("1"), "b.md": checksum("3")})
    assert a != etag_for({"a.md": checksum("1")})
    assert a.startswith('"')
    assert a.endswith('"')
    assert len(a) == 66


def test_etag_does_not_confuse_key_boundaries() -> None:
    assert etag_for({"ab": checksum("x")}) != etag_for({"a": checksum("x"), "b": checksum("x")})


def test_preconditions() -> None:
    tag = '"t"'
    assert precondition_holds(EMPTY_ETAG, False, None)
    assert not precondition_holds(tag, True, None)
    assert precondition_holds(tag, True, IfMatch(frozenset({tag})))
    assert not precondition_holds(tag, True, IfMatch(frozenset({'"u"'})))
    assert precondition_holds(tag, True, IfMatch(any=True))
    assert not precondition_holds(EMPTY_ETAG, False, IfMatch(any=True))
    assert precondition_holds(EMPTY_ETAG, False, IfMatch(frozenset({EMPTY_ETAG})))


def test_plan_writes_only_changed_keys_with_next_versions() -> None:
    current = {"a.md": Current(checksum("1"), 3), "b.md": Current(checksum("2"), 1)}
    etag = etag_for({k: v.checksum for k, v in current.items()})
    plan = plan_put(
        current,
        {"a.md": "1", "b.md": "two", "c.md": "3"},
        IfMatch(frozenset({etag})),
        max_entries=None,
    )
    assert [(w.key, w.version) for w in plan.writes] == [("b.md", 2), ("c.md", 1)]
    assert plan.unchanged == ("a.md",)
    assert plan.etag == etag_for(
        {"a.md": checksum("1"), "b.md": checksum("two"), "c.md": checksum("3")}
    )


def test_stale_precondition_raises_with_the_current_etag() -> None:
    current = _current(**{"a.md": "1"})
    with pytest.raises(PreconditionFailed) as caught:
        plan_put(current, {"a.md": "2"}, IfMatch(frozenset({'"old"'})), max_entries=None)
    assert caught.value.current_etag == etag_for({"a.md": checksum("1")})


def test_precondition_can_be_skipped_for_admin_restore() -> None:
    plan = plan_put(_current(a="1"), {"a": "0"}, None, max_entries=None, check_precondition=False)
    assert len(plan.writes) == 1


def test_entry_limit_counts_the_result_and_allows_updates_at_or_over_it() -> None:
    current = _current(a="1", b="2")
    tag = IfMatch(any=True)
    with pytest.raises(TooManyEntries) as caught:
        plan_put(current, {"c": "3", "d": "4"}, tag, max_entries=3)
    assert (caught.value.max_entries, caught.value.would_have) == (3, 4)
    assert len(plan_put(current, {"c": "3"}, tag, max_entries=3).writes) == 1
    # A limit lowered below an existing repo's size still lets its entries be updated.
    assert len(plan_put(current, {"a": "new"}, tag, max_entries=1).writes) == 1


def test_precondition_is_checked_before_the_limit() -> None:
    with pytest.raises(PreconditionFailed):
        plan_put(_current(a="1"), {"b": "2", "c": "3"}, None, max_entries=1)


def test_a_new_key_no_folder_could_hold_beside_the_others_is_refused() -> None:
    current = _current(**{"Notes.md": "1", "a.md": "2"})
    etag = IfMatch(frozenset({etag_for({k: v.checksum for k, v in current.items()})}))
    with pytest.raises(KeyCollision) as refused:
        plan_put(current, {"b.md": "new", "notes.md": "twin"}, etag, max_entries=None)
    assert (refused.value.key, refused.value.other) == ("notes.md", "Notes.md")
    # A stale If-Match is told first; the collision before the entry limit.
    with pytest.raises(PreconditionFailed):
        plan_put(current, {"notes.md": "twin"}, IfMatch(frozenset({'"old"'})), max_entries=None)
    with pytest.raises(KeyCollision):
        plan_put(current, {"notes.md": "twin"}, etag, max_entries=2)


def test_stored_keys_that_clash_are_still_updated() -> None:
    """Stored before the check existed: never refused, their updates go on."""
    current = _current(**{"Notes.md": "1", "notes.md": "2"})
    etag = IfMatch(frozenset({etag_for({k: v.checksum for k, v in current.items()})}))
    plan = plan_put(current, {"notes.md": "3", "Notes.md": "4"}, etag, max_entries=None)
    assert [w.key for w in plan.writes] == ["Notes.md", "notes.md"]
