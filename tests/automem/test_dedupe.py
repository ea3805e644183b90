"""Near-duplicate detection: both sides of each threshold."""

from __future__ import annotations

from memoryd.automem import dedupe
from memoryd.automem.dedupe import Candidate

BASE = "Prefer pytest\nhow to run tests\nThe user prefers running the test suite with pytest -x and verbose output."


def _cands(*items: tuple[str, str | None, str]) -> list[Candidate]:
    return [Candidate.of(k, t, text) for k, t, text in items]


def test_identical_text_of_same_type_is_a_duplicate() -> None:
    assert dedupe.find_near_duplicate("user", BASE, _cands(("a.md", "user", BASE))) == "a.md"


def test_same_text_other_type_is_not() -> None:
    assert dedupe.find_near_duplicate("feedback", BASE, _cands(("a.md", "user", BASE))) is None


def test_small_rewording_is_a_duplicate() -> None:
    reworded = BASE.replace("verbose output", "verbose output.").replace(
        "prefers", "prefers always"
    )
    assert dedupe.is_near_duplicate(BASE, reworded)


def test_related_but_different_is_not() -> None:
    other = "Prefer pytest\nhow to run tests\nThe user wants CI to run on every push to the main branch only."
    assert not dedupe.is_near_duplicate(BASE, other)
    assert dedupe.find_near_duplicate("user", other, _cands(("a.md", "user", BASE))) is None


def test_jaccard_threshold_both_sides() -> None:
    words = [f"w{i}" for i in range(10)]
    eight_of_ten = " ".join(words[:9])  # 9 shared of 10 → 0.9
    assert (
        dedupe.jaccard(frozenset(words), frozenset(eight_of_ten.split()))
        >= dedupe.JACCARD_THRESHOLD
    )
    assert dedupe.is_near_duplicate(" ".join(words), eight_of_ten)
    six = " ".join(words[:6]) + " x1 x2 x3 x4"  # 6 shared of 14 → 0.43
    assert not dedupe.is_near_duplicate(" ".join(words), six)


def test_ratio_catches_reordered_long_words_only_when_close() -> None:
    a = "deploy staging cluster nightly"
    b = "deploy staging clusters nightly"  # one token differs: Jaccard 0.6, ratio ~0.98
    assert dedupe.jaccard(frozenset(a.split()), frozenset(b.split())) < dedupe.JACCARD_THRESHOLD
    assert dedupe.is_near_duplicate(a, b)
    c = "deploy staging server weekly"  # Jaccard 0.33
    assert not dedupe.is_near_duplicate(a, c)


def test_best_match_wins() -> None:
    close = BASE.replace("verbose", "quiet")
    cands = _cands(("far.md", "user", close), ("same.md", "user", BASE))
    assert dedupe.find_near_duplicate("user", BASE, cands) == "same.md"


def test_normalise_ignores_case_and_punctuation() -> None:
    assert dedupe.normalise("Hello,  WORLD!") == "hello world"
