"""One cut for a name or description memoryd shows or derives (`manifest.one_line`): the
manifest's lines, MEMORY.md's hooks and quick-add's fields. Before session 23 quick-add cut
with a rule of its own, and one text in eleven came out otherwise; neither knew that a letter
and its accent, an emoji sequence or a flag is one character to a reader."""

from __future__ import annotations

import pytest

from memoryd.automem import quickadd
from memoryd.automem.index_writer import index_hook
from memoryd.automem.manifest import one_line
from memoryd.automem.quickguess import TITLE_CHARS, guess_title
from memoryd.llm.replies import json_object

FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
FRANCE, GERMANY = "\U0001f1eb\U0001f1f7", "\U0001f1e9\U0001f1ea"


@pytest.mark.parametrize(
    ("text", "cap", "cut"),
    [
        ("short enough", 20, "short enough"),
        # Whitespace runs are one space before anything is counted.
        ("a  \t  b\n\nc" + " " * 40 + "d", 10, "a b c d"),
        ("   \t\n  ", 5, ""),
        # At a word when one ends in the second half of the room; the cut takes `,;:-`.
        ("deploys go through the canary first", 20, "deploys go through…"),
        ("word, another thing", 8, "word…"),
        ("the word ends at the cut exactly", 9, "the word…"),
        # A longer word is cut inside, not dropped with what follows it.
        ("a " + "x" * 40, 20, "a " + "x" * 17 + "…"),
        ("-" * 30, 10, "-" * 9 + "…"),
        # A letter keeps its accent: the cut goes before the letter, not between them.
        ("eeeeeeeee\u0301 more words", 10, "eeeeeeee…"),
        ("cafe\u0301s and more", 5, "caf…"),
        # An emoji sequence, a skin tone, a flag: whole or not at all.
        (f"ab {FAMILY} family", 6, "ab…"),
        (f"xyz{FAMILY}q", 6, "xyz…"),
        (f"ab {FRANCE}{GERMANY} zz", 6, f"ab {FRANCE}…"),
        (f"ab {FRANCE}{GERMANY} zz", 5, "ab…"),
        ("ok \U0001f44d\U0001f3fd fine", 5, "ok…"),
        # A surrogate pair a decoder left as two halves is not split either.
        ("abc\ud83d\ude00def", 5, "abc…"),
        # Characters a reader sees whole that no mark or joiner rule finds (UAX #29): Thai's
        # sara am (a letter, not a mark, of a syllable), a Devanagari conjunct (ष joined by
        # the virama before it), a Hangul syllable of three jamo.
        ("\u0e01" * 3 + "\u0e17\u0e33" + "\u0e07\u0e32\u0e19", 5, "\u0e01" * 3 + "…"),
        ("\u0915\u094d\u0937" * 5, 6, "\u0915\u094d\u0937…"),
        ("ab\u1100\u1100\u1161\u11a8", 5, "ab…"),
        # CJK has no spaces: cut at the room's end.
        ("数据库" * 100, 10, "数据库数据库数据库…"),
        # A run of marks as long as the room is no character: cut inside it.
        ("e" + "\u0301" * 30, 10, "e" + "\u0301" * 8 + "…"),
    ],
)
def test_one_cut(text: str, cap: int, cut: str) -> None:
    assert one_line(text, cap) == cut
    assert len(cut) <= cap


def test_the_index_hook_and_quick_add_cut_as_the_manifest_does() -> None:
    sentence = "word, " + "x" * 31 + " " + "e\u0301" * 60
    assert index_hook(sentence) == one_line(sentence, 150)
    # The local guess: the description is the first sentence, cut to 150.
    derived = quickadd.derive(sentence, "project", "A name")
    assert derived.description == one_line(sentence, quickadd.DESCRIPTION_CHARS)
    assert derived.description.endswith("e\u0301…")  # not "e…" without its accent


def test_a_models_description_is_cut_by_the_same_rule() -> None:
    description = "Deploys " + FAMILY * 120
    reply = '{"type": "project", "name": "Deploys", "description": "' + description + '"}'
    assert json_object(reply) is not None
    chosen = quickadd.parse_model_choice(reply, "Deploys go first", None)
    assert chosen is not None
    # 300 characters of room: whole family sequences only (5 characters each).
    assert chosen.description == one_line(description, 300)
    assert chosen.description == "Deploys " + FAMILY * 58 + "…"


@pytest.mark.parametrize(
    ("text", "end"),
    [
        ("x" + FAMILY * 30, FAMILY),  # it ended in a joiner, half a family
        ("a" + FRANCE * 40, FRANCE),  # in one half of a flag
        ("Caf" + "e\u0301" * 40, "e\u0301"),  # in an "e" without its accent
    ],
    ids=["family", "flag", "accent"],
)
def test_a_local_title_of_one_long_word_is_cut_where_a_character_starts(
    text: str, end: str
) -> None:
    title = guess_title(text)
    assert len(title) <= TITLE_CHARS
    assert title.endswith(end)
    assert quickadd.derive(text, None).name == title
