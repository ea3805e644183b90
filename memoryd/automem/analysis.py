"""Text analysis for the local ranker: tokens, stop words, stems (pure, cached).

English words are stemmed (Snowball) after stop words are dropped; Cyrillic words get
Snowball's Russian stemmer; Chinese, Japanese and Korean text is indexed as overlapping
pairs of characters (the usual dictionary-free way to find words written without spaces, or
with a Korean particle attached); words of other scripts are kept whole."""

from __future__ import annotations

import re
import unicodedata
from functools import cache, lru_cache

import snowballstemmer  # type: ignore[import-untyped]

# A CJK run (Han, kana, Hangul), or a word of letters and digits (possessive `'s` kept).
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_ASCII_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")  # the same, for ASCII text (the hot path)
# Combining marks that make another letter rather than accent one, kept by `fold`: kana voicing
# (か → が) and, after и, the breve of й (Russian endings such as -ый need it to stem).
_VOICING = frozenset("\u3099\u309a")
_BREVE = "\u0306"
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

_stemmer = snowballstemmer.stemmer("english")
_russian = snowballstemmer.stemmer("russian")


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    if word.isascii():
        return str(_stemmer.stemWord(word))
    if _CYRILLIC.search(word):
        return str(_russian.stemWord(word))
    return word


def fold(text: str) -> str:
    """Lower case, accents removed, typographic apostrophes made plain; then composed again
    (NFC), so Hangul is syllables again and a kept mark is one letter with its base."""
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text.lower())
    kept = [
        c
        for i, c in enumerate(decomposed)
        if not unicodedata.combining(c)
        or c in _VOICING
        or (c == _BREVE and i and decomposed[i - 1] == "и")
    ]
    return unicodedata.normalize("NFC", "".join(kept))


@cache
def _token() -> re.Pattern[str]:
    """The tokens of non-ASCII text, made on first use: a word also runs on through the marks
    that `fold` keeps (vowel signs of Devanagari, Thai and the like are not `\\w`), so those
    words stay whole instead of breaking at every vowel."""
    marks = [c for c in range(0x300, 0x20000) if unicodedata.category(chr(c))[0] == "M"]
    spans: list[list[int]] = []
    for c in marks:
        if spans and spans[-1][1] == c - 1:
            spans[-1][1] = c
        else:
            spans.append([c, c])
    spans.append([0xE0100, 0xE01EF])  # variation selectors, the only marks further up
    mark = "".join(f"{chr(a)}-{chr(b)}" for a, b in spans)
    return re.compile(rf"[{_CJK}]+|[^\W_{_CJK}](?:[^\W_{_CJK}]|[{mark}])*(?:'[a-z]+)?")


def raw_tokens(text: str) -> list[str]:
    folded = fold(text)
    return (_ASCII_TOKEN if folded.isascii() else _token()).findall(folded)


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
