"""Whether a query names a topic at all. Much of what a user types to an agent is "continue",
"looks good", "never mind", "merci" or "继续", and the Claude Code hook sends each one to
`recall`: whatever a ranker finds for those is noise in the agent's context.

A query names no topic when each of its words is a conversation word or a stop word, or
belongs to a conversation phrase, or is a word that steers only beside those ("ok, next"),
with at least one conversation word or phrase; or when it has no word at all ("👍"), or is
one question word alone ("why?"). A conversation word misspelt by one letter ("contiue",
"thnaks") is that word, and so is a phrase's word misspelt when the rest of the phrase is as
written ("nice wokr", "revert taht"); a three-letter one with two letters swapped ("yse")
counts only beside other replies ("yse please"). Chinese, Japanese and Korean replies are
written without spaces, so such a run of letters names no topic when it splits wholly into
conversation pieces ("好的谢谢", "続けてください"). Pure: the lists below are the whole of it."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache, lru_cache

from memoryd.automem.recall.analysis import STOP_WORDS, fold
from memoryd.automem.recall.reply_lookalikes import LOOKALIKE_WORDS
from memoryd.automem.recall.typos import (
    near_forms,
    one_dropped,
    one_edit_apart,
    one_undoubled,
    slipped,
    swapped_once,
    two_swapped,
)

# Words that are replies wherever they stand: assent, refusal, thanks, praise, go on, stop,
# undo, hesitation, greetings; folded (lower case, no accents). A word that could name a topic
# on its own is not one of them: "work", "ship", "test", "next" (Next.js), "same", "retry" (a
# retry policy), "revert", "cancel", "sound", "approve", "works", "top" (the command), "todo",
# "moment" (moment.js), nor a first name ("roger", Spanish "dale", German "jo"). Those count
# only inside a phrase ("nice work", "that works", "roger that"), and some beside a
# conversation word (STEERING_WORDS).
ENGLISH_WORDS = """
    yes yeah yea yeh yep yup ya yah aye no nope nah ok okay okie k kk sure surely thanks thank
    thx ty tysm thankyou cheers please pls plz continue proceed go ahead keep going carry on
    sounds looks look seems good great nice perfect cool awesome excellent fine lgtm done right
    correct agreed agree exactly indeed absolutely definitely certainly totally really much
    hmm hm uh um ah oh aha huh wow oops whoops hi hello hey again try stop wait undo think
    well alright aight let's lets now then sorry maybe also understood noted ack gotcha
    nevermind nvm np sweet amazing brilliant fantastic wonderful neat yay let wrong okk noo
    haha hahaha lol
"""
# Replies alone or beside other replies ("approved", "morning!", "i guess", "actually, no"),
# but the topic of a question ("who approved it?", "was it approved?", "what did we do this
# morning?"): they count only in a query that asks nothing (`_asks`).
UNLESS_ASKED = frozenset({"approved", "morning", "guess", "actually"})
# Words that steer the conversation right beside a conversation word ("ok, next", "cancel
# please", "no, revert"), but alone, or in a question, may be what a user looks up ("cancel":
# a cancellation flow; "why did we revert?").
STEERING_WORDS = frozenset({"next", "retry", "revert", "cancel", "approve", "ship"})
# Other languages' replies and the function words they come with ("c'est bon", "vielen Dank",
# "da, davai"), folded as queries are: "sí" is "si", "schön" is "schon", "всё" is "все".
OTHER_WORDS = """
    oui ouais non merci beaucoup continuez continuer vas allez y d'accord parfait super genial
    bien tres bon bonne arrete arretez attends attendez bonjour salut voila c'est pas encore
    essaie reessaie annule bravo entendu compris vu oups desole pardon s'il te vous plait
    je tu il on et le la les un une moi toi fais fait
    si vale adelante sigue sigamos continua gracias muchas muchisimas perfecto muy bueno
    buena claro listo hecho acuerdo de hola espera para eso es esta otra vez intenta hazlo por
    favor porfa exacto correcto entendido perdon lo siento venga va vamos que dejalo asi
    ja jep nein nee danke dankeschon vielen dank bitte weiter weitermachen mach mache genau
    gut prima klasse perfekt okay stimmt passt klar alles hallo moin halt stopp warte sehr schon
    ist das es mal noch einmal nochmal ruckgangig verstanden entschuldigung los gerne
    sim nao obrigado obrigada valeu beleza pode continue continuar perfeito certo otimo isso
    tudo bem pare
    grazie mille vai avanti perfetto bene benissimo ottimo fatto prego ciao basta aspetta esatto
    да нет ага угу спасибо спс благодарю продолжай продолжайте продолжи давай давайте хорошо ок
    окей отлично понятно ясно ладно стоп подожди привет супер класс норм нормально верно точно
    согласен так это все пожалуйста большое огромное дальше круто сделай можно отмени молодец
    извини
"""
# Phrases whose words may name a topic alone ("work", "works", "catch", "plan", "leave").
PHRASES = """
    never mind | got it | get it | i see | makes sense | that works | works for me | it works |
    fair enough | no worries | no problem | no prob | my bad | nice work | good work |
    great work | nice job | good job | great job | well done | nicely done | nice one |
    good one | good catch | nice catch | good call | good point | fair point | go for it |
    ship it | do it | do that | do this | do so | do both | leave it | forget it |
    scratch that | not quite | not really | not yet | of course | sure thing | you bet |
    for sure | sounds like a plan | i agree | you're right | that's right | that's it |
    all good | all set | so far so good | thumbs up | hold on | hang on | one sec |
    just a sec | hold up | take your time | no rush | move on | keep it up | keep at it |
    much appreciated | appreciate it | many thanks | good morning | good afternoon |
    good evening | good night | start over | up to you | your call | as you wish |
    a sec | revert that | revert it | cancel that | cancel it | ignore that | ignore it |
    it worked | that worked | thanks a lot | roger that | what next | what's next | whats next |
    ignore my last message | ignore my previous message | ignore the last message |
    ignore that message | disregard that | disregard it | disregard my last message |
    love it | scrap that | scrap it | your way |
    todo bien | todo listo | ca marche | ca roule | ca va | mach weiter | tudo certo | va bene
"""
# A conversation word misspelt: one letter dropped, added, changed, or two swapped, of an
# English conversation word of `_TYPO_LENGTH` letters or more ("contiue", "perfcet"); two
# letters swapped of a shorter one, of four letters or more ("thnaks", "stpo"); a letter
# doubled ("okk", "lookss"). A phrase's word, by the same rules, when the phrase's other
# words are as written: there two letters swapped of a word of three letters too ("thanks a
# lto"; not of "it" or "do": each of those swapped is a word somewhere, "ti", "od"). Two
# letters swapped of a three-letter English conversation word ("yse"), only beside other
# replies: alone, three letters are as often an acronym. Not the real words that are such a
# misspelling (of wordfreq's 50,000 commonest words in English, French, Spanish, German,
# Portuguese and Italian; and for three letters, the popular PyPI and npm packages and a few
# acronyms; for a slip of the keys, reply_lookalikes.py, and here the packages and terms a
# review found), so they stay topics: "prefect", "proceeds", "Greta", "stoop", "not quiet", "lte".
NOT_MISSPELT = """
    aead gopd gping helo iops kops zhead
    abd afr agrede albright alight anh bda beet bein bett booth certainty cetro cheres colo
    contenue contigue continued continuel continues continuo corning corrects ebt elt esc
    ese est fari farr fiar fra fro garee gerat godo gott greta gto hye imessage ince kok lal
    laso leet lest lett llo loko loot lorries lott lps lsat lte massage messager moaning
    mourning neta nha noe nudo nwo ogt ono ont precious prefect proceeds psl quiet sce
    scratchy semes sett ste stoop strat suer thee tyr yte
"""
_TYPO_LENGTH = 7
_SWAP_LENGTH = 4
_PHRASE_SWAP_LENGTH = 3  # a phrase's word of three letters may be swapped ("lto"), not of two
# Of a conversation word this long, two letters swapped count only beside replies ("yse
# please"); of one a letter longer, a key slipped ("looks gpod", "yeag ok"): alone, such a
# word is as often an acronym or a word ("yse", "gpod", "okat").
_SHORT_LENGTH = 3
# Conversation words this long may lose a letter, gain one or hit a key beside the right one
# ("sory", "thnks", "greaat", "thamks"); a shorter word's such forms are too often words.
_NEAR_LENGTHS = range(5, _TYPO_LENGTH)
_LONGEST_TYPO = 12  # letters: "absolutely" and one more, with room; longer is not tried
# A query that opens with one of these asks a question ("was it approved?").
ASKING_OPENERS = "is was are were did does do has have had can could will would should"
# A question word alone asks about what was just said, not about a memory.
QUESTION_WORDS = frozenset({"why", "how", "what", "who", "when", "where", "which", "really"})
# Pieces of Chinese, Japanese and Korean replies, which are written without spaces.
CJK_PIECES = """
    好 好的 好滴 行 可以 对 对的 是 是的 嗯 嗯嗯 恩 哦 噢 谢谢 谢了 多谢 感谢 非常 继续 接着
    没问题 没事 不用 不用了 算了 不 不要 不行 停 停下 等等 等一下 稍等 撤销 你好 您好 明白
    明白了 知道了 收到 完美 很好 太好了 不错 厉害 棒 同意 请 吧 啊 呀 了 呢 吗 哈 哈哈 嘛 啦
    很 太 的
    はい ええ うん いいえ いや ありがとう ありがとうございます ございます ございました どうも
    お願い お願いします おねがいします します して ください 続けて 続行 どうぞ 了解 りょうかい
    承知しました わかりました 分かりました 大丈夫 いいね いいです いい よし すみません ごめん
    ごめんなさい 待って ちょっと 止めて やめて 完璧 素晴らしい すごい です ね よ 進めて
    元に戻して もう一度 お疲れ様です こんにちは
    네 예 응 아니 아니요 아니오 감사합니다 고마워 고마워요 고맙습니다 계속 계속해 계속해줘
    계속해주세요 좋아 좋아요 좋습니다 알겠습니다 알겠어 그래 그래요 확인 잠깐 멈춰 완벽해 최고
    안녕하세요 해줘 해주세요 진행 진행해 진행해줘 주세요
"""

_QUERY_WORD = re.compile(r"\w+(?:'\w+)*")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_LONGEST_CJK_REPLY = 40  # letters
_DRAWN_OUT = re.compile(r"(\w)\1{2,}")  # "yesss", "okkk", "hmmmm", "sooo"


@dataclass(frozen=True)
class _Vocabulary:
    """The lists above, folded as queries are."""

    words: frozenset[str]
    phrases: dict[str, list[tuple[str, ...]]]  # by their first word, longest first
    # by their second word, longest first: for a phrase whose first word is misspelt
    phrases_by_second: dict[str, list[tuple[str, ...]]]
    pieces: frozenset[str]  # of Chinese, Japanese and Korean replies
    longest_piece: int
    # a misspelling's key → the English conversation words it may be: each of a long word's
    # forms with one letter dropped (the word itself too), and each of a shorter one's with
    # two letters swapped
    dropped: dict[str, tuple[str, ...]]
    swapped: frozenset[str]
    near: frozenset[str]  # each `_NEAR_LENGTHS` word's `near_forms`
    # misspellings that count only beside replies: three-letter English conversation words
    # with two letters swapped ("yse", "pls" → "psl"), four-letter ones with a key slipped
    # ("gpod", "yeag")
    beside_replies: frozenset[str]
    english: frozenset[str]  # the English conversation words, for a doubled letter
    not_misspelt: frozenset[str]


@cache
def _vocabulary() -> _Vocabulary:
    phrases: dict[str, list[tuple[str, ...]]] = {}
    phrases_by_second: dict[str, list[tuple[str, ...]]] = {}
    for phrase in sorted({tuple(fold(p).split()) for p in PHRASES.split("|")}, key=len)[::-1]:
        phrases.setdefault(phrase[0], []).append(phrase)
        phrases_by_second.setdefault(phrase[1], []).append(phrase)
    pieces = frozenset(fold(p) for p in CJK_PIECES.split())
    english = [w for w in ENGLISH_WORDS.split() if w.isalpha()]
    dropped: dict[str, tuple[str, ...]] = {}
    swapped: set[str] = set()
    near: set[str] = set()
    beside_replies: set[str] = set()
    for word in english:
        if len(word) >= _TYPO_LENGTH:
            for key in {word} | one_dropped(word):
                dropped[key] = (*dropped.get(key, ()), word)
        elif len(word) >= _SWAP_LENGTH:
            swapped |= two_swapped(word)
            if len(word) in _NEAR_LENGTHS:
                near |= near_forms(word)
            elif len(word) == _SHORT_LENGTH + 1:
                beside_replies |= slipped(word)
        elif len(word) == _SHORT_LENGTH:
            beside_replies |= two_swapped(word)
    return _Vocabulary(
        frozenset(fold(w) for w in (ENGLISH_WORDS + OTHER_WORDS).split()),
        phrases,
        phrases_by_second,
        pieces,
        max(map(len, pieces)),
        dropped,
        frozenset(swapped),
        frozenset(near),
        frozenset(beside_replies.difference(english)),  # "hmm" swapped is "hmm" too
        frozenset(english),
        frozenset(NOT_MISSPELT.split()) | LOOKALIKE_WORDS,
    )


def slip_forms() -> set[str]:
    """Every form a conversation word or a phrase's word takes by a slip of the keys
    (`near_forms`, `slipped`) that is not itself a word of the lists: what
    scripts/make_reply_lookalikes.py looks for among real words."""
    vocabulary = _vocabulary()
    words = set(vocabulary.english)
    words.update(w for phrases in vocabulary.phrases.values() for p in phrases for w in p)
    forms = {form for word in words for form in _slips_of(word)}
    return {f for f in forms if f not in vocabulary.words and f not in STOP_WORDS}


def _slips_of(word: str) -> frozenset[str]:
    """The slips of the keys that may be `word` (of a four-letter word, only beside replies)."""
    if len(word) in _NEAR_LENGTHS:
        return near_forms(word)  # "maks sense", "nevr mind"
    if len(word) == _SHORT_LENGTH + 1:
        return slipped(word)  # "nixe one", "looks gpod"
    return frozenset()


def slip_forms_digest() -> str:
    """A digest of `slip_forms()`: reply_lookalikes.py was written for the lists while it is
    the one that file holds."""
    return hashlib.sha256(" ".join(sorted(slip_forms())).encode()).hexdigest()[:16]


def names_no_topic(text: str) -> bool:
    """True for a reply that steers the conversation without naming what it is about ("keep
    going", "what do you think?", "never mind", "oui, continue", "好的", "👍"). A query of stop
    words alone ("who am I?") may still ask about the user; a digit, or a word of neither list,
    is a topic. `text` is read whole: pass the excerpt a ranker would read."""
    vocabulary = _vocabulary()
    words = [_as_said(w, vocabulary.words) for w in _QUERY_WORD.findall(fold(text))]
    if len(words) == 1 and words[0] in QUESTION_WORDS:
        return True
    asked = _asks(words)
    kinds: list[str] = []  # per word: "reply", "steer", "stop" or "short" (`beside_replies`)
    i = 0
    while i < len(words):
        length = _phrase_at(words, i, vocabulary)
        if length:
            kinds += ["reply"] * length
            i += length
            continue
        word = words[i]
        if word in UNLESS_ASKED and not asked:
            kinds.append("reply")
        elif word in STEERING_WORDS and not asked:
            kinds.append("steer")
        elif word in vocabulary.words or _splits_into(word, vocabulary):
            kinds.append("reply")
        elif word in STOP_WORDS:
            kinds.append("stop")
        elif _misspelt(word, vocabulary):
            kinds.append("reply")
        elif word in vocabulary.beside_replies and word not in vocabulary.not_misspelt:
            kinds.append("short")
        else:
            return False
        i += 1
    if "short" in kinds:  # a short word's typo is a reply only among replies ("yse please")
        return "reply" in kinds and all(k in ("reply", "short") for k in kinds)
    return not words or ("reply" in kinds and _steering_beside_replies(kinds))


def _phrase_at(words: list[str], i: int, vocabulary: _Vocabulary) -> int:
    """How many words the longest conversation phrase at `words[i]` has, as written or with one
    of its words misspelt, or 0. A phrase is found by its first word, or by its second when the
    first is the misspelt one ("nevre mind")."""
    found = 0
    for phrase in vocabulary.phrases.get(words[i], ()):  # longest first
        said = tuple(words[i : i + len(phrase)])
        if said == phrase or _one_misspelt(said, phrase, vocabulary):
            found = len(phrase)
            break
    if i + 1 < len(words) and _may_be_misspelt(words[i], vocabulary):  # once, not per phrase
        for phrase in vocabulary.phrases_by_second.get(words[i + 1], ()):
            if len(phrase) <= found:
                break
            if (
                abs(len(words[i]) - len(phrase[0])) <= 1  # no misspelling moves it further
                and tuple(words[i + 1 : i + len(phrase)]) == phrase[1:]
                and words[i] != phrase[0]
                and _remembered_misspelt_as(words[i], phrase[0])
            ):
                return len(phrase)
    return found


def _one_misspelt(said: tuple[str, ...], phrase: tuple[str, ...], vocabulary: _Vocabulary) -> bool:
    """Whether `said` is `phrase` with one word misspelt and the others as written: "nice
    wokr", not "nice word" (a real word) nor "nevre mnid" (two words off)."""
    if len(said) != len(phrase):
        return False
    for k, (typed, word) in enumerate(zip(said, phrase, strict=True)):
        if typed != word:  # the first word off: the rest as written, and this one misspelt
            return said[k + 1 :] == phrase[k + 1 :] and _misspelt_as(typed, word, vocabulary)
    return False


def _misspelt_as(typed: str, word: str, vocabulary: _Vocabulary) -> bool:
    """Whether `typed` is a phrase's `word` misspelt, by the rules of `_misspelt`; two letters
    swapped of a word of three letters too, as the rest of the phrase says which word it is.
    A word of the lists or a stop word is no misspelling ("bene" swapped is "been")."""
    if len(word) < _PHRASE_SWAP_LENGTH or not _may_be_misspelt(typed, vocabulary):
        return False
    if len(typed) == len(word) + 1 and word in one_undoubled(typed):  # "nicee work"
        return True
    if len(word) >= _TYPO_LENGTH:
        return one_edit_apart(typed, word)
    return typed in _slips_of(word) or swapped_once(typed, word)


@lru_cache(maxsize=4096)  # a long reply asks it of the same word for each phrase, often
def _remembered_misspelt_as(typed: str, word: str) -> bool:
    return _misspelt_as(typed, word, _vocabulary())


def _may_be_misspelt(typed: str, vocabulary: _Vocabulary) -> bool:
    """Whether `typed` may be some phrase word misspelt: not too long, and no word that is
    known as itself."""
    return (
        len(typed) <= _LONGEST_TYPO
        and typed.isascii()
        and typed not in vocabulary.not_misspelt
        and typed not in vocabulary.words
        and typed not in STOP_WORDS
        and typed not in STEERING_WORDS
        and typed not in UNLESS_ASKED
    )


def _asks(words: list[str]) -> bool:
    """Whether the query asks a question: it holds a question word or opens with a verb that
    opens a question ("was it approved?")."""
    return bool(words) and (
        words[0] in ASKING_OPENERS.split() or any(w in QUESTION_WORDS for w in words)
    )


def _steering_beside_replies(kinds: list[str]) -> bool:
    """Whether each steering word stands right beside a conversation word or phrase, or beside
    another steering word that does ("no, cancel, revert"): each run of steering words must
    touch a reply at one of its ends. One pass: a query is up to 8,000 characters."""
    i = 0
    while i < len(kinds):
        if kinds[i] != "steer":
            i += 1
            continue
        end = i
        while end < len(kinds) and kinds[end] == "steer":
            end += 1
        if not (
            (i > 0 and kinds[i - 1] == "reply") or (end < len(kinds) and kinds[end] == "reply")
        ):
            return False
        i = end
    return True


def _misspelt(word: str, vocabulary: _Vocabulary) -> bool:
    """Whether `word` is an English conversation word misspelt by one letter (NOT_MISSPELT)."""
    if len(word) > _LONGEST_TYPO or not word.isascii():
        return False
    if word in vocabulary.not_misspelt or word in STEERING_WORDS:
        return False
    # a vowel or the last letter doubled, of a word of three letters or more ("yess",
    # "lookss", "helloo"; not "tty", nor "nvvm")
    if any(s in vocabulary.english for s in one_undoubled(word)):
        return True
    if len(word) < _SWAP_LENGTH:
        return False
    if word in vocabulary.swapped or word in vocabulary.near:
        return True
    if len(word) < _TYPO_LENGTH - 1:
        return False
    # one letter dropped from each may match words two letters apart ("reactly", "exactly"):
    # the candidates are checked
    dropped = vocabulary.dropped
    candidates = {c for key in {word} | one_dropped(word) for c in dropped.get(key, ())}
    return any(one_edit_apart(word, c) for c in candidates)


def _as_said(word: str, known: frozenset[str]) -> str:
    """`word` with a letter drawn out ("yesss", "cooool", "hmmmm") as it is usually written."""
    if word in known or not _DRAWN_OUT.search(word):
        return word
    once = _DRAWN_OUT.sub(r"\1", word)
    return once if once in known else _DRAWN_OUT.sub(r"\1\1", word)


def _splits_into(word: str, vocabulary: _Vocabulary) -> bool:
    """Whether a word with Chinese, Japanese or Korean letters is wholly a run of the
    vocabulary's pieces. A run longer than any reply is not one, and is not split (splitting
    tries every piece at every letter)."""
    if len(word) > _LONGEST_CJK_REPLY or not _CJK.search(word):
        return False
    pieces = vocabulary.pieces
    if word in pieces:
        return True
    reached = [True] + [False] * len(word)  # reached[i]: a run of pieces covers word[:i]
    for end in range(1, len(word) + 1):
        reached[end] = any(
            reached[start] and word[start:end] in pieces
            for start in range(max(0, end - vocabulary.longest_piece), end)
        )
    return reached[-1]
