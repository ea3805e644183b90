"""Snowball in C (PyStemmer) against snowballstemmer's pure Python, side by side in one run.

snowballstemmer uses PyStemmer's C stemmers when `Stemmer` imports; each side runs in a process
of its own (the pure one with `Stemmer` kept from importing), a cold stem cache for each, CPU
time (the machine may be shared):
  - `10,000 memories`: a memory dir of 10,000 files loaded (parsed and indexed) by DirState;
  - `200 KB memory`: one file of distinct words at the file cap, loaded the same way;
  - `distinct words`: 20,000 words never seen, stemmed one by one (µs a word).
Then the two sides' stems of those 20,000 words are compared: the ranker's results hold only if the
two give the same stem to every word.

    .venv/bin/python bench/bench_recall_stemmer.py [--memories 10000] [--runs 3]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
from pathlib import Path

from _harness import child_json
from bench_recall_latency import vocabulary, write_memories

_CHILD = """
import json, sys, time
from pathlib import Path
if sys.argv[1] == "pure":
    sys.modules["Stemmer"] = None  # snowballstemmer falls back to its pure-Python stemmers
import snowballstemmer
from memoryd.automem.recall import analysis
from memoryd.automem.store import DirState

many, big, words = Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]).read_text().split()

def timed(load):
    analysis.stem.cache_clear()
    start = time.process_time()
    load()
    return time.process_time() - start

def load(folder):
    DirState(folder).refresh(force=True)

def distinct():
    for word in words:
        analysis.stem(word)

print(json.dumps({
    "backend": type(snowballstemmer.stemmer("english")).__module__,
    "many_s": timed(lambda: load(many)),
    "big_s": timed(lambda: load(big)),
    "word_us": timed(distinct) / len(words) * 1e6,
    "stems": [analysis.stem(w) for w in words],
}))
"""


def distinct_words(rng: random.Random, n: int) -> list[str]:
    """English-like words with the suffixes Snowball works on, none repeated."""
    suffixes = ["", "s", "ing", "ed", "ly", "ness", "ation", "ations", "ities", "ful", "iveness"]
    found: set[str] = set()
    while len(found) < n:
        stem = "".join(rng.choice("abcdefghilmnoprstuy") for _ in range(rng.randint(3, 9)))
        found.add(stem + rng.choice(suffixes))
    return sorted(found)


def write_big(folder: Path, words: list[str]) -> None:
    from memoryd.automem.memfile import MAX_FILE_BYTES, render_memory

    folder.mkdir(parents=True)
    body, size = [], 0
    for word in words:
        if size + len(word) + 1 > MAX_FILE_BYTES - 2_000:
            break
        body.append(word)
        size += len(word) + 1
    text = render_memory("user", "pasted log", "ids from a pasted log", " ".join(body))
    (folder / "user_big.md").write_text(text, encoding="utf-8")


def run(side: str, many: Path, big: Path, words: Path) -> dict[str, object]:
    result: dict[str, object] = child_json(_CHILD, side, str(many), str(big), str(words))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    try:
        import Stemmer  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        print("PyStemmer is not installed: nothing to compare (pip install pystemmer)")
        return 1
    work = Path(tempfile.mkdtemp(prefix="bench-stemmer-"))
    try:
        rng = random.Random(42)
        write_memories(work / "many", args.memories, rng, vocabulary(rng))
        words = distinct_words(random.Random(7), 40_000)
        write_big(work / "big", words[:20_000])
        (work / "words.txt").write_text("\n".join(words[20_000:]), encoding="utf-8")
        # The sides take turns, one load each a process, so that another process's load on
        # the machine falls on both; each keeps its best.
        sides: dict[str, dict[str, object]] = {}
        for _ in range(args.runs):
            for side in ("pure", "c"):
                got = run(side, work / "many", work / "big", work / "words.txt")
                kept = sides.setdefault(side, got)
                for key in ("many_s", "big_s", "word_us"):
                    kept[key] = min(float(kept[key]), float(got[key]))  # type: ignore[arg-type]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    pure, c = sides["pure"], sides["c"]
    print(f"backends: {pure['backend']} | {c['backend']}  (best of {args.runs}, taking turns)")
    print(f"{'':22} {'pure':>10} {'C':>10} {'ratio':>7}")
    for label, key, unit, scale in (
        (f"{args.memories:,} memories load", "many_s", "ms", 1e3),
        ("200 KB memory load", "big_s", "ms", 1e3),
        ("distinct word stemmed", "word_us", "µs", 1.0),
    ):
        a, b = float(pure[key]) * scale, float(c[key]) * scale  # type: ignore[arg-type]
        print(f"{label:22} {a:8.1f}{unit} {b:8.1f}{unit} {a / b:6.1f}x")
    same = pure["stems"] == c["stems"]
    print(f"stems of 20,000 distinct words identical: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
