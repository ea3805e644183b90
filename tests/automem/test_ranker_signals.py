"""Each extra signal of the ranker changes the order the way it claims to (on and off)."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

import numpy as np

from memoryd.automem.recall.analysis import query_terms
from memoryd.automem.recall.ranker import RankerParams, RecallIndex

PLAIN = RankerParams(
    prf_weight=0.0,
    coord=0.0,
    name_miss=1.0,
    group_weight=0.0,
    date_boost=0.0,
    prefix_len=0,
    bigram_weight=0.0,
    drop_question_words=False,
)


def _keys(idx: RecallIndex, q: str, n: int = 5) -> list[str]:
    return [k for k, _ in idx.search(q, n)]


def test_question_words_dropped_from_queries_only() -> None:
    assert query_terms("What kind of music does she like?") == ["music"]
    assert query_terms("What kind?") == ["kind"]  # nothing else left: keep them


def test_date_boost() -> None:
    for boost, expected in ((0.0, "a.md"), (1.0, "b.md")):
        idx = RecallIndex(replace(PLAIN, date_boost=boost))
        idx.upsert("a.md", "trip", "went hiking trip", "x", date(2023, 3, 1))
        idx.upsert("b.md", "trip", "went hiking", "x", date(2023, 8, 20))
        assert _keys(idx, "hiking trip in August 2023")[0] == expected


def test_a_range_of_dates_favours_the_memories_dated_in_it() -> None:
    for boost, expected in ((0.0, "before.md"), (1.0, "inside.md")):
        idx = RecallIndex(replace(PLAIN, date_boost=boost))
        idx.upsert("before.md", "trip", "trip to Chicago, trip", "x", date(2023, 7, 20))
        # more than the slack (14 days) before the range's last day: only its first counts
        idx.upsert("inside.md", "trip", "trip to Chicago", "x", date(2023, 8, 5))
        idx.upsert("after.md", "trip", "trip to Chicago", "x", date(2023, 9, 30))
        assert _keys(idx, "the trip between August 1 and August 31, 2023")[0] == expected


def test_a_time_from_now_counts_from_the_today_given_even_once_the_index_changed() -> None:
    idx = RecallIndex(replace(PLAIN, date_boost=1.0))
    idx.upsert(
        "old.md", "cache", "we chose Redis for the cache, Redis cache", "x", date(2020, 1, 1)
    )
    idx.upsert("new.md", "cache", "we chose Redis for the cache", "x", date(2026, 12, 2))
    today = date(2026, 12, 3)
    asked = "which cache did we choose yesterday?"
    lexical = idx.lexical(asked, today=today)
    idx.upsert("other.md", "tea", "green tea", "x")  # the scores are made again, `today` kept
    assert idx.rank(lexical)[0][0] == "new.md"
    assert idx.rank(idx.lexical(asked))[0][0] == "old.md"  # no today: "yesterday" is no date
    # a date in pasted code or output is not one the user asks about
    pasted = "why is the Redis cache stale?\n```\nexpires = date.today() - 3 days ago\n```"
    assert idx.rank(idx.lexical(pasted, today=today))[0][0] == "old.md"


def test_same_day_group_bonus() -> None:
    for weight, expected in ((0.0, "other.md"), (1.0, "sibling.md")):
        idx = RecallIndex(replace(PLAIN, group_weight=weight))
        idx.upsert("hit.md", "concert", "Anna went to a jazz concert", "x", date(2023, 5, 1))
        idx.upsert(
            "sibling.md",
            "music",
            "Anna loved the saxophone solo of the jazz band",
            "x",
            date(2023, 5, 1),
        )
        idx.upsert("other.md", "music", "Anna plays jazz piano at home", "x", date(2022, 1, 1))
        assert _keys(idx, "jazz concert")[:2] == ["hit.md", expected]


def test_a_day_only_file_times_share_lends_nothing() -> None:
    # after a clone, a copy or a rewrite every file shares one day: no memory lends to another
    for by_file, expected in ((False, "sibling.md"), (True, "other.md")):
        idx = RecallIndex(replace(PLAIN, group_weight=1.0))
        day = date(2026, 11, 30)
        idx.upsert(
            "hit.md", "concert", "Anna went to a jazz concert", "x", day, dated_by_file=by_file
        )
        idx.upsert(
            "sibling.md",
            "music",
            "Anna loved the saxophone solo of the jazz band",
            "x",
            day,
            dated_by_file=by_file,
        )
        idx.upsert("other.md", "music", "Anna plays jazz piano at home", "x", date(2022, 1, 1))
        assert _keys(idx, "jazz concert")[:2] == ["hit.md", expected]


def test_a_file_time_is_when_it_was_written_so_it_gets_no_slack() -> None:
    # a memory's text may tell of last week days later; its file's time is the write itself
    today = date(2026, 12, 3)
    three_days_late = date(2026, 12, 2)  # "last week" is Nov 23-29
    for by_file, expected in ((False, "late.md"), (True, "old.md")):
        idx = RecallIndex(replace(PLAIN, date_boost=1.0))
        idx.upsert("old.md", "cache", "Redis for the cache, Redis cache", "x", date(2020, 1, 1))
        idx.upsert(
            "late.md", "cache", "Redis for the cache", "x", three_days_late, dated_by_file=by_file
        )
        idx.upsert("inside.md", "tea", "green tea", "x", date(2026, 11, 25), dated_by_file=True)
        assert idx.rank(idx.lexical("the Redis cache last week", today=today))[0][0] == expected
    # written in the asked time itself, a file-dated memory is dated as asked
    idx = RecallIndex(replace(PLAIN, date_boost=1.0))
    idx.upsert("old.md", "cache", "Redis for the cache, Redis cache", "x", date(2020, 1, 1))
    idx.upsert("in.md", "cache", "Redis for the cache", "x", date(2026, 11, 25), dated_by_file=True)
    assert idx.rank(idx.lexical("the Redis cache last week", today=today))[0][0] == "in.md"


def test_an_event_is_placed_by_the_day_its_text_names_not_its_files() -> None:
    idx = RecallIndex(replace(PLAIN, date_boost=1.0))
    # the trip's best match is dated only by its file (edited long after): it places nothing
    idx.upsert(
        "trip_note.md", "trip", "road trip to Utah, trip", "x", date(2024, 1, 1), dated_by_file=True
    )
    idx.upsert("trip.md", "trip", "went on a road trip", "x", date(2023, 6, 10))
    idx.upsert("early.md", "paint", "painted a sunset", "x", date(2023, 5, 1))
    idx.upsert("late.md", "paint", "painted a sunset again, sunset", "x", date(2023, 9, 1))
    paintings = [
        k for k in _keys(idx, "what sunset did she paint before the trip?") if "trip" not in k
    ]
    assert paintings[0] == "early.md"


def test_a_file_day_in_the_first_days_of_the_calendar_is_matched_without_failing() -> None:
    idx = RecallIndex(replace(PLAIN, date_boost=1.0))
    idx.upsert("a.md", "cache", "the cache", "x", date(1, 1, 3), dated_by_file=True)
    for query in ("the cache last week", "the cache in May", "the cache on 5 May 2023"):
        assert _keys(idx, query) == ["a.md"]


def test_name_miss_penalty() -> None:
    for miss, expected in ((1.0, "bob.md"), (0.3, "alice.md")):
        idx = RecallIndex(replace(PLAIN, name_miss=miss))
        idx.upsert("alice.md", "Alice", "likes hiking", "x")
        for i in range(3):
            idx.upsert(f"alice{i}.md", "Alice", f"topic{i}", "x")
        idx.upsert("bob.md", "Bob", "hiking in the mountains", "x")
        idx.upsert("carl.md", "Carl", "other", "x")
        assert _keys(idx, "Alice hiking mountains")[0] == expected


def test_coordination_favours_matching_more_terms() -> None:
    for coord, expected in ((0.0, "one.md"), (2.0, "both.md")):
        idx = RecallIndex(replace(PLAIN, coord=coord))
        idx.upsert("one.md", "n", "zebra zebra zebra zebra", "x")
        idx.upsert("both.md", "n", "zebra okapi and many other words here to dilute", "x")
        for i in range(5):
            idx.upsert(f"pad{i}.md", "n", "okapi", "x")
        assert _keys(idx, "zebra okapi")[0] == expected


def test_prefix_expansion() -> None:
    idx = RecallIndex(PLAIN)
    idx.upsert("a.md", "family", "her grandmother gave her a necklace", "x")
    assert _keys(idx, "grandma") == []
    idx = RecallIndex(replace(PLAIN, prefix_len=5))
    idx.upsert("a.md", "family", "her grandmother gave her a necklace", "x")
    assert _keys(idx, "grandma") == ["a.md"]


def test_bigram_bonus() -> None:
    for weight, expected in ((0.0, "apart.md"), (2.0, "phrase.md")):
        idx = RecallIndex(replace(PLAIN, bigram_weight=weight))
        idx.upsert("apart.md", "n", "video call then games night", "x")
        idx.upsert("phrase.md", "n", "video games all evening long tonight", "x")
        assert _keys(idx, "video games")[0] == expected


def test_slots_are_reused_after_removal() -> None:
    idx = RecallIndex(PLAIN)
    for i in range(10):
        idx.upsert(f"{i}.md", "n", f"word{i} common", "x")
    for i in range(5):
        idx.remove(f"{i}.md")
    for i in range(10, 15):
        idx.upsert(f"{i}.md", "n", f"word{i} common", "x")
    assert len(idx) == 10
    assert _keys(idx, "word12") == ["12.md"]
    assert _keys(idx, "word3") == []
    assert sorted(k for k, _ in idx.search("common", 20)) == sorted(f"{i}.md" for i in range(5, 15))


def test_exclusion() -> None:
    idx = RecallIndex()
    idx.upsert("a.md", "n", "zebra stripes", "x")
    idx.upsert("b.md", "n", "zebra savanna", "x")
    assert sorted(_keys(idx, "zebra")) == ["a.md", "b.md"]
    assert [k for k, _ in idx.search("zebra", 5, exclude={"a.md"})] == ["b.md"]


def test_before_an_event_uses_the_events_date() -> None:
    for boost, expected in ((0.0, "late.md"), (1.0, "early.md")):
        idx = RecallIndex(replace(PLAIN, date_boost=boost))
        idx.upsert("trip.md", "trip", "went on a road trip to Utah", "x", date(2023, 6, 10))
        idx.upsert("early.md", "paint", "painted a sunset", "x", date(2023, 5, 1))
        idx.upsert("late.md", "paint", "painted a sunset again, sunset", "x", date(2023, 9, 1))
        paintings = [
            k for k in _keys(idx, "what sunset did she paint before the trip?") if k != "trip.md"
        ]
        assert paintings[0] == expected
        later = [
            k for k in _keys(idx, "what sunset did she paint after the trip?") if k != "trip.md"
        ]
        assert later[0] == "late.md"


def test_hybrid_fusion_lifts_what_the_model_finds_close() -> None:
    idx = RecallIndex()
    for key, text in (("a.md", "rows a kayak"), ("b.md", "likes coffee"), ("c.md", "deploys")):
        idx.upsert(key, key, text, "")
    assert idx.search("paddling on the sea", 5) == []  # nothing lexical in common
    cosines = np.array([0.9, 0.1, 0.2], dtype=np.float32)
    got = idx.search("paddling on the sea", 5, semantic=(["a.md", "b.md", "c.md"], cosines))
    assert got[0][0] == "a.md"
    lexical_first = idx.search("coffee", 5, semantic=(["a.md", "b.md", "c.md"], cosines))
    assert lexical_first[0][0] == "b.md"  # a strong lexical match still leads
    assert (
        idx.search("coffee", 5, exclude={"b.md"}, semantic=(["a.md", "b.md"], cosines[:2]))[0][0]
        != "b.md"
    )


def test_relevance_floors_leave_out_memories_too_unlike_the_query() -> None:
    idx = RecallIndex()
    texts = {
        "kayak.md": "rows a kayak",
        "coffee.md": "likes coffee",
        "deploys.md": "deploys on Fridays",
        "new.md": "likes tea",  # no vector yet: no cosine, never dropped for it
    }
    for key, text in texts.items():
        idx.upsert(key, key, text, "")
    keys = ["kayak.md", "coffee.md", "deploys.md"]
    fused = np.array([0.9, 0.8, 0.1], dtype=np.float32)
    # The query shares no word with kayak.md: the model alone finds it, so it must pass the
    # semantic-only floor (0.2); the other two, cosines 0.18 and 0.05, are too unlike it.
    cosines = np.array([0.5, 0.18, 0.05], dtype=np.float32)
    got = idx.search("paddling on the sea", 5, semantic=(keys, fused), cosines=(keys, cosines))
    assert [k for k, _ in got] == ["kayak.md"]
    unfloored = idx.search("paddling on the sea", 5, semantic=(keys, fused))
    assert [k for k, _ in unfloored] == ["kayak.md", "coffee.md"]  # each above the mean
    # A lexical match needs only the lower floor (0.15): coffee.md at 0.18 stays, but
    # deploys.md at 0.05 goes though "fridays" matches it; new.md has no cosine and stays.
    got = idx.search("coffee, tea or fridays", 5, semantic=(keys, fused), cosines=(keys, cosines))
    assert sorted(k for k, _ in got) == ["coffee.md", "kayak.md", "new.md"]
    # A shared word is not enough from a memory that unlike the query (0.12): coffee.md goes.
    weak = np.array([0.5, 0.12, 0.05], dtype=np.float32)
    got = idx.search("coffee, tea or fridays", 5, semantic=(keys, fused), cosines=(keys, weak))
    assert sorted(k for k, _ in got) == ["kayak.md", "new.md"]
    # Off-topic: nothing is returned rather than the least unlike memories.
    low = np.array([0.14, 0.08, 0.03], dtype=np.float32)
    assert (
        idx.search("fix the typo in the README", 5, semantic=(keys, fused), cosines=(keys, low))
        == []
    )
    # 0 turns each floor off.
    off = RecallIndex(replace(RankerParams(), relevance_floor=0.0, semantic_only_floor=0.0))
    for key, text in texts.items():
        off.upsert(key, key, text, "")
    assert len(off.search("paddling", 5, semantic=(keys, fused), cosines=(keys, low))) == 2


def test_when_questions_favour_memories_that_say_when() -> None:
    for boost, expected in ((0.0, "a.md"), (1.0, "b.md")):
        idx = RecallIndex(replace(PLAIN, when_boost=boost))
        idx.upsert("a.md", "turtles", "Nate loves his turtles, turtles everywhere", "x")
        idx.upsert("b.md", "turtles", "Nate got his turtles three years ago", "x")
        assert _keys(idx, "When did Nate get turtles?")[0] == expected
        assert _keys(idx, "Why does Nate love turtles?")[0] == "a.md"  # not a "when?"


def test_diversity_makes_room_for_a_different_memory() -> None:
    for diversity, expected in ((0.0, {"a.md", "b.md"}), (0.9, {"a.md", "c.md"})):
        idx = RecallIndex(replace(PLAIN, diversity=diversity))
        idx.upsert("a.md", "pets", "Nate has turtles as pets", "x")
        idx.upsert("b.md", "pets", "Nate has turtles as pets, he says", "x")
        idx.upsert("c.md", "dog", "Nate adopted a dog, his newest pet", "x")
        assert set(_keys(idx, "Nate pets", 2)) == expected


def test_ranking_one_lexical_result_twice_gives_the_same_answer() -> None:
    idx = RecallIndex()
    idx.upsert("a.md", "trip", "went hiking two weeks ago", "x", date(2023, 3, 1))
    idx.upsert("b.md", "trip", "hiking boots bought", "x", date(2023, 3, 1))
    idx.upsert("c.md", "trip", "hiking in the Alps", "x", date(2023, 8, 20))
    found = idx.lexical("When did she go hiking in March 2023?")
    assert idx.rank(found) == idx.rank(found) == idx.search("When did she go hiking in March 2023?")
