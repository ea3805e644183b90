"""Which replies `recall` leaves unranked: `replies.names_no_topic` on the sets of
reply_sets.py, and on prompts that name a topic, where it must never say yes.

For each set of replies: how many it recognises, and which it misses. For prompts with a
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
import statistics
import sys
import time

import reply_sets
from _harness import eval_dir  # also puts the repository on sys.path
from bench_recall_pasted import SETS
from bench_recall_precision import ABOUT_NONE, ABOUT_ONE, BY_TERM

from memoryd.automem.recall_query import query_excerpt
from memoryd.automem.replies import names_no_topic

REPLY_SETS = {
    "written with the first list": reply_sets.WRITTEN_WITH_THE_LIST,
    "written after it": reply_sets.WRITTEN_AFTER_THE_LIST,
    "unseen, English": reply_sets.UNSEEN_ENGLISH,
    "unseen, other languages": reply_sets.UNSEEN_OTHER_LANGUAGES,
}


def topical_sets() -> dict[str, list[str]]:
    pasted = [
        f"{p}\n{paste}" for none, one, by in SETS.values() for p, paste, *_ in none + one + by
    ]
    sets = {
        "unseen, short with a topic": reply_sets.UNSEEN_WITH_A_TOPIC,
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
    print(f"{'replies':<30} {'recognised':>14}  missed")
    for label, replies in REPLY_SETS.items():
        missed = [r for r in replies if not names_no_topic(r)]
        found = len(replies) - len(missed)
        print(f"{label:<30} {found:>7} of {len(replies):<4}  {', '.join(map(repr, missed))}")
    print(f"\n{'prompts with a topic':<30} {'not ranked':>14}")
    for label, prompts in topical_sets().items():
        wrong = [p for p in prompts if names_no_topic(query_excerpt(p))]
        print(f"{label:<30} {len(wrong):>7} of {len(prompts):<4}  {', '.join(map(repr, wrong))}")

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
