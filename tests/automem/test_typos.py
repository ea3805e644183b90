"""The forms a word takes when it is typed wrong (`typos`)."""

from __future__ import annotations

import pytest

from memoryd.automem.recall.typos import (
    near_forms,
    one_dropped,
    one_edit_apart,
    one_undoubled,
    slipped,
    swapped_once,
    two_swapped,
)


def test_a_key_slips_only_to_the_keys_around_it() -> None:
    assert {"gpod", "giod", "hood", "goos"} <= slipped("good")
    assert "gxod" not in slipped("good")  # x is nowhere near o
    assert len(slipped("a")) == 4  # q, w, s, z


def test_near_forms_drop_a_letter_strike_one_beside_or_slip_one() -> None:
    forms = near_forms("sorry")
    assert {"sory", "sotry", "sorru", "sorrty"} <= forms
    assert "sorrys" not in forms  # a plural or a verb is another word
    assert "sorrz" not in forms  # z is nowhere near y
    assert "sorry" not in forms


@pytest.mark.parametrize(
    ("typed", "word", "apart"),
    [
        ("contiue", "continue", True),  # dropped
        ("continnue", "continue", True),  # added
        ("contimue", "continue", True),  # changed
        ("cnotinue", "continue", True),  # swapped
        ("reactly", "exactly", False),  # one dropped from each: two edits
        ("continue", "continue", False),
        ("cont", "continue", False),
    ],
)
def test_one_edit_apart(typed: str, word: str, apart: bool) -> None:
    assert one_edit_apart(typed, word) is apart


def test_swaps_drops_and_doubled_letters() -> None:
    assert swapped_once("thnaks", "thanks")
    assert not swapped_once("thanks", "thanks")
    assert not swapped_once("tahnsk", "thanks")  # two swaps
    assert two_swapped("yes") == {"eys", "yse"}
    assert one_dropped("ok") == {"o", "k"}
    assert one_undoubled("lookss") == {"looks", "lokss"}  # either doubled letter
    assert one_undoubled("noo") == {"no"}
    assert one_undoubled("tty") == set()  # a name, not "ty" misspelt
