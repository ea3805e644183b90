"""`@include` detection with a real Markdown lexer, and HTML comment stripping."""

from __future__ import annotations

import random
import subprocess
import sys
from typing import Any

import pytest

from memoryd.rules import markdown
from memoryd.rules.markdown import find_includes, strip_html_comments
from tests.rules.conftest import Loader, Tree
from tests.rules.rules_helpers import loaded


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("@./rel.md", ["./rel.md"]),
        ("see @rel.md for details", ["rel.md"]),
        ("@../up/x.md", ["../up/x.md"]),
        ("@~/notes/x.md", ["~/notes/x.md"]),
        ("@/abs/x.md", ["/abs/x.md"]),
        ("- item @docs/a.md\n- item @docs/b.md", ["docs/a.md", "docs/b.md"]),
        ("> quoted @q.md", ["q.md"]),
        ("*@em.md*", ["em.md"]),
        ("[see @linked.md](https://example.com)", ["linked.md"]),
        ("read @a.md, then @b.md.", ["a.md", "b.md"]),
        ("(@paren.md)", []),  # `(` glued to the `@`: not at a word start
        ("@with\\ space.md", ["with space.md"]),
        ("@docs/a.md#section", ["docs/a.md"]),
        ("@a.md and again @a.md", ["a.md"]),
    ],
)
def test_include_forms(text: str, expected: list[str]) -> None:
    assert find_includes(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Install `@playwright/test` first",
        "```\n@fenced.md\n```",
        "~~~md\n@tilde-fenced.md\n~~~",
        "para\n\n    @indented.md\n",
        "mail me at someone@example.com",
        "ping @alice about it",  # a mention, not a path
        "decorators like @dataclass",
        "<div>\n@in-html-block.md\n</div>",
        "inline <span>@x</span> html",
        "",
        "no at sign at all",
    ],
)
def test_not_includes(text: str) -> None:
    assert find_includes(text) == []


def test_include_after_code_span_on_same_line() -> None:
    assert find_includes("use `npm i @scope/pkg` then read @docs/setup.md") == ["docs/setup.md"]


def test_strip_block_comment_keeps_rest() -> None:
    text = "# Title\n\n<!-- maintainers: keep this short\n@secret.md -->\n\nBody @a.md\n"
    stripped = strip_html_comments(text)
    assert "maintainers" not in stripped
    assert "@secret.md" not in stripped
    assert "Body @a.md" in stripped
    assert find_includes(stripped) == ["a.md"]


def test_comment_in_code_fence_is_kept() -> None:
    text = "```html\n<!-- example -->\n```\n"
    assert strip_html_comments(text) == text


def test_inline_comment_is_kept() -> None:
    text = "text <!-- inline --> more\n"
    assert strip_html_comments(text) == text


def test_unterminated_comment_is_no_comment() -> None:
    # A `<!--` never closed is a typo, not a comment: cutting to the end of the file lost
    # every instruction after it, and its includes were never followed.
    text = "keep\n\n<!-- TODO tidy\n\n- run the tests @docs/test.md\n\n## Deploy\n\nnever push\n"
    assert strip_html_comments(text) == text
    assert find_includes(text) == ["docs/test.md"]


def test_closed_comments_go_and_a_later_unclosed_one_stays() -> None:
    text = "<!-- gone @a.md -->\n\nkeep @b.md\n\n<!-- open\n\ntail @c.md\n"
    assert strip_html_comments(text) == "\nkeep @b.md\n\n<!-- open\n\ntail @c.md\n"
    assert find_includes(text) == ["b.md", "c.md"]


def test_unclosed_comment_keeps_the_file_through_a_load(tree: Tree, load: Loader) -> None:
    tree.write("CLAUDE.md", "# Rules\n\n<!-- TODO: tidy\n\nAlways run tests @docs/style.md\n")
    tree.write("docs/style.md", "four spaces\n")
    result = load(tree.root)
    assert loaded(result, tree.root) == ["CLAUDE.md", "docs/style.md"]
    assert "Always run tests" in result.files[0].content


def test_text_after_comment_on_same_line_stays() -> None:
    assert strip_html_comments("<!-- note --> visible\n").strip() == "visible"


@pytest.mark.parametrize("separator", ["\f", "\u2028", "\x85", "\x1c"])
def test_comment_stripping_counts_lines_as_the_lexer_does(separator: str) -> None:
    text = f"intro{separator}still intro\n\n<!-- hidden -->\n\nkeep me\n"
    assert strip_html_comments(text) == f"intro{separator}still intro\n\n\nkeep me\n"


def test_comment_stripping_with_crlf_and_cr_endings() -> None:
    assert strip_html_comments("a\r\n\r\n<!-- x -->\r\nb\r\n") == "a\r\n\r\nb\r\n"
    assert strip_html_comments("a\r\r<!-- x -->\rb") == "a\r\rb"


def test_backslash_escaped_at_is_not_an_include() -> None:
    text = "Mention it literally: \\@secrets-notes.md, but read @real.md and @docs/\\_x.md\n"
    assert find_includes(text) == ["real.md", "docs/_x.md"]


def test_escaped_at_file_is_not_loaded(tree: Tree, load: Loader) -> None:
    tree.write("CLAUDE.md", "Say \\@notes.md, do not paste it.\n")
    tree.write("notes.md", "NOT PASTED")
    assert loaded(load(tree.root), tree.root) == ["CLAUDE.md"]


# Texts the lexer may turn into includes the raw text hardly shows: escapes, entities,
# emphasis, links, breaks. Whether or not the pre-check lets them through to the lexer, the
# answer is the lexer's.
_TRICKY = [
    "@x\\.md",
    "@x&#46;md and @y&period;md",
    "@docs&sol;a.md",
    "**@docs/x.md**",
    "@**docs/x.md**",
    "[@linked.md](u) and [x](@u.md)",
    "@docs/\na.md",
    "@a\\\nb.md",
    "@pkg/__init__.py",
    "a@b.com @alice @param(x) @Override",
    "@@double.md",
    "<span>@x.md</span>",
    "`@code.md` @real.md",
    "@x\u00a0y.md",
    "@\u2028z.md",
    "\\@escaped.md",
    "*@a*.md",
    "@_emph_.md",
    "@x.,y @a.*b* @Override.# @x.) @x.. @end.",
    "ping @alice, see &#64;docs/a.md",
]


@pytest.mark.parametrize("text", _TRICKY)
def test_the_pre_check_never_changes_what_is_found(text: str) -> None:
    assert find_includes(text) == markdown._lexed_includes(text)


def test_the_pre_check_agrees_with_the_lexer_on_random_text() -> None:
    rng = random.Random(21)
    alphabet = [
        "@",
        "@",
        ".",
        "/",
        "\\",
        "&#46;",
        "&#64;",
        "*",
        "_",
        "`",
        "[",
        "]",
        "(",
        ")",
        " ",
        "\n",
        "#",
        ",",
        "a",
        "md",
        "<b>",
        "&",
    ]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 14)))
        assert find_includes(text) == markdown._lexed_includes(text), text


def test_text_with_only_mentions_is_not_lexed(monkeypatch: pytest.MonkeyPatch) -> None:
    # Found by a bug hunt (session 21): every file holding an `@` was lexed, and 1,000 rule
    # files of prose with `@param`-like mentions held a cold load ~2.8 s (~0.7 s now).
    parsed: list[str] = []
    real_parse = markdown._MD.parse

    def counting_parse(src: str, env: Any = None) -> Any:
        parsed.append(src)
        return real_parse(src, env)

    monkeypatch.setattr(markdown._MD, "parse", counting_parse)
    assert find_includes("Document every @param; ping @alice; mark it @Override.\n") == []
    assert parsed == []
    assert find_includes("Read @docs/a.md.\n") == ["docs/a.md"]
    assert len(parsed) == 1


def test_an_at_written_as_an_entity_is_never_an_include() -> None:
    # Found in review (session 21): `&#64;x.md` lexes to the text `@x.md`, an include when
    # another `@` in the file let it past the pre-check, none when not.
    assert find_includes("&#64;docs/a.md and &commat;b.md") == []
    assert find_includes("ping @alice, see &#64;docs/a.md") == []
    assert find_includes("see @docs/b.md and &#x40;docs/a.md") == ["docs/b.md"]


# Run in a child with a timeout: on a regression the regex holds the GIL for minutes, so no
# in-process timer could stop it.
_LONG_RUNS = """
from memoryd.rules.markdown import find_includes
assert find_includes("@" * 200_000) == []
assert find_includes("@a" * 100_000 + " @" + "." * 200_000) == []
"""


def test_the_pre_check_reads_a_long_run_of_at_signs_once() -> None:
    # Found in review (session 21): the pre-check `@\\S*?(?:…)` was tried again from every `@`
    # of a run without whitespace, each try scanning to the run's end: 40,000 `@`s in a row
    # took 10 s, and a repository's 4 MiB CLAUDE.md of them would hold the daemon for hours.
    try:
        subprocess.run([sys.executable, "-c", _LONG_RUNS], timeout=20, check=True)
    except subprocess.TimeoutExpired:
        pytest.fail("200,000 `@`s in a row ran past 20 s")
