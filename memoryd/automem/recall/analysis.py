"""Text analysis for the local ranker: tokens, stop words, stems (pure, cached).

English words are stemmed (Snowball) after stop words are dropped; Cyrillic words get
Snowball's Russian stemmer; Chinese, Japanese and Korean text is indexed as overlapping
pairs of characters (the usual dictionary-free way to find words written without spaces, or
with a Korean particle attached); words of other scripts are kept whole."""

from __future__ import annotations

import re
import threading
import unicodedata
from functools import cache, lru_cache
from typing import Any

import snowballstemmer  # type: ignore[import-untyped]

# A CJK run (Han, kana, Hangul), or a word of letters and digits (possessive `'s` kept).
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_ASCII_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")  # the same, for ASCII text (the hot path)
# Combining marks that make another letter rather than accent one, kept by `fold`: kana voicing
# (か → が) and, after и, the breve of й (Russian endings such as -ый need it to stem).
_KEPT_MARKS = frozenset("\u3099\u309a\u0306")
_BREVE = "\u0306"
# What `fold` composes again after decomposing: kana and their voicing, Hangul's letters (jamo).
_RECOMPOSE = re.compile("[\u1100-\u11ff\u3099\u309a]")
_CYRILLIC = re.compile(r"[\u0400-\u04ff]")

STOP_WORDS = frozenset(
    """a about above after again against all am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do does
    doesn't doing don't down during each few for from further had hadn't has hasn't have haven't
    having he he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll
    i'm i've if in into is isn't it it's its itself let's me more most mustn't my myself no nor
    not of off on once only or other ought our ours ourselves out over own same shan't she she'd
    she'll she's should shouldn't so some such than that that's the their theirs them themselves
    then there there's these they they'd they'll they're they've this those through to too under
    until up very was wasn't we we'd we'll we're we've were weren't what what's when when's where
    where's which while who who's whom why why's with won't would wouldn't you you'd you'll
    you're you've your yours yourself yourselves also just s t""".split()  # noqa: SIM905 - a word list reads best as text
)

_per_thread = threading.local()


def _stemmers() -> tuple[Any, Any]:
    """This thread's English and Russian stemmers. A Snowball stemmer keeps the word it works
    on in itself, so one shared by two threads (an agent's write check in a thread, a query on
    the loop) gave a word the other's stem or raised IndexError."""
    pair: tuple[Any, Any] | None = getattr(_per_thread, "pair", None)
    if pair is None:
        pair = _per_thread.pair = (_uncached("english"), _uncached("russian"))
    return pair


def _uncached(language: str) -> Any:
    stemmer = snowballstemmer.stemmer(language)
    # PyStemmer's (C) stemmers keep a cache of their own, a list per word, which the collector
    # walks on each full collection (10,000 a stemmer): `stem`'s cache is the one kept.
    if hasattr(stemmer, "maxCacheSize"):
        stemmer.maxCacheSize = 0
    return stemmer


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    if word.isascii():
        return str(_stemmers()[0].stemWord(word))
    if _CYRILLIC.search(word):
        return str(_stemmers()[1].stemWord(word))
    return word


def fold(text: str) -> str:
    """Lower case, accents removed, typographic apostrophes made plain; a letter made with a
    mark (й, が) or of Hangul syllables stays one letter."""
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text.lower())
    kept = "".join(c for c in decomposed if not unicodedata.combining(c) or c in _KEPT_MARKS)
    if _BREVE in kept:  # й again; any other breve is an accent (ă, ğ)
        kept = kept.replace("и" + _BREVE, "й").replace(_BREVE, "")
    if _RECOMPOSE.search(kept):
        kept = unicodedata.normalize("NFC", kept)
    return kept


_WORD_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+(?:'[a-z]+)?")  # text without marks


@cache
def _marks() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(what may be a mark, the tokens of text with marks), made on first use: a word also runs
    on through the marks that `fold` keeps (vowel signs of Devanagari, Thai and the like are not
    `\\w`), so those words stay whole instead of breaking at every vowel."""
    marks = [c for c in range(0x300, 0x20000) if unicodedata.category(chr(c))[0] == "M"]
    spans: list[list[int]] = []
    for c in marks:
        if spans and spans[-1][1] == c - 1:
            spans[-1][1] = c
        else:
            spans.append([c, c])
    spans.append([0xE0100, 0xE01EF])  # variation selectors, the only marks further up
    bmp, astral = (
        "".join(f"{chr(a)}-{chr(b)}" for a, b in spans if (a > 0xFFFF) is up)
        for up in (False, True)
    )
    # `re` tests a class holding many ranges above U+FFFF range by range, for every character:
    # those are tried only on such a character, the rest is a fast table.
    mark = rf"(?:[{bmp}]|(?=[\U00010000-\U0010ffff])[{astral}])"
    word = rf"(?:[^\W_{_CJK}]++{mark}*+)++"  # possessive: nothing to backtrack into
    maybe_mark = rf"[{bmp}\U00010000-\U0010ffff]"  # any character beyond the BMP may be one
    return re.compile(maybe_mark), re.compile(rf"[{_CJK}]+|{word}(?:'[a-z]+)?")


def raw_tokens(text: str) -> list[str]:
    folded = fold(text)
    if folded.isascii():
        return _ASCII_TOKEN.findall(folded)
    maybe_mark, with_marks = _marks()
    return (with_marks if maybe_mark.search(folded) else _WORD_TOKEN).findall(folded)


def terms(text: str) -> list[str]:
    """Stemmed content terms: stop words dropped, possessives folded (`caroline's` → caroline)."""
    out = []
    for token in raw_tokens(text):
        if token[0] >= "\u3040" and _is_cjk(token):
            out.extend(_pairs(token))
            continue
        if token in STOP_WORDS:
            continue
        if token.endswith("'s"):
            token = token[:-2]
        token = token.replace("'", "")
        if token and token not in STOP_WORDS:
            out.append(stem(token))
    return out


def _is_cjk(token: str) -> bool:
    return re.fullmatch(f"[{_CJK}]+", token) is not None


def _pairs(run: str) -> list[str]:
    """東京都 → 東京, 京都: each character pair, or the lone character of a one-character run."""
    return [run[i : i + 2] for i in range(len(run) - 1)] or [run]


# Words that shape a question but rarely say what it is about; dropped from queries only,
# when the query keeps at least one other term.
QUESTION_WORDS = frozenset(
    """kind type sort way ways thing things something anything feel felt think thought
    recently ever usually often much many one ones get got go went gone make made
    like likes enjoy enjoys does do did""".split()  # noqa: SIM905 - a word list reads best as text
)
QUESTION_STEMS = frozenset(stem(w) for w in QUESTION_WORDS)


def query_terms(text: str) -> list[str]:
    found = terms(text)
    kept = [t for t in found if t not in QUESTION_STEMS]
    return kept or found
