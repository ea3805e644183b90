"""What `recall` with `explain` says of a memory (`recall_explain`): the query's words it holds,
written and pasted apart, and the signals it was ranked by."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

import numpy as np
import pytest

from memoryd.automem.recall.analysis import terms
from memoryd.automem.recall.explain import Why, explain, held_words
from memoryd.automem.recall.ranker import RankerParams, RecallIndex


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
    ingest = whys["ingest.md"]
    assert (ingest.words, ingest.pasted_words) == (("owns", "ingest"), ("decoder",))
    assert (ingest.lexical, ingest.semantic, ingest.cosine) == (1.0, 0.7, 0.42)
    assert (ingest.date, ingest.date_signals) == (None, ())  # an undated memory
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


def test_explain_gives_the_memorys_date_and_the_date_signals_that_raised_it() -> None:
    index = RecallIndex()
    index.upsert("hike.md", "Hike", "Ana went hiking with her dog", "x", date(2023, 8, 20))
    index.upsert("lake.md", "Lake", "Ana swam in the lake three days ago", "x", date(2023, 8, 20))
    index.upsert("old.md", "Old hike", "Ana went hiking in the rain", "x", date(2022, 1, 9))
    lexical = index.lexical("Where did Ana go hiking in August 2023?")
    whys = explain(index, lexical, ["hike.md", "old.md"])
    assert whys["hike.md"].date == "2023-08-20"
    assert whys["hike.md"].date_signals == ("dated as asked",)
    assert whys["old.md"].date_signals == ()  # dated, but not as asked
    assert whys["old.md"].as_dict()["date"] == "2022-01-09"
    assert "date_signals" not in whys["old.md"].as_dict()
    # "when?" favours what says when; the same day's best hit lends to the lake memory
    lexical = index.lexical("When did Ana swim or go hiking?")
    signals = explain(index, lexical, ["lake.md"])["lake.md"].date_signals
    assert signals == ("says when", "same day as hike.md")


def test_explain_names_the_event_a_before_question_was_placed_around() -> None:
    index = RecallIndex()
    index.upsert("trip.md", "trip", "went on a road trip to Utah", "x", date(2023, 6, 10))
    index.upsert("early.md", "paint", "painted a sunset", "x", date(2023, 5, 1))
    index.upsert("late.md", "paint", "painted a sunset again", "x", date(2023, 9, 1))
    lexical = index.lexical("what sunset did she paint before the trip?")
    whys = explain(index, lexical, ["early.md", "late.md"])
    assert whys["early.md"].date_signals == ("before trip.md (2023-06-10)",)
    assert whys["late.md"].date_signals == ()
    # the event's own memory, dated on the asked side, is raised as the event
    trip = explain(index, lexical, ["trip.md"])["trip.md"]
    assert trip.date_signals == ("the event asked around (2023-06-10)",)


def test_explain_reads_the_floors_as_the_ranking_applied_them() -> None:
    # the model chose from candidates ranked without the floors: a memory under them kept
    # its date signals there, and so it does in `why`
    index = RecallIndex()
    index.upsert("hike.md", "Hike", "Ana went hiking", "x", date(2023, 8, 20))
    lexical = index.lexical("hiking in August 2023")
    cosines = (["hike.md"], np.array([0.05]))  # under the relevance floor
    assert [k for k, _ in index.rank(lexical, 5)] == ["hike.md"]
    unfloored = explain(index, lexical, ["hike.md"], None, cosines, floors=False)
    assert unfloored["hike.md"].date_signals == ("dated as asked",)
    assert unfloored["hike.md"].cosine == 0.05
    assert explain(index, lexical, ["hike.md"], None, cosines)["hike.md"].date_signals == ()


def test_explain_lists_the_feedback_terms_a_memory_holds() -> None:
    index = RecallIndex(replace(RankerParams(), prf_docs=1))
    index.upsert("a.md", "Kayak", "kayak trips on the fjord with Ola", "")
    index.upsert("b.md", "Fjord", "the fjord kayak club meets on Sundays", "")
    index.upsert("c.md", "Coffee", "likes coffee", "")
    lexical = index.lexical("kayak")
    whys = explain(index, lexical, ["a.md", "b.md", "c.md"])
    # feedback took the best memory's other terms; the second holds one of them. The best
    # one holds them all, but they lifted only the other: they are its own.
    assert "fjord" in lexical.feedback
    assert whys["a.md"].feedback_terms == ()
    assert whys["b.md"].feedback_terms == ("fjord",)
    assert whys["b.md"].as_dict()["feedback_terms"] == ["fjord"]
    assert whys["c.md"].feedback_terms == ()
    # a memory the query does not match is not lifted by feedback, whatever it holds
    index.upsert("d.md", "Ola", "Ola rows on the fjord", "")
    lexical = index.lexical("kayak")
    whys = explain(index, lexical, ["d.md"], (["d.md"], np.array([0.9])))
    assert (whys["d.md"].lexical, whys["d.md"].feedback_terms) == (0.0, ())
