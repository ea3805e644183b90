"""Which replies `recall` leaves unranked: `replies.names_no_topic` on the sets of
reply_sets.py, and on prompts that name a topic, where it must never say yes.

For each set of replies: how many it recognises, beside session 8's recogniser (its word list
alone), and which it misses. For prompts with a
topic: how many it wrongly recognises, over the short prompts written to be hard for it
(conversation words with a subject: "thanks, now fix the login test"), the precision and
pasted benches' prompts, every LoCoMo question and each of its speakers' names alone (when
../shared/eval/ is there: a user looks a colleague up by name). Then its
cost on the event loop: per reply, and for the longest excerpt `recall` passes it (8,000
characters of conversation words, Latin and Chinese).

No model and no daemon: the recogniser is pure.

    .venv/bin/python bench/bench_reply_recognition.py
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import time

import reply_sets
from _harness import eval_dir  # also puts the repository on sys.path
from bench_recall_pasted import SETS
from bench_recall_precision import ABOUT_NONE, ABOUT_ONE, BY_TERM

from memoryd.automem.recall.analysis import STOP_WORDS, fold
from memoryd.automem.recall.query import query_excerpt
from memoryd.automem.recall.replies import names_no_topic

# Session 8's recogniser, side by side: a reply was a query whose words were all these or
# stop words, with one of these at least (or no word at all).
SESSION_8_WORDS = frozenset(
    """yes yeah yep yup ya no nope nah ok okay k kk sure thanks thank thx ty please pls plz
    continue proceed go ahead keep going carry on sounds looks look seems good great nice
    perfect cool awesome excellent fine lgtm done right correct agreed agree exactly indeed
    hmm hm hmmm uh um hi hello hey again try stop wait undo think well alright let's lets
    now then wow oops sorry maybe also""".split()  # noqa: SIM905 - a word list reads best as text
)


def session_8_names_no_topic(text: str) -> bool:
    words = re.findall(r"\w+(?:'\w+)*", fold(text))
    if not all(w in STOP_WORDS or w in SESSION_8_WORDS for w in words):
        return False
    return not words or any(w in SESSION_8_WORDS for w in words)


RECOGNISERS = {"session 8": session_8_names_no_topic, "now": names_no_topic}

REPLY_SETS = {
    "written with the first list": reply_sets.WRITTEN_WITH_THE_LIST,
    "written after it": reply_sets.WRITTEN_AFTER_THE_LIST,
    "unseen, English": reply_sets.UNSEEN_ENGLISH,
    "unseen, other languages": reply_sets.UNSEEN_OTHER_LANGUAGES,
    "unseen (session 11), English": reply_sets.UNSEEN_11_ENGLISH,
    "typos in phrases (s. 12)": reply_sets.TYPOS_IN_PHRASES,
    "three-letter typos (s. 12)": reply_sets.SHORT_TYPOS,
    "unseen (session 12), typos in phrases": reply_sets.UNSEEN_12_TYPOS_IN_PHRASES,
    "unseen (session 12), short typos": reply_sets.UNSEEN_12_SHORT_TYPOS,
    "unseen (session 13), short typos": reply_sets.UNSEEN_13_SHORT_TYPOS,
}


def topical_sets() -> dict[str, list[str]]:
    pasted = [
        f"{p}\n{paste}" for none, one, by in SETS.values() for p, paste, *_ in none + one + by
    ]
    sets = {
        "unseen, short with a topic": reply_sets.UNSEEN_WITH_A_TOPIC,
        "unseen (session 11), short": reply_sets.UNSEEN_11_WITH_A_TOPIC,
        "found in review (session 11)": reply_sets.REVIEW_WITH_A_TOPIC,
        "typo lookalikes (s. 12)": reply_sets.TYPO_LOOKALIKES_WITH_A_TOPIC,
        "unseen (session 12), short with a topic": reply_sets.UNSEEN_12_WITH_A_TOPIC,
        "unseen (session 13), lookalikes": reply_sets.UNSEEN_13_LOOKALIKES,
        "unseen (session 13), typo and topic": reply_sets.UNSEEN_13_TYPOS_WITH_A_TOPIC,
        "precision bench prompts": [p for p, _ in ABOUT_ONE] + ABOUT_NONE + [p for p, _ in BY_TERM],
        "pasted bench prompts": pasted,
    }
    data = eval_dir()
    if data is not None and (data / "locomo10.json").is_file():
        conversations = json.loads((data / "locomo10.json").read_text(encoding="utf-8"))
        sets["LoCoMo questions"] = [qa["question"] for c in conversations for qa in c["qa"]]
        speakers = {c["conversation"][f"speaker_{x}"] for c in conversations for x in "ab"}
        sets["LoCoMo speakers' names alone"] = sorted(speakers)
    return sets


def main() -> int:
    print(f"{'replies':<30} {'recognised: session 8 → now':>28}  missed now")
    for label, replies in REPLY_SETS.items():
        before, now = (sum(map(f, replies)) for f in RECOGNISERS.values())
        missed = ", ".join(repr(r) for r in replies if not names_no_topic(r))
        print(f"{label:<30} {before:>10} → {now:>3} of {len(replies):<4}  {missed}")
    print(f"\n{'prompts with a topic':<30} {'not ranked: session 8 → now':>28}")
    for label, prompts in topical_sets().items():
        excerpts = [query_excerpt(p) for p in prompts]
        before, now = (sum(map(f, excerpts)) for f in RECOGNISERS.values())
        wrong = ", ".join(
            repr(p) for p, e in zip(prompts, excerpts, strict=True) if names_no_topic(e)
        )
        print(f"{label:<30} {before:>10} → {now:>3} of {len(prompts):<4}  {wrong}")

    replies = [r for rs in REPLY_SETS.values() for r in rs]
    runs = []
    for _ in range(20):
        start = time.perf_counter()
        for reply in replies:
            names_no_topic(reply)
        runs.append((time.perf_counter() - start) / len(replies))
    per_reply = statistics.median(runs) * 1e6
    print(f"\nper reply: {per_reply:.1f} µs (median of 20 runs over {len(replies)})")
    for label, text in {
        "8,000 characters of 'keep going '": "keep going " * 1_000,
        "8,000 characters of 'okk '": "okk " * 2_500,  # each word tried as a misspelling
        "8,000 characters of 'next ' and 'ok'": "next " * 1_599 + "ok",  # one run of steering
        "8,000 characters of '好的，'": "好的，" * 3_000,
        "8,000 characters of '好的' (one run)": "好的" * 5_000,
    }.items():
        excerpt = query_excerpt(text)
        start = time.perf_counter()
        answer = names_no_topic(excerpt)
        print(f"{label:<40} {(time.perf_counter() - start) * 1e3:6.2f} ms  (no topic: {answer})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
