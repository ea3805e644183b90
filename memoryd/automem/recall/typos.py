"""The forms a word takes when it is typed wrong: a letter dropped, added, doubled or slipped
to a key beside it, two letters swapped. Pure: which forms count as which word, and for which
words, is `replies`'s business."""

from __future__ import annotations

from functools import lru_cache

_KEYBOARD = ("qwertyuiop", "asdfghjkl", "zxcvbnm")  # each row sits half a key right of the last


def _keys_beside(row: int, i: int) -> str:
    """The keys around the `i`th of keyboard row `row`: a finger slips to one of them."""
    around = [
        (row, i - 1),
        (row, i + 1),
        (row - 1, i),
        (row - 1, i + 1),
        (row + 1, i - 1),
        (row + 1, i),
    ]
    return "".join(
        _KEYBOARD[r][j] for r, j in around if 0 <= r < len(_KEYBOARD) and 0 <= j < len(_KEYBOARD[r])
    )


_KEYS_BESIDE = {
    key: _keys_beside(r, i) for r, keys in enumerate(_KEYBOARD) for i, key in enumerate(keys)
}


def one_dropped(word: str) -> set[str]:
    """`word` with one letter left out."""
    return {word[:i] + word[i + 1 :] for i in range(len(word))}


def one_undoubled(word: str) -> set[str]:
    """`word` with a doubled vowel, or its doubled last letter, written once ("lookss" →
    "looks", "noo" → "no"), when three letters or more are left."""
    if len(word) < 4 and word[-1:] not in "aeiouy":
        return set()  # "tty", "npp": a name, not "ty" or "np" misspelt
    return {
        word[:i] + word[i + 1 :]
        for i in range(len(word) - 1)
        if word[i] == word[i + 1] and (word[i] in "aeiouy" or i == len(word) - 2)
    }


@lru_cache(maxsize=1024)  # asked of the few words of the reply lists, often
def near_forms(word: str) -> frozenset[str]:
    """`word` with a letter dropped, one added beside a key it is next to, or one changed to a
    key beside it; not the word with an "s", which is another word."""
    # an added letter is one struck with a letter beside it: the same, or a key beside it
    added = {
        word[:i] + c + word[i:]
        for i in range(len(word) + 1)
        for k in word[max(i - 1, 0) : i + 1]
        for c in k + _KEYS_BESIDE.get(k, "")
    }
    # the word with an s is its plural or its verb's ("gotchas", "maybes"), no misspelling
    return frozenset(one_dropped(word) | added | slipped(word)) - {f"{word}s"}


@lru_cache(maxsize=1024)  # asked of the few words of the reply lists, often
def slipped(word: str) -> frozenset[str]:
    """`word` with one letter changed to a key beside it."""
    return frozenset(
        word[:i] + c + word[i + 1 :] for i, k in enumerate(word) for c in _KEYS_BESIDE.get(k, "")
    )


def two_swapped(word: str) -> set[str]:
    """`word` with two adjacent letters swapped."""
    return {word[:i] + word[i + 1] + word[i] + word[i + 2 :] for i in range(len(word) - 1)}


def swapped_once(typed: str, word: str) -> bool:
    """Whether `typed` is `word` with two adjacent letters swapped (no set is built: this is
    asked of each word of a long reply, for each phrase it may belong to)."""
    if len(typed) != len(word):
        return False
    apart = [i for i, (a, b) in enumerate(zip(typed, word, strict=True)) if a != b]
    return (
        len(apart) == 2
        and apart[1] == apart[0] + 1
        and typed[apart[0]] == word[apart[1]]
        and typed[apart[1]] == word[apart[0]]
    )


def one_edit_apart(typed: str, word: str) -> bool:
    """Whether `typed` is `word` with one letter dropped, added or changed, or two adjacent
    letters swapped."""
    if len(typed) == len(word):
        apart = sum(a != b for a, b in zip(typed, word, strict=True))
        return apart == 1 or swapped_once(typed, word)
    shorter, longer = sorted((typed, word), key=len)
    if len(longer) - len(shorter) != 1:
        return False
    i = next(
        (i for i, (a, b) in enumerate(zip(shorter, longer, strict=False)) if a != b), len(shorter)
    )
    return shorter[i:] == longer[i + 1 :]
