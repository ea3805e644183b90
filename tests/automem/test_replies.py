"""Which queries name no topic (`replies.names_no_topic`): `recall` ranks none of them."""

from __future__ import annotations

import pytest

from memoryd.automem.recall.query import query_excerpt
from memoryd.automem.recall.replies import names_no_topic, slip_forms, slip_forms_digest
from memoryd.automem.recall.reply_lookalikes import FORMS_DIGEST, LOOKALIKE_WORDS


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
    # one letter off a conversation word of 7 letters or more; of 5 or 6, a letter dropped, one
    # struck beside its key, a key slipped or two swapped; of 4, only two swapped alone
    assert names_no_topic("continu")
    assert names_no_topic("thnks")  # "thanks" less a letter
    assert names_no_topic("thamks")  # n and m are side by side
    assert names_no_topic("greaqt")  # q struck with a
    assert not names_no_topic("thabks, now the cache")
    assert not names_no_topic("thazks")  # z is nowhere near n
    assert not names_no_topic("notemd")  # m is nowhere near e or d: a file name, maybe
    assert not names_no_topic("gerat")  # German "device", "great" with two letters swapped
    assert not names_no_topic("gpod")  # "good" slipped: alone, four letters may be a name
    assert not names_no_topic("sound")  # a real word: "sounds" less a letter (LOOKALIKE_WORDS)
    assert not names_no_topic("tanks")


# Each pair: a four-letter conversation word with a key slipped beside other replies, and a
# real word one slip from one beside a reply, which stays a topic (LOOKALIKE_WORDS).
@pytest.mark.parametrize(
    ("reply", "query"),
    [
        ("looks gpod", "ok, food"),
        ("yeag ok", "ok mice"),
        ("nixe one!", "nice one, now the mine sweeper"),
        ("sounds goid", "sounds, gold"),
        ("ok, thnks", "thanks, hood"),
    ],
)
def test_a_four_letter_word_slipped_counts_only_among_replies(reply: str, query: str) -> None:
    assert names_no_topic(reply)
    assert not names_no_topic(query)


# Found in review: a plural is no misspelling, and terms and packages a slip makes are listed.
@pytest.mark.parametrize(
    "query",
    [
        "any gotchas?",
        "what are the gotchas?",
        "maybes",
        "what about aead?",
        "HELO",
        "zhead",
        "try gping",
        "ok now kops",
        "ok, iops?",
        "ok, gopd",
    ],
)
def test_a_term_a_slip_of_the_keys_makes_stays_a_topic(query: str) -> None:
    assert not names_no_topic(query)


def test_the_lookalike_words_were_written_for_the_lists_as_they_are() -> None:
    # written by scripts/make_reply_lookalikes.py: after a list of replies.py changes, its
    # slips are new and the real words among them unknown, so the script wants running again
    assert LOOKALIKE_WORDS
    assert slip_forms() >= LOOKALIKE_WORDS
    assert slip_forms_digest() == FORMS_DIGEST, "run scripts/make_reply_lookalikes.py"


# Each pair: a phrase's word misspelt, which names no topic, and a query that looks like it but
# names one: a real word where the phrase's word was ("nice word"), two words off, or a topic
# after the phrase.
@pytest.mark.parametrize(
    ("reply", "query"),
    [
        ("nice wokr", "nice word"),  # "work" swapped; "word" is a letter changed, and real
        ("great wrok", "nice fork"),
        ("good cacth", "good cache"),
        ("nice cacth", "good match"),
        ("sure thign", "sure things happen in prod"),
        ("revert taht", "revert taht commit"),
        ("thansk a lot!", "thansk, now the login test"),
        ("nevre mind", "nevre mnid"),  # the first word misspelt, found by the second; not two
        ("that wroks for me", "that wroks for me on the staging box"),
        ("not qutie", "not quiet"),  # a real word one swap away is listed (NOT_MISSPELT)
        ("start ovre", "strat over"),
        ("good mornign", "good mourning"),
        ("ok, thanks a lto", "thanks a loot"),  # three letters swapped, in a phrase
        ("got it, thanks a lto", "got git"),
        ("ignore my previuos message", "ignore my precious message"),  # seven letters: one off
        ("much apreciated", "much apreciated, now the cache"),
        ("nicee work", "nice wokr on the parser"),  # a letter doubled
    ],
)
def test_a_phrase_word_misspelt_is_that_word_but_not_a_real_word(reply: str, query: str) -> None:
    assert names_no_topic(reply)
    assert not names_no_topic(query)


# Each pair: a three-letter conversation word with two letters swapped beside other replies,
# and the same swap alone, beside a stop word or a topic, or a real word or acronym one swap
# from a reply word beside a reply.
@pytest.mark.parametrize(
    ("reply", "query"),
    [
        ("yse please", "yse"),  # alone, three letters are as often an acronym
        ("ok yse", "what about yse?"),
        ("yse, go ahead", "yse npm"),
        ("yse, that works", "the yse"),
        ("plz, yse", "LTE please"),  # "let" swapped, listed
        ("ok txh", "ok, lps"),  # "pls" swapped, listed
        ("yhe, ok", "tyr, please"),  # "try" swapped, listed
        ("wwo, thanks", "ELT please"),
    ],
)
def test_a_three_letter_word_swapped_counts_only_among_replies(reply: str, query: str) -> None:
    assert names_no_topic(reply)
    assert not names_no_topic(query)


# Short tech and English words, alone or beside a reply: none is a conversation word misspelt.
@pytest.mark.parametrize(
    "word",
    """npm git tsc api vim cdn dns jwt orm sue yew nod oak yak set tab ten ton net one eon see
    sea""".split(),  # noqa: SIM905 - a word list reads best as text
)
def test_a_three_letter_word_that_is_no_swap_of_a_reply_stays_a_topic(word: str) -> None:
    assert not names_no_topic(word)
    assert not names_no_topic(f"ok, {word}")
    assert not names_no_topic(f"{word} please")


def test_a_misspelt_phrase_is_read_by_the_rules_of_its_word_s_length() -> None:
    # the longest phrase wins, misspelt or not: not "ignore that" and a stray "mesage"
    assert names_no_topic("ignore that mesage")
    assert names_no_topic("no porblem")  # seven letters: two swapped is one edit
    assert names_no_topic("nevr mind")  # five letters: a letter dropped, as alone
    assert not names_no_topic("scrape it")  # "scrap it" and a letter: a real word
    assert not names_no_topic("makes sence")  # c is no key beside s
    assert not names_no_topic("go for ti")  # "it" swapped: each two-letter swap is a word
    assert not names_no_topic("sounds good, go fro it")  # "fro" is a word
