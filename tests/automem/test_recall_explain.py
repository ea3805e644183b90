"""What `recall` with `explain` says of a memory (`recall_explain`): the query's words it holds,
written and pasted apart, and the signals it was ranked by."""

from __future__ import annotations

import numpy as np
import pytest

from memoryd.automem.analysis import terms
from memoryd.automem.ranker import RecallIndex
from memoryd.automem.recall_explain import Why, explain, held_words


@pytest.mark.parametrize(
    ("text", "memory", "words"),
    [
        ("How do we deploy the API?", "Deploys go through the canary cluster", ["deploy"]),
        ("what is Caroline's job?", "Caroline works as a counsellor", ["caroline's"]),
        ("the the deploy DEPLOY", "deploy on Fridays", ["deploy"]),  # once each, folded
        ("东京都的天气", "东京 weather", ["东京都的天气"]),  # a run held by one character pair
        ("who am I?", "I am Ada", []),  # stop words are never matched
    ],
)
def test_held_words_are_the_querys_words_the_memory_holds(
    text: str, memory: str, words: list[str]
) -> None:
    assert list(held_words(text, frozenset(terms(memory)))) == words


def test_explain_parts_written_and_pasted_words_and_gives_each_signal() -> None:
    index = RecallIndex()
    index.upsert("ingest.md", "Ingest owner", "the ingest decoder is owned by Dana", "Dana")
    index.upsert("car.md", "Car", "the user owns a red Tesla", "Tesla")
    query = "who owns the ingest job?\n```\nFAIL ingest/decoder (0.02s)\nline 4: decoder error\n```"
    lexical = index.lexical(query)
    semantic = (["car.md", "ingest.md"], np.array([0.1, 0.7]))
    cosines = (["ingest.md"], np.array([0.42]))
    whys = explain(index, lexical, ["ingest.md", "car.md"], semantic, cosines)
    assert whys["ingest.md"] == Why(("owns", "ingest"), ("decoder",), 1.0, 0.7, 0.42)
    car = whys["car.md"]
    assert car.words == ("owns",)
    assert 0 < car.lexical < 1
    assert car.cosine is None  # no pooled cosine given for it
    assert car.as_dict() == {"words": ["owns"], "lexical": round(car.lexical, 3), "semantic": 0.1}
    assert explain(index, lexical, ["gone.md"])["gone.md"] == Why((), (), 0.0, None, None)


def test_a_changed_index_is_read_as_it_is_now() -> None:
    index = RecallIndex()
    index.upsert("a.md", "A", "kayak club", "kayak")
    lexical = index.lexical("kayak club")
    index.upsert("b.md", "B", "kayak club on Tuesdays and kayak races", "kayak kayak")
    index.remove("a.md")
    assert explain(index, lexical, ["b.md"])["b.md"].lexical == 1.0


def test_explain_lists_prefix_matches_apart_and_leaves_out_question_words() -> None:
    index = RecallIndex()
    index.upsert("gran.md", "Grandmother", "her grandmother taught her to knit", "knitting")
    index.upsert("music.md", "Music", "Ana likes jazz and kind people", "jazz")
    lexical = index.lexical("what did grandma knit?")
    why = explain(index, lexical, ["gran.md"])["gran.md"]
    # "grandma" holds only the first six letters of "grandmother": a prefix match
    assert (why.words, why.near_words) == (("knit",), ("grandma",))
    assert why.as_dict()["near_words"] == ["grandma"]
    # the ranker drops "kind" and "like" from a question that says more: so does `words`
    lexical = index.lexical("what kind of music does Ana like?")
    assert explain(index, lexical, ["music.md"])["music.md"].words == ("music", "ana")
