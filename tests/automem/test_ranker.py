"""The local ranker: analysis, BM25F field weights, incremental updates, exclusion."""

from __future__ import annotations

import pytest

from memoryd.automem.recall.analysis import terms
from memoryd.automem.recall.ranker import RankerParams, RecallIndex
from tests.automem.run_apart import output_of


def test_terms_stem_and_drop_stop_words() -> None:
    assert terms("The runners were Running to Caroline's races") == [
        "runner",
        "run",
        "carolin",
        "race",
    ]


def test_terms_fold_accents_and_apostrophes() -> None:
    assert terms("Café don’t") == ["cafe"]


# A Snowball stemmer that, as the pure-Python one does, keeps the word in itself while it works;
# the first word waits (up to 5 s) inside it until the second thread has stemmed its own.
_TWO_THREADS_STEMMING = """
import threading
import snowballstemmer

first_inside, second_done = threading.Event(), threading.Event()

class Stateful:
    def stemWord(self, word):
        self.current = word
        if word == "alpha":
            first_inside.set()
            second_done.wait(5)
        return self.current

snowballstemmer.stemmer = lambda language: Stateful()
from memoryd.automem.recall import analysis

got = {}
def run(word):
    got[word] = analysis.stem(word)
first = threading.Thread(target=run, args=("alpha",))
first.start()
first_inside.wait(5)
run("omega")
second_done.set()
first.join()
print(got["alpha"], got["omega"])
"""


def test_two_threads_stemming_at_once_each_get_their_own_words_stem() -> None:
    # An agent's write check stems in a thread while the loop stems a query or a load.
    assert output_of(_TWO_THREADS_STEMMING) == "alpha omega"


def _index(**params: object) -> RecallIndex:
    idx = RecallIndex(RankerParams(**params))  # type: ignore[arg-type]
    idx.upsert(
        "deploy.md",
        "Deploy process",
        "how we ship to production",
        "Use the deploy script on Fridays",
    )
    idx.upsert("tests.md", "Testing", "pytest preferences", "Run pytest -x before commits")
    idx.upsert(
        "dash.md", "Grafana dashboard", "where latency graphs live", "https://grafana.example/d/api"
    )
    return idx


def test_search_finds_by_body_and_stems() -> None:
    idx = _index()
    assert idx.search("running the tests", 1)[0][0] == "tests.md"
    assert idx.search("shipping to production", 1)[0][0] == "deploy.md"


def test_no_match_returns_nothing() -> None:
    assert _index(prf_docs=0).search("quantum entanglement") == []
    assert _index().search("the and of") == []


def test_exclude_and_limit() -> None:
    idx = _index()
    hits = idx.search("deploy pytest grafana", 5, exclude={"tests.md"})
    assert "tests.md" not in [k for k, _ in hits]
    assert len(idx.search("deploy pytest grafana", 2)) == 2


def test_incremental_update_and_remove() -> None:
    idx = _index()
    idx.upsert("tests.md", "Testing", "unittest preferences", "Run unittest")
    assert all(k != "tests.md" for k, _ in idx.search("pytest"))
    assert idx.search("unittest", 1)[0][0] == "tests.md"
    idx.remove("deploy.md")
    assert "deploy.md" not in idx
    assert all(k != "deploy.md" for k, _ in idx.search("deploy production"))
    assert len(idx) == 2


def test_incremental_equals_rebuild() -> None:
    grown = _index()
    grown.upsert("x.md", "temp", "temp", "temp deploy")
    grown.remove("x.md")
    fresh = _index()
    q = "deploy production pytest"
    assert grown.search(q) == fresh.search(q)


def test_name_field_weight_matters() -> None:
    idx = RecallIndex(RankerParams(weights=(5.0, 1.0, 1.0), prf_docs=0))
    idx.upsert("a.md", "kubernetes", "cluster notes", "things")
    idx.upsert("b.md", "notes", "cluster notes", "kubernetes things")
    assert idx.search("kubernetes", 1)[0][0] == "a.md"
    idx = RecallIndex(RankerParams(weights=(0.1, 1.0, 5.0), prf_docs=0))
    idx.upsert("a.md", "kubernetes", "cluster notes", "things")
    idx.upsert("b.md", "notes", "cluster notes", "kubernetes things")
    assert idx.search("kubernetes", 1)[0][0] == "b.md"


def test_feedback_terms_reorder_what_the_query_matches_and_add_nothing() -> None:
    def index(**params: int | float) -> RecallIndex:
        idx = RecallIndex(RankerParams(diversity=0.0, **params))
        idx.upsert("a.md", "pottery", "pottery workshop: clay shaped and fired in the kiln", "")
        idx.upsert("b.md", "taxes", "a workshop on filing tax returns early", "")
        idx.upsert("c.md", "glazes", "pottery glazes fired in a clay kiln", "")
        idx.upsert("d.md", "repairs", "the kiln repair service", "")  # "kiln": feedback only
        return idx

    with_feedback = dict(index(prf_docs=1, prf_terms=3, prf_weight=0.5).search("pottery workshop"))
    without = dict(index(prf_docs=0).search("pottery workshop"))
    # The best match's words (clay, kiln, fired) lift the memory that shares them ...
    assert list(with_feedback) == list(without) == ["a.md", "c.md", "b.md"]
    assert with_feedback["c.md"] / with_feedback["b.md"] > 2 * without["c.md"] / without["b.md"]
    # ... but a memory that only they match is not recalled: it is off the query's topic.
    assert "d.md" not in with_feedback


PASTED_LOG = """```
$ make test
--- FAIL: TestDecode (0.02s)
    decode_test.go:41: user value on line 5 is not valid
FAIL github.com/acme/ingest/decoder 0.118s
```"""


def _coding_index(**params: float) -> RecallIndex:
    idx = RecallIndex(RankerParams(**params))  # type: ignore[arg-type]
    idx.upsert("commits.md", "Commits", "small commits with imperative subject lines", "")
    idx.upsert("car.md", "Car", "the user owns a red Tesla", "")
    idx.upsert("ingest.md", "Bugs", "bugs are tracked in the Linear project INGEST", "")
    idx.upsert("decoder.md", "Decoder", "the ingest decoder is owned by Dana", "")
    idx.upsert("slow.md", "Slow tests", "the test suite is slow: run it with -x", "")
    return idx


def test_a_pasted_block_alone_does_not_recall_what_one_of_its_words_names() -> None:
    got = [k for k, _ in _coding_index().search(f"why is this so slow?\n{PASTED_LOG}")]
    # "line" (commits), "user" (car) and "ingest" alone (ingest.md) come from the log
    assert got == ["slow.md", "decoder.md"]  # the prose's match first; two log words name Dana's
    as_one = _coding_index(pasted_weight=1.0, pasted_min_terms=1)
    noise = {k for k, _ in as_one.search(f"why is this so slow?\n{PASTED_LOG}")}
    assert {"commits.md", "car.md", "ingest.md"} <= noise  # read as one text, as before


def test_a_paste_can_name_a_memory_the_prose_does_not() -> None:
    got = [k for k, _ in _coding_index().search(f"what is this?\n{PASTED_LOG}")]
    assert got == ["decoder.md"]  # "ingest" and "decoder": two of the paste's terms


def test_a_prompt_that_is_all_paste_is_still_ranked() -> None:
    paste = "```\nFAIL github.com/acme/ingest/decoder\nFAIL github.com/acme/ingest/decoder\n```"
    assert [k for k, _ in _coding_index().search(paste)] == ["decoder.md"]


def test_ten_thousand_identical_memories() -> None:
    from memoryd.automem.recall.ranker import RecallIndex

    index = RecallIndex()
    for i in range(10_000):
        index.upsert(f"m{i:05d}.md", "Same", "the very same memory", "same body")
    got = index.search("same memory", 5)
    assert len({k for k, _ in got}) == 5  # any five of the equals
    assert index.search("same memory", 5) == got  # and the same five each time
    assert index.search("nothing alike", 5) == []


def test_memory_without_description_is_found() -> None:
    from memoryd.automem.recall.ranker import RecallIndex

    index = RecallIndex()
    index.upsert("a.md", "a", "", "the staging database lives on db-staging")
    index.upsert("b.md", "b", "coffee", "oat milk")
    assert index.search("staging database", 5)[0][0] == "a.md"


def test_other_scripts_are_searchable() -> None:
    index = RecallIndex()
    index.upsert("ru.md", "Офис", "Офис находится в Москве", "на Тверской улице")
    index.upsert("ja.md", "寿司", "東京で寿司を食べた", "築地の店")
    index.upsert("en.md", "Office", "the office is in Berlin", "")
    assert index.search("Где находится офис?", 1)[0][0] == "ru.md"  # Russian stems: Москве ~ Москва
    assert index.search("москва", 1)[0][0] == "ru.md"
    assert index.search("東京の寿司", 1)[0][0] == "ja.md"  # CJK as character pairs
    assert index.search("office Berlin", 1)[0][0] == "en.md"


def test_terms_of_other_scripts() -> None:
    assert terms("Офисы в Москве") == ["офис", "в", "москв"]
    assert terms("東京都") == ["東京", "京都"]
    assert terms("寿") == ["寿"]
    assert terms("Straße") == ["straße"]


def test_words_of_other_scripts_stay_whole_and_distinct() -> None:
    # Korean is paired like Chinese and Japanese (not split into its letters' jamo)
    assert terms("서울에서") == ["서울", "울에", "에서"]
    # kana voicing marks make other letters, not accents; half-width kana read as full-width
    assert terms("かがみ") == ["かが", "がみ"]
    assert terms("ｶﾞｽ") == ["ガス"]
    # й is a letter of its own: folded to и, Russian adjective endings would not stem
    assert terms("новый") == terms("новая") == ["нов"]
    # vowel signs continue a Devanagari or Thai word (the virama folds away like an accent)
    assert terms("हिन्दी है") == ["हिनदी", "है"]
    assert terms("ดีมาก") == ["ดีมาก"]


def test_a_korean_word_is_found_with_its_particle_attached() -> None:
    index = RecallIndex()
    index.upsert("seoul.md", "사무실", "사무실은 서울에서 있어요", "")
    index.upsert("busan.md", "집", "집은 부산에 있어요", "")
    assert index.search("서울", 1)[0][0] == "seoul.md"


def test_index_changed_between_searches_ranks_like_one_never_searched() -> None:
    """Per-term, per-pair and per-day caches made by earlier searches follow later changes
    (b = 0: no length normalisation, so frozen average lengths cannot explain a difference)."""
    from datetime import date

    import pytest

    may, june = date(2023, 5, 20), date(2023, 6, 2)
    changes: list[tuple[str, str, str, date | None] | str] = [
        ("a.md", "Caroline", "Caroline went to the pride parade", may),
        ("b.md", "Caroline", "Caroline painted a sunset at the lake", may),
        ("c.md", "Melanie", "Melanie ran a charity race for the shelter", june),
        ("d.md", "Melanie", "Melanie went to the pride parade with her kids", june),
        ("e.md", "Jon", "Jon opened his dance studio downtown", None),
        "a.md",  # removed
        ("c.md", "Melanie", "Melanie joined the pride parade downtown", may),
        ("f.md", "Jon", "Jon saw the pride parade", june),
        ("d.md", "Melanie", "Melanie painted the lake", may),
        ("g.md", "Jon", "Jon danced at the pride parade", may),
    ]
    queries = ["pride parade", "What did Caroline do in May 2023?", "charity race", "dance"]
    params = RankerParams(b=(0.0, 0.0, 0.0))

    def apply(index: RecallIndex, change: tuple[str, str, str, date | None] | str) -> None:
        if isinstance(change, str):
            index.remove(change)
        else:
            key, name, fact, when = change
            index.upsert(key, name, fact, fact, when)

    warm = RecallIndex(params)
    for done, change in enumerate(changes, 1):
        apply(warm, change)
        cold = RecallIndex(params)
        for earlier in changes[:done]:
            apply(cold, earlier)
        for q in queries:
            expected = cold.search(q, 5)
            got = warm.search(q, 5)
            assert [k for k, _ in got] == [k for k, _ in expected], (done, q)
            assert [s for _, s in got] == pytest.approx([s for _, s in expected]), (done, q)


def test_change_between_lexical_scores_and_rank_is_scored_afresh() -> None:
    """A file changed while the query was being embedded: `rank` does not trust the slots
    of scores made before the change."""
    idx = _index()
    lexical = idx.lexical("deploy on fridays")
    idx.remove("deploy.md")
    idx.upsert("ship.md", "Shipping", "deploy on fridays only", "")  # takes deploy.md's slot
    assert idx.rank(lexical, 5) == idx.search("deploy on fridays", 5)
    assert idx.rank(idx.lexical("deploy on fridays"), 5)[0][0] == "ship.md"


def test_removals_that_move_the_average_lengths_rank_like_a_fresh_index() -> None:
    """Average field lengths are frozen only while they stay within a few percent: removing
    the long memories after a search must not leave their averages behind."""
    kept = {"a.md": "tomato plants in the garden, staked and watered", "b.md": "garden shed"}
    warm = RecallIndex()
    for i in range(10):
        warm.upsert(f"long{i}.md", "Note", "", " ".join(f"filler{j}" for j in range(60)))
    for key, body in kept.items():
        warm.upsert(key, "Note", "", body)
    warm.search("garden tomato", 5)  # caches the averages and each term's impacts
    for i in range(10):
        warm.remove(f"long{i}.md")
    fresh = RecallIndex()
    for key, body in kept.items():
        fresh.upsert(key, "Note", "", body)
    got, expected = warm.search("garden tomato", 5), fresh.search("garden tomato", 5)
    assert [k for k, _ in got] == [k for k, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected])


_SEEDED_SEARCH = """
import json, random
from memoryd.automem.recall.ranker import RecallIndex
rng = random.Random(7)
words = [f"w{i}" for i in range(300)]
index = RecallIndex()
for n in range(400):
    index.upsert(f"m{n}.md", rng.choice(words), " ".join(rng.sample(words, 6)), " ".join(rng.sample(words, 4)))
print(json.dumps([index.search(" ".join(rng.sample(words, 3)), 5) for _ in range(60)]))
"""


def test_results_do_not_depend_on_the_hash_seed() -> None:
    import os
    import subprocess
    import sys

    runs = [
        subprocess.run(
            [sys.executable, "-c", _SEEDED_SEARCH],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    ]
    assert runs[0] == runs[1] == runs[2]


def test_the_session_date_label_names_no_memory() -> None:
    # The extraction agent ends every memory with `Session date: …`: its words are in all of
    # them, and a prompt saying "session" or "date" recalled any five.
    index = RecallIndex()
    for day in range(1, 31):
        body = f"Fact number {day} about the billing service.\n\nSession date: 2026-11-{day:02}"
        index.upsert(f"m{day:02}.md", f"Fact {day}", f"fact {day}", body)
    assert index.search("format the date in the footer", 5) == []
    assert index.search("store the session token", 5) == []
    # a memory that says the word is found by it
    index.upsert("night.md", "Date night", "date night with Ana", "Session date: 2026-12-01")
    assert [k for k, _ in index.search("plan the date", 5)] == ["night.md"]
    # the date itself is still read: a question naming the day finds the memory of that day
    assert [k for k, _ in index.search("billing on 7 November 2026", 1)] == ["m07.md"]


def test_a_huge_memory_is_indexed_by_its_start_only() -> None:
    # A memory's analysis runs on the event loop in one step, ~80 µs for each word never
    # stemmed before: a 200 KB file of distinct words (a pasted log of ids) took seconds.
    import random

    from memoryd.automem.recall.ranker import MAX_INDEXED_CHARS

    rng = random.Random(5)
    syllables = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]
    words = ["".join(rng.choices(syllables, k=3)) for _ in range(30_000)]  # 210,000 characters
    body = " ".join(words)
    index = RecallIndex()
    index.upsert("user_log.md", "pasted log", "a long pasted log", body)
    index.upsert("user_other.md", "other", "something else", "nothing alike here")
    assert len(index.terms_of("user_log.md")) <= len(terms(body[:MAX_INDEXED_CHARS])) + 5
    assert index.search(words[3])[0][0] == "user_log.md"  # its start is recalled
    late = next(w for w in reversed(words) if w not in body[:MAX_INDEXED_CHARS])
    assert index.search(late) == []


def test_the_c_stemmers_in_use_stem_as_snowballs_pure_python_does() -> None:
    # PyStemmer (a dependency) bundles its own Snowball build; a version apart would move
    # stems and so every ranking measured on the pure-Python ones.
    from snowballstemmer.english_stemmer import EnglishStemmer
    from snowballstemmer.russian_stemmer import RussianStemmer

    from memoryd.automem.recall import analysis

    english, russian = analysis._stemmers()
    assert type(english).__module__ == "Stemmer"
    words = "generously relational conditional hopefulness sensibilities running skies dying"
    for word in words.split():
        assert english.stemWord(word) == EnglishStemmer().stemWord(word)
    for word in ["красивый", "читающий", "городами", "сделали", "новейших"]:
        assert russian.stemWord(word) == RussianStemmer().stemWord(word)
