"""What a real Markdown lexer tells us: `@include` references and HTML block comments.

markdown-it-py finds the prose; code (fenced, indented, spans) and raw HTML never
contribute includes, and an `@` glued to a word (an e-mail address) is not one either.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.token import Token

# `text_join` would merge backslash escapes back into the text: `\@x.md` must stay an escape.
_MD = MarkdownIt("commonmark").disable("text_join")

# `@` at the start of a text run or after whitespace; `\ ` escapes a space in a path.
_INCLUDE = re.compile(r"(?:^|(?<=\s))@((?:[^\s\\]|\\ )+)")
_TRAILING = ".,;:!?)]}>\"'*_"  # `_` and `*`: emphasis closed after a path
# A run of text from an `@` to the next whitespace (later `@`s in it included: what follows
# them follows the first too), each run matched once: `@\S*?` then what must follow, tried
# again from every `@` of a run, was quadratic in the run (40,000 `@`s in a row took 10 s).
_AT_RUN = re.compile(r"@\S*")
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
# Inline children whose text is not prose: code spans, raw HTML, images.
_OPAQUE = frozenset({"code_inline", "html_inline", "image"})
_EMPHASIS = frozenset({"em_open", "em_close", "strong_open", "strong_close"})
# Lines as markdown-it numbers them in `token.map`: ended by \n, \r\n or \r only
# (`str.splitlines` also breaks at \f, U+2028 and others, shifting every line after).
_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def _prose(children: list[Token]) -> str:
    parts: list[str] = []
    for i, child in enumerate(children):
        if child.type == "text_special" and child.content == "@":
            # `\@x.md` or `&#64;x.md`: a literal `@`, never an include (an entity was one only
            # when some other `@` in the file let it past find_includes' pre-check).
            parts.append(child.markup)
        elif child.type in ("text", "text_special"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak") or child.type in _OPAQUE:
            parts.append("\n")
        elif child.type in ("link_open", "link_close"):
            parts.append(" ")
        elif child.type in _EMPHASIS and _inside_a_word(parts, children[i + 1 :], child):
            # `@pkg/__init__.py`: the lexer read `__init__` as bold; the path keeps its `__`.
            parts.append(child.markup)
    return "".join(parts)


def _inside_a_word(before: list[str], after: list[Token], marker: Token) -> bool:
    """Whether an emphasis marker is glued to text on its outer side (`pkg/__init__.py`),
    not framing a run (`**@docs/x.md**`, `see _this_`)."""
    if marker.type.endswith("_open"):
        outside = next((part[-1] for part in reversed(before) if part), "")
    else:
        outside = after[0].content[:1] if after and after[0].type == "text" else ""
    return bool(outside) and not outside.isspace()


def _clean_ref(raw: str) -> str | None:
    ref = raw.replace("\\ ", " ").rstrip(_TRAILING)
    ref = ref.split("#", 1)[0]
    # A bare word (`@alice`, `@param`) is a mention, not a path: an include names a file.
    if not ref or ref in ("/", "~", "~/") or ("." not in ref and "/" not in ref):
        return None
    if ref.startswith("@") or "\x00" in ref:
        return None
    return ref


def _lexable(text: str) -> str:
    """`text` as the lexer should read it: a `<!--` that no `-->` follows is literal text.

    Such a `<!--` starts an HTML block that runs to the end of the file, so a typo (or a
    comment the author never closed) hid every instruction after it, includes too. Escaping
    keeps the line count, so `token.map` still numbers the lines of `text`.
    """
    close = text.rfind("-->")
    tail = close + 3 if close >= 0 else 0
    if "<!--" not in text[tail:]:
        return text
    return text[:tail] + text[tail:].replace("<!--", "\\<!--")


def find_includes(text: str) -> list[str]:
    """The `@path` references in `text`, in document order, duplicates kept once."""
    if "@" not in text or not _may_include(text):
        return []
    return _lexed_includes(text)


def _may_include(text: str) -> bool:
    """Whether an `@` in `text` is followed, before the next whitespace, by what could lex into
    an include: a `/`, a `.` that is not in the trailing punctuation a reference sheds
    (`@Override.`), or a `\\` or `&` (an escape or an entity, `\\.` or `&#46;`, may lex into
    one). Text without any (`@param`, `@alice`) is not lexed at all: 1,000 rule files of prose
    with such mentions took a cold load ~2.8 s, ~0.7 s unlexed."""
    for run in _AT_RUN.finditer(text):
        after = run.group()[1:]
        if "/" in after or "\\" in after or "&" in after or "." in after.rstrip(_TRAILING):
            return True
    return False


def _lexed_includes(text: str) -> list[str]:
    found: list[str] = []
    seen: set[str] = set()
    for token in _MD.parse(_lexable(text)):
        if token.type != "inline" or not token.children:
            continue
        for match in _INCLUDE.finditer(_prose(token.children)):
            ref = _clean_ref(match.group(1))
            if ref is not None and ref not in seen:
                seen.add(ref)
                found.append(ref)
    return found


def strip_html_comments(text: str) -> str:
    """Remove `<!-- … -->` HTML blocks; comments inside code or inline in prose stay, and so
    does a `<!--` never closed (it is no comment: cutting it lost the rest of the file)."""
    if "<!--" not in text:
        return text
    lines = _LINES.findall(text)
    cuts: list[tuple[int, int]] = []
    for token in _MD.parse(_lexable(text)):
        if token.type == "html_block" and token.map and token.content.lstrip().startswith("<!--"):
            cuts.append((token.map[0], token.map[1]))
    if not cuts:
        return text
    out: list[str] = []
    position = 0
    for start, end in cuts:
        out.extend(lines[position:start])
        remainder = _COMMENT.sub("", "".join(lines[start:end]))
        if remainder.strip():
            out.append(remainder if remainder.endswith("\n") else remainder + "\n")
        position = end
    out.extend(lines[position:])
    return "".join(out)


def headings(text: str) -> list[tuple[int, int, str, bool]]:
    """Every heading of `text` (none inside code or HTML): its first line and the line after
    it (as `_LINES` numbers them), its title, and whether it is a setext one (a title line
    underlined with `===` or `---`, the underline its last line)."""
    found: list[tuple[int, int, str, bool]] = []
    tokens = _MD.parse(_lexable(text))
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.map:
            title = tokens[i + 1].content if i + 1 < len(tokens) else ""
            found.append((token.map[0], token.map[1], title, not token.markup.startswith("#")))
    return found


def split_lines(text: str) -> list[str]:
    """`text`'s lines, each with its ending, numbered as `token.map` numbers them."""
    return _LINES.findall(text)
