"""Experiment (session 20): would `replies.names_no_topic` gain from taking a four-letter
conversation word's typo alone ("okat" for "okay", "shure" for "sure"), not only beside other
replies ("yeag ok")?

Two rules are tried, each beside the recogniser as it is: a key slipped to one beside it
(`typos.slipped`: "okat", "wair", "fime") and a letter struck beside the key it is next to
(`typos.near_forms`' added letters: "shure"), of each four-letter English conversation word,
alone. For each: the replies of bench/reply_sets.py it newly recognises; the prompts with a
topic of bench_reply_recognition.py it newly leaves unranked; and which of the forms are
package names, or parts of them, on PyPI and npm (a user may look one up by its name alone),
from name lists given as files (one `name<TAB>…` line each; a first line that is a header is
harmless). A form that is a common English word ("await", "drone", "swell") is read off the
output: no word list is installed.

    .venv/bin/python bench/experiment_reply_typos.py [pypi.tsv npm.tsv …]
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

import bench_reply_recognition as recognition  # also puts the repository on sys.path

from memoryd.automem.recall import replies
from memoryd.automem.recall.analysis import STOP_WORDS
from memoryd.automem.recall.query import query_excerpt
from memoryd.automem.recall.typos import near_forms, slipped

_NAME_PARTS = re.compile(r"[-_.@/]")


def four_letter_forms(forms_of: Callable[[str], frozenset[str]]) -> set[str]:
    """The forms of each four-letter English conversation word that are no word of the lists,
    no stop word and not known as a real word (`NOT_MISSPELT`, the lookalikes)."""
    vocabulary = replies._vocabulary()
    words = [w for w in vocabulary.english if len(w) == 4]
    forms = {f for w in words for f in forms_of(w)}
    return forms - vocabulary.words - STOP_WORDS - vocabulary.not_misspelt


def package_names(files: list[Path]) -> set[str]:
    names: set[str] = set()
    for file in files:
        with file.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                name = line.split("\t", 1)[0].strip().lower()
                names.add(name)
                names.update(p for p in _NAME_PARTS.split(name) if p)
    return names


def measure(label: str, alone: set[str], names: set[str]) -> None:
    as_it_is = replies._misspelt

    def with_rule(word: str, vocabulary: replies._Vocabulary) -> bool:
        return as_it_is(word, vocabulary) or word in alone

    gained = [
        r
        for rs in recognition.REPLY_SETS.values()
        for r in rs
        if not replies.names_no_topic(r) and _with(with_rule, r)
    ]
    wrong = [
        p
        for ps in recognition.topical_sets().values()
        for p in ps
        if _with(with_rule, query_excerpt(p))
    ]
    print(f"{label}: {len(alone)} forms")
    print(f"  replies newly recognised ({len(gained)}): {gained}")
    print(f"  prompts with a topic newly unranked ({len(wrong)}): {wrong}")
    if names:
        hits = sorted(alone & names)
        print(f"  package names or parts newly unranked ({len(hits)}): {', '.join(hits)}")


def _with(rule: Callable[[str, replies._Vocabulary], bool], text: str) -> bool:
    kept = replies._misspelt
    replies._misspelt = rule  # type: ignore[assignment]
    try:
        return replies.names_no_topic(text)
    finally:
        replies._misspelt = kept


def main(argv: list[str]) -> int:
    names = package_names([Path(a) for a in argv])
    measure("a key slipped, alone", four_letter_forms(slipped), names)
    added = {f for f in four_letter_forms(near_forms) if len(f) == 5}
    measure("a letter struck beside a key, alone", added, names)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
