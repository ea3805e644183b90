"""Writes memoryd/automem/recall/reply_lookalikes.py: the real words that a conversation word
with a slip of the keys looks like ("sound" for "sounds", "mice" for "nice", "scrape" for "scrap"),
so that `replies.names_no_topic` reads them as topics, not as misspelt replies.

Real words are wordfreq's 50,000 commonest in English, French, Spanish, German, Portuguese and
Italian. wordfreq is no dependency of memoryd; after changing a list of replies.py, run
`.venv/bin/pip install --target /tmp/wordfreq wordfreq` and
`PYTHONPATH=/tmp/wordfreq .venv/bin/python scripts/make_reply_lookalikes.py`.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import wordfreq

from memoryd.automem.recall import reply_lookalikes
from memoryd.automem.recall.replies import slip_forms, slip_forms_digest

TARGET = Path(reply_lookalikes.__file__)  # the module rewritten, wherever it was moved to
LANGUAGES = ("en", "fr", "es", "de", "pt", "it")
COMMONEST = 50_000
# Real words that are replies all the same: laughter, and a misspelling common enough to count.
REPLIES_ALL_THE_SAME = frozenset({"ahaha", "ahahaha", "hahah", "hahahah", "realy", "welp"})


def main() -> int:
    real: set[str] = set()
    for language in LANGUAGES:
        real.update(wordfreq.top_n_list(language, COMMONEST))
    found = sorted((slip_forms() & real) - REPLIES_ALL_THE_SAME)
    words = textwrap.fill(
        " ".join(found), width=92, initial_indent="    ", subsequent_indent="    "
    )
    TARGET.write_text(
        '"""Written by scripts/make_reply_lookalikes.py: do not edit by hand. The real words a\n'
        "conversation word with a slip of the keys looks like (of wordfreq's 50,000 commonest in\n"
        'six languages): they stay topics."""\n\n'
        f'_WORDS = """\n{words}\n"""\nLOOKALIKE_WORDS = frozenset(_WORDS.split())\n'
        "# `replies.slip_forms_digest()` when this was written: a test compares it with today's\n"
        f'FORMS_DIGEST = "{slip_forms_digest()}"\n'
    )
    print(f"{len(found)} words -> {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
