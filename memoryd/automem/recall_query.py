"""What of a recall query is read: its start and its end, where a prompt usually says what it
wants. The local ranker's cost grows with the query's words and it runs on the event loop (a
100,000-character query held the daemon for 2 s at 10,000 memories); the model selector is
billed by the token. Both read the same excerpt, so they answer the same question.

And whether it names a topic at all: much of what a user types to an agent is "continue",
"looks good" or "thanks", and whatever recall finds for those is noise in the agent's context."""

from __future__ import annotations

import re

from memoryd.automem.analysis import STOP_WORDS, fold

QUERY_EXCERPT_CHARS = 8_000

# Words of replies that steer a conversation without naming what it is about: assent,
# refusal, thanks, go on, stop, undo, greetings. A word that could name a topic on its own is
# not one of them: "work", "ship", "test", "next" (Next.js), "same", "retry" (a retry policy),
# "revert", "cancel", "sound", "approve", "works".
CONVERSATION_WORDS = frozenset(
    """yes yeah yep yup ya no nope nah ok okay k kk sure thanks thank thx ty please pls plz
    continue proceed go ahead keep going carry on sounds looks look seems good great nice
    perfect cool awesome excellent fine lgtm done right correct agreed agree exactly indeed
    hmm hm hmmm uh um hi hello hey again try stop wait undo think well alright let's lets
    now then wow oops sorry maybe also""".split()  # noqa: SIM905 - a word list reads best as text
)
_QUERY_WORD = re.compile(r"\w+(?:'\w+)*")


def query_excerpt(query: str) -> str:
    """`query` itself when short; else its first and last QUERY_EXCERPT_CHARS / 2 characters."""
    if len(query) <= QUERY_EXCERPT_CHARS:
        return query
    half = QUERY_EXCERPT_CHARS // 2
    return f"{query[:half]}\n{query[-half:]}"


def names_no_topic(query: str) -> bool:
    """True for a query of conversation words and stop words ("keep going", "what do you
    think?", "thanks!") or of no word at all ("👍"): no memory is about it. A query of stop
    words alone ("who am I?") may still ask about the user; a digit or a word of any other
    script is a topic."""
    words = _QUERY_WORD.findall(fold(query_excerpt(query)))
    if not all(w in STOP_WORDS or w in CONVERSATION_WORDS for w in words):
        return False
    return not words or any(w in CONVERSATION_WORDS for w in words)
