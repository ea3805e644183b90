"""What a loaded memory dir costs the garbage collector: the objects it walks on each full
collection (and the memory they take) grow with the memories, not with their words."""

from __future__ import annotations

import gc
import random
from pathlib import Path

from memoryd.automem.recall.keysets import FEW, KeySets
from memoryd.automem.store import DirState
from tests.automem.conftest import memory_text


def _tracked() -> int:
    gc.collect()
    return len(gc.get_objects())


def test_a_memorys_word_pairs_and_names_are_not_an_object_each(tmp_path: Path) -> None:
    rng = random.Random(7)
    consonants, vowels = "bcdfghklmnprstvz", "aeiou"
    words = [a + b + c + d for a in consonants for b in vowels for c in consonants for d in vowels]
    n = 400
    memdir = tmp_path / "memory"
    memdir.mkdir()
    for i in range(n):
        body = " ".join(rng.choice(words) for _ in range(60))
        description = " ".join(rng.choice(words) for _ in range(12))
        (memdir / f"user_m{i}.md").write_text(memory_text(f"m {i}", description, "user", body))
    warm = tmp_path / "warm"  # what a first load imports is not the memories' own
    warm.mkdir()
    (warm / "one.md").write_text(memory_text("one", "one", "user", "one"))
    DirState(warm).refresh(force=True)
    before = _tracked()
    state = DirState(memdir)
    state.refresh(force=True)
    assert len(state.entries) == n
    # Each of the ~70 adjacent pairs of a memory had a set of its own (nearly always of that
    # one memory), as had each name and file stem: ~90 objects a memory (20,000 memories:
    # half a million, a full collection ~300 ms on the event loop). Then ~11: the memory's
    # own records, three of them the frozensets of its dedupe candidate and one the candidate,
    # which are tuples now that the collector stops tracking. Left: its entry, header, path
    # (two objects), index entry and a share of the sets of words many memories hold.
    per_memory = (_tracked() - before) / n
    assert per_memory < 8, per_memory
    assert state.index.search(" ".join(words[:3]))  # and it still ranks
    del state


def test_keysets_hold_what_a_dict_of_sets_holds() -> None:
    rng = random.Random(3)
    sets: KeySets[str, str] = KeySets()
    model: dict[str, set[str]] = {}
    keys = ["a", "b", "c"]
    values = [f"v{i}" for i in range(2 * FEW + 3)]  # past FEW and back, one at a time
    for _ in range(5_000):
        key, value = rng.choice(keys), rng.choice(values)
        if rng.random() < 0.55:
            sets.add(key, value)
            model.setdefault(key, set()).add(value)
        else:
            sets.discard(key, value)
            model.get(key, set()).discard(value)
            if not model.get(key, True):
                del model[key]
        for k in keys:
            got = list(sets.get(k))
            assert len(got) == len(set(got))  # each value once
            assert set(got) == model.get(k, set())
            assert (k in sets) == (k in model)
        assert len(sets) == len(model)
