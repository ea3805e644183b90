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
        "ok, what next?",
        "oops, sorry, ignore my last message",
        "approved",
        # words that steer beside a conversation word
        "ok, next",
        "cancel please",
        "no, revert",
        "no, cancel, revert",
        "i guess?",  # words that are replies unless the query asks a question
        "hmm, actually no, undo that",
        "morning!",
        # a conversation word misspelt by one letter
        "contiue",
        "sounds good, contineu",
        "perfcet",
        "definately",
        "absolutly!",
        "awsome",
        "thnaks",
        "pelase continue",
        "stpo",  # two letters swapped, of four
        "okk",  # a letter doubled
        "lookss good",
        "haha love it",
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
        "cancel",  # a steering word alone: a cancellation flow
        "cancel the cron job",
        "ok, next the docker build",
        # real words one letter from a conversation word
        "prefect",
        "proceeds",
        "Greta",
        "tanks",
        "continued",
        "mourning",  # "morning" with a letter added
        "stoop",  # "stop" with a letter doubled
        "approve",  # a steering word is no misspelling of "approved"
        "tty",  # not "ty" with a letter doubled, nor "npp" "np", nor "nvvm" "nvm"
        "npp",
        "nvvm",
        "reactly",  # two letters from "exactly", not one
        "amazigh",
        # a steering word in a question, or away from any conversation word
        "thanks! why did we revert?",
        "ok, what did we ship?",
        "thanks, what is next?",
        "ok so we ship",
        # a reply word that is the topic of a question
        "what did we do this morning?",
        "who approved it?",
        "was it approved?",
        "what did you guess?",
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


def test_only_words_of_a_reply_s_length_are_tried_as_misspellings() -> None:
    # one letter off a conversation word of 7 letters or more, two swapped of 5 or 6
    assert names_no_topic("continu")
    assert not names_no_topic("thnks")  # "thanks" less a letter: 6 letters are only swapped
    assert not names_no_topic("gerat")  # German "device", "great" with two letters swapped
