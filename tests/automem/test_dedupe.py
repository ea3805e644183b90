"""Near-duplicate detection: both sides of each threshold."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

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


def _memory(path: Path, name: str, body: str, type_: str = "feedback") -> None:
    path.write_text(f"---\nname: {name}\ndescription: d\ntype: {type_}\n---\n\n{body}\n")


def test_a_write_by_name_looks_only_at_memories_that_can_be_its_duplicate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write by name compared itself with every memory (and built a dict of every name): its
    event-loop cost grew with the dir, 65-84 ms at 10,000. The store keeps lookups by file
    family, name and word; what they leave out could never be a near duplicate."""
    from memoryd.automem import writes
    from memoryd.automem.store import DirState

    rng = random.Random(5)
    vocab = [f"w{i}" for i in range(20_000)]
    texts = {f"feedback_m{i}.md": " ".join(rng.sample(vocab, 40)) for i in range(400)}
    for key, body in texts.items():
        _memory(tmp_path / key, key[len("feedback_") : -3], body)
    state = DirState(tmp_path)
    state.refresh()
    everyone = [e.candidate for e in state.entries.values()]
    looked_at: list[int] = []
    find = writes.find_near_duplicate

    def spy(type_: str, text: str, existing: list[Candidate]) -> str | None:
        looked_at.append(len(existing))
        return find(type_, text, existing)

    monkeypatch.setattr(writes, "find_near_duplicate", spy)
    reworded = texts["feedback_m7.md"].split()
    reworded[3] = "other"
    for name, body in [
        ("a new fact", " ".join(rng.sample(vocab, 40))),
        ("m7", " ".join(reworded)),  # a rewording of m7 under its own name: m7's file
        ("m7 again", " ".join(reworded)),  # under another name: merged into m7
    ]:
        text = dedupe.memory_text(name, "d", body)
        tokens = frozenset(dedupe.normalise(text).split())
        assert find("feedback", text, everyone) == find(
            "feedback",
            text,
            [state.entries[k].candidate for k in state.near_duplicate_keys("feedback", tokens)],
        )
        writes._key_for_name(state, "feedback", name, "d", body, False)
    assert writes._key_for_name(state, "feedback", "m7", "d", "x", False) == (
        "feedback_m7.md",
        False,
    )
    assert writes._key_for_name(state, "feedback", "m7 again", "d", " ".join(reworded), False) == (
        "feedback_m7.md",
        True,
    )
    assert looked_at
    assert max(looked_at) < 40  # of 400
    assert state.has_name("m7")
    assert state.family("feedback_m7.md") == ["feedback_m7.md"]
