"""What of a prompt the user wrote, and what they pasted into it: code, a stack trace, a log,
a shell session (pure).

A prompt to a coding agent often carries a block of code or output under a line of prose
("why is this loop slow?" and the loop). The prose says what the prompt is about; the block's
words are mostly those of any code ("return", "value", "line", "user"), and each of them names
some memory in a directory of a few hundred. The ranker weighs the two parts apart
(`RecallIndex.lexical`), so a pasted block reorders what the prose matched rather than
recalling memories of its own.

Pasted: every line of a fenced block (``` or ~~~, CommonMark's rules for where it ends), and
every run of two or more code-like lines outside one — with blank lines, or at most one prose
line, between them (a traceback's message line); a shell prompt's output counts as code. A
lone code-like line, a line that asks (ends with "?"), a sentence with inline code ("what
does `f()` return?") and notes written as a list (a sentence ending with ";", an "=" or a
path in a sentence, a list item's next lines) stay the user's own. docs/auto-memory.md, "Pasted code and output", has
the rules and what they measured.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memoryd.fences import in_fenced_code

# A word of prose: letters, an apostrophe inside, punctuation around ("(see", "it's,", "end.").
_PLAIN_WORD = re.compile(r"^[(\"'“‘]*[A-Za-z][a-z]*(?:['’][a-z]+)?[.,;:!?)\"'”’]*$")
# Marks of code and program output that prose lines rarely carry: braces, arrows, `==`, `::`,
# a call, a shell or REPL prompt, a comment (or one after code), a stack frame, a log line's
# timestamp, a rule of `===` or `___` (test runners' headings), a dotted name
# (`json.decoder.JSONDecodeError`), an error's class, indentation (but for a list item's next
# lines: `_list_continuations`).
_CODE_MARK = re.compile(
    r"[{}]|\s==\s|=>|->|::|\w\(.*\)"
    r"|^\s*(?:\$|>>>|#|//|--|at\s+[\w.$<>]+\()\s|\S {2,}(?:#|//) "
    r"|^\s*\[?\d{4}-\d\d-\d\d|={3,}|_{3,}"
    r"|\b[A-Za-z_]\w*(?:\.\w+){2,}|\b[A-Z]\w*(?:Error|Exception)\b"
    r"|^(?: {4,}|\t)\S"
)
# Marks that written prose carries too, in lists and notes: a statement's closing semicolon,
# an assignment, a path of two or more directories (or "input/output/cache"). They make a line
# code-like unless it reads as a sentence.
_WEAK_CODE_MARK = re.compile(r";\s*$|\s=\s|(?:^|[\s\"'(])[\w.~-]*[/\\][\w.-]+[/\\]")
# A Markdown list item ("- ", "  2. "): the lines after it indented to its text continue it.
_LIST_ITEM = re.compile(r"^ *(?:[-*+]|\d{1,3}[.)]) (?=\S)")
_SHELL_PROMPT = re.compile(r"^\s*(?:\$|%|PS>|>>>)\s+\S")
# One backtick each side, not across a blank line (CommonMark's code span, less its rarer forms).
_CODE_SPAN = re.compile(r"(?<!`)`(?!`)(?:[^`\n]|\n(?![ \t]*\n))+?(?<!`)`(?!`)")
_LETTER = re.compile(r"[^\W\d_]")
_NUMBER = re.compile(r"^[(\[]?[-+~≈]?\d[\d.,:/%]*(?:ms|s|m|h|k|x|×|kb|mb|gb)?[)\],.;:]*$", re.I)
# Under this share of prose words a line is code-like whatever its marks (`ok github.com/a/b 1.2s`).
_PROSE_SHARE = 0.6
# A line of this many words, this share of them prose, is a sentence whatever its weak marks
# ("  - a batch of more than 1,000 calls gets -32600 (an empty batch too);").
_SENTENCE_WORDS = 6
_SENTENCE_SHARE = 0.85
_MIN_RUN = 2  # code-like lines in a run before it counts as pasted


@dataclass(frozen=True)
class Prompt:
    written: str  # the user's own lines
    pasted: str  # the lines of code and output


def split_prompt(text: str) -> Prompt:
    """`text` parted into the lines the user wrote and the lines they pasted, each part in its
    original order."""
    lines = text.splitlines()
    if len(lines) < _MIN_RUN:  # a paste takes two lines at least
        return Prompt(text, "")
    plain = _without_code_spans("\n".join(lines)).split("\n")
    for i in _list_continuations(plain):  # indented as a list item's text, not as code
        plain[i] = plain[i].lstrip()
    kinds = _line_kinds(lines, plain)
    pasted = _pasted_lines(kinds)
    if not pasted:
        return Prompt(text, "")
    return Prompt(
        "\n".join(line for i, line in enumerate(lines) if i not in pasted),
        "\n".join(line for i, line in enumerate(lines) if i in pasted),
    )


def _without_code_spans(text: str) -> str:
    """`text` with each inline code span a plain word, line breaks kept: `f()` in a sentence
    is the user's own writing, and a span may run on to the next line."""
    return _CODE_SPAN.sub(lambda m: "code" + "\n" * m.group().count("\n"), text)


def _list_continuations(lines: list[str]) -> list[int]:
    """The sentences that continue a list item whose text is a sentence, indented to that
    text. Not YAML's "  - name: build and test on every push" and the keys under it, nor a
    unified diff's lines."""
    continued: list[int] = []
    indent = 0  # the text column of the list item being continued, 0 for none
    for i, line in enumerate(lines):
        item = _LIST_ITEM.match(line)
        if item:
            indent = len(item.group()) if _sentence(line[len(item.group()) :]) else 0
        elif indent and len(line) - len(line.lstrip(" ")) == indent and _sentence(line):
            continued.append(i)
        elif line.strip():
            indent = 0
    return continued


def _line_kinds(lines: list[str], plain: list[str]) -> list[str]:
    """Per line: "fenced", "code", "prose" or "blank"; `plain` is each line with its code
    spans made plain words."""
    kinds: list[str] = []
    in_shell = False  # after a shell prompt line: its output, up to a blank line
    for i, (line, fenced) in enumerate(zip(lines, in_fenced_code(lines), strict=True)):
        if fenced:
            kinds.append("fenced")
            continue
        text = line.strip()
        if not text:
            kinds.append("blank")
            in_shell = False
            continue
        asks = text.endswith("?")  # the user's question, even right under a paste
        if _SHELL_PROMPT.match(line):
            in_shell = True
        elif asks:
            in_shell = False
        code = not asks and (in_shell or _code_like(plain[i]) or _same_lead(lines, kinds, i))
        kinds.append("code" if code else "prose")
    return kinds


def _code_like(line: str) -> bool:
    words, prose = _word_counts(line)
    if not words:
        return _CODE_MARK.search(line) is not None or _WEAK_CODE_MARK.search(line) is not None
    if prose < _PROSE_SHARE * words or _CODE_MARK.search(line):
        return True
    return _WEAK_CODE_MARK.search(line) is not None and not _reads_as_sentence(words, prose)


def _word_counts(line: str) -> tuple[int, int]:
    """How many words the line has, numbers and marks left out ("-", "—", "3.2 ms", "17 of
    20" are as common in prose as in output), and how many of them are prose words."""
    words = [w for w in map(_strip_emphasis, line.split()) if _LETTER.search(w)]
    words = [w for w in words if not _NUMBER.match(w)]
    return len(words), sum(1 for w in words if _PLAIN_WORD.match(w))


def _strip_emphasis(word: str) -> str:
    return word.strip("*_~")


def _sentence(line: str) -> bool:
    return _reads_as_sentence(*_word_counts(line))


def _reads_as_sentence(words: int, prose: int) -> bool:
    """At least _SENTENCE_WORDS words, _SENTENCE_SHARE of them prose words."""
    return words >= _SENTENCE_WORDS and prose >= _SENTENCE_SHARE * words


def _same_lead(lines: list[str], kinds: list[str], i: int) -> bool:
    """A line that starts with the same two words as the code-like line above it (`npm ERR!`):
    the same tool's output."""
    if not i or kinds[i - 1] != "code":
        return False
    lead = lines[i].split()[:2]
    return len(lead) == 2 and lead == lines[i - 1].split()[:2]


def _pasted_lines(kinds: list[str]) -> set[int]:
    pasted = {i for i, kind in enumerate(kinds) if kind == "fenced"}
    run: list[int] = []
    for i, kind in enumerate(kinds):
        if kind != "code":
            continue
        if run and kinds[run[-1] + 1 : i].count("prose") > 1:
            _close(run, pasted)
            run = []
        run.append(i)
    _close(run, pasted)
    return pasted


def _close(run: list[int], pasted: set[int]) -> None:
    if len(run) >= _MIN_RUN:
        pasted.update(range(run[0], run[-1] + 1))
