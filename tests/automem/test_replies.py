"""Which queries name no topic (`replies.names_no_topic`): `recall` ranks none of them."""

from __future__ import annotations

import pytest

from memoryd.automem.recall_query import query_excerpt
from memoryd.automem.replies import names_no_topic


@pytest.mark.parametrize(
    "reply",
    [
        "continue",
        "Looks good, keep going!",
        "what do you think?",
        "thanks",
        "I'm done",
        "👍",
        "...",
        "why?",  # a question word alone asks about what was just said
        "yesss",  # a letter drawn out
        "cooool, thx!!",
        # phrases whose words may name a topic on their own
        "never mind",
        "got it, thanks",
        "nice work",
        "that works for me",
        "ok, do it",
        "great job!",
        "my bad, revert that",
        "sounds like a plan",
        # other languages, as their speakers type them
        "oui, continue",
        "merci beaucoup !",
        "sí, adelante",
        "¿por qué?",
        "ja, weiter",
        "vielen Dank",
        "valeu, pode continuar",
        "да, продолжай",
        "спасибо",
        # written without spaces: a run of conversation pieces
        "好的",
        "好的谢谢",
        "继续吧",
        "はい、お願いします",
        "続けてください",
        "계속해주세요",
    ],
)
def test_a_reply_names_no_topic(reply: str) -> None:
    assert names_no_topic(reply)


@pytest.mark.parametrize(
    "query",
    [
        "continue the migration",
        "nice work on the parser",
        "thanks, now fix the login test",
        "who am I?",  # stop words alone may ask about the user
        "what do I like?",
        "42",
        # a word that may name a topic alone is no conversation word
        "next",  # Next.js
        "same",
        "retry",  # a retry policy
        "revert",
        "work",
        "works",
        "CA",  # not French "ça"
        "todo",  # not Spanish "todo"
        "top",
        "moment",
        "roger",  # a first name, as are "Dale" (Spanish "go on") and "Jo" (German "yes")
        "Dale",
        "Jo",
        # another language's reply words with a topic
        "merci, et les tests ?",
        "weiter mit der Datenbank",
        "继续优化数据库查询",  # "continue optimising the database query"
        "続けてテストを書いて",  # "go on writing the tests"
        "продолжай писать тесты",
    ],
)
def test_a_query_with_a_topic_is_ranked(query: str) -> None:
    assert not names_no_topic(query)


def test_a_long_run_of_cjk_letters_is_not_split() -> None:
    # Splitting tries every piece at every letter: kept to runs a reply could be (40 letters).
    assert names_no_topic("好的" * 20)
    assert not names_no_topic("好的" * 21)
    assert not names_no_topic(query_excerpt("继续" * 100_000 + "数据库"))
    assert names_no_topic(query_excerpt("好的，" * 100_000))  # many short runs: each is split
