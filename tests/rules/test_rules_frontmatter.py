"""Frontmatter parsing: conditional `paths:`, and hostile YAML that must stay bounded."""

from __future__ import annotations

import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Literal

import pytest
from wcmatch import glob as wcglob

from memoryd.rules import frontmatter, globs
from memoryd.rules.frontmatter import FrontmatterError
from tests.rules.conftest import Loader, Tree
from tests.rules.rules_helpers import loaded, skips


def test_no_frontmatter() -> None:
    parsed = frontmatter.split("# Title\nbody\n")
    assert parsed.meta == {}
    assert parsed.body == "# Title\nbody\n"


def test_paths_list_and_body() -> None:
    parsed = frontmatter.split('---\npaths:\n  - "src/**/*.ts"\n  - lib/*.py\n---\nThe rule\n')
    assert parsed.body == "The rule\n"
    assert frontmatter.path_globs(parsed.meta) == ("src/**/*.ts", "lib/*.py")


def test_paths_string_split_on_spaces_and_commas_but_not_in_braces() -> None:
    meta = {"paths": "src/{api,web}/**/*.ts  docs/*.md,tests/**"}
    assert frontmatter.path_globs(meta) == ("src/{api,web}/**/*.ts", "docs/*.md", "tests/**")


def test_cursor_globs_key() -> None:
    parsed = frontmatter.split("---\ndescription: TS\nglobs: src/**/*.ts, src/**/*.tsx\n---\nx\n")
    assert frontmatter.path_globs(parsed.meta) == ("src/**/*.ts", "src/**/*.tsx")


def test_empty_paths_is_unconditional() -> None:
    assert frontmatter.path_globs({"paths": []}) is None
    # Found by a bug hunt: Claude Code's parseFrontmatterPaths takes match-all patterns as
    # no `paths:` at all (loaded at session start); memoryd waited for a touched path.
    for match_all in ("**", "**/**", "/**", "** /**", ["**"], ["**", "**/**"]):
        assert frontmatter.path_globs({"paths": match_all}) is None, match_all
    assert frontmatter.path_globs({"paths": ["**", "src/**"]}) == ("**", "src/**")
    assert frontmatter.path_globs({"paths": "**/*"}) == ("**/*",)
    assert frontmatter.path_globs({"description": "x"}) is None


def test_paths_of_wrong_type() -> None:
    with pytest.raises(FrontmatterError, match="must be a string or a list"):
        frontmatter.path_globs({"paths": {"a": 1}})
    with pytest.raises(FrontmatterError, match="every entry must be a string"):
        frontmatter.path_globs({"paths": ["ok", 3]})


def test_broken_yaml() -> None:
    # A list item: Claude Code's retry quotes `key: value` lines only, so broken for it too.
    with pytest.raises(FrontmatterError, match="invalid YAML"):
        frontmatter.split("---\npaths:\n  - [unclosed\n---\nbody\n")


@pytest.mark.parametrize(
    ("front", "meta"),
    [
        ("description: API rules: read first\npaths: src/api/**", "API rules: read first"),
        ("description: `pnpm` only, [strict]\npaths: src/api/**", "`pnpm` only, [strict]"),
        ('description: Say "no": always\r\npaths: src/api/**', 'Say "no": always'),
        ("description: see: [docs\npaths: src/api/**", "see: [docs"),
    ],
)
def test_a_rule_claude_code_reads_by_quoting_is_read(front: str, meta: str) -> None:
    # Found by a bug hunt: YAML refuses these plain values and Claude Code reads the
    # frontmatter again with each such value double-quoted; memoryd skipped the rule as
    # bad_frontmatter, never loaded.
    parsed = frontmatter.split(f"---\n{front}\n---\nbody\n")
    assert parsed.meta["description"] == meta
    assert frontmatter.path_globs(parsed.meta) == ("src/api/**",)


def test_alias_bomb_is_refused_quickly() -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 12):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [{', '.join(['*' + prev] * 9)}]")
    bomb = "---\n" + "\n".join(lines) + "\npaths: *l\n---\nbody\n"
    # Read again with those values quoted (unquoted globs, below): text, never expanded.
    parsed = frontmatter.split(bomb)
    assert parsed.meta["paths"] == "*l"
    assert parsed.meta["l"].startswith("&l [*k, ")


def test_anchors_and_aliases_inside_a_flow_collection_are_refused() -> None:
    # Refused as anchors; read again with the items quoted, they are text.
    parsed = frontmatter.split("---\nx: [&a lol, *a]\npaths: [*a]\n---\nbody\n")
    assert parsed.meta == {"x": ["&a lol", "*a"], "paths": ["*a"]}
    # So in a flow list that is a block list's item; nested deeper, they are refused.
    assert frontmatter.split("---\nx:\n  - [&a lol, *a]\n---\nbody\n").meta == {
        "x": [["&a lol", "*a"]]
    }
    with pytest.raises(FrontmatterError, match="anchors are not allowed"):
        frontmatter.split("---\nx:\n  - [[&a lol], *a]\n---\nbody\n")


@pytest.mark.parametrize(
    ("front", "patterns"),
    [
        # As Claude Code's docs write them: YAML reads `*` as an alias and `{` as a mapping,
        # and the rule was skipped as bad_frontmatter.
        ("paths: **/*.ts", ("**/*.ts",)),
        ("paths: {src,lib}/**/*.ts", ("{src,lib}/**/*.ts",)),
        ('paths:\n  - **/*.test.ts  # tests\n  - "docs/**"', ("**/*.test.ts", "docs/**")),
        ("globs: *.ts,*.tsx", ("*.ts", "*.tsx")),
        ("paths: *nothing", ("*nothing",)),
        ("description: it's fine\npaths: *.py", ("*.py",)),
        # A one-line flow list: it was read again as one string, `[src/**` and `!gen/**]`.
        ("paths: [src/**, !src/gen/**]", ("src/**", "!src/gen/**")),
        ("paths: [**/*.ts, lib/**]  # sources", ("**/*.ts", "lib/**")),
        ('paths: ["**/*.ts", !**/*.test.ts]', ("**/*.ts", "!**/*.test.ts")),
        ("globs: [{src,lib}/**/*.ts, !**/*.d.ts]", ("{src,lib}/**/*.ts", "!**/*.d.ts")),
        # ... with a line Claude Code's retry quotes in the block: the quoted list was quoted
        # again as one string, the patterns `[src/**` and `'!gen/**']` (found in review).
        ("description: API: read first\npaths: [src/**, !gen/**]", ("src/**", "!gen/**")),
        # YAML's non-specific tag `!` parsed, and the negation was silently `gen/**`; the
        # space after it is the tag's, not the name's (`ignore` reads `! gen/**` as the name
        # ` gen/**`, session 24).
        ("paths:\n  - src/**\n  - ! gen/**", ("src/**", "!gen/**")),
        ("paths: [src/**, ! gen/**]", ("src/**", "!gen/**")),
        ("paths:\n  - src/**\n  - !", ("src/**", "!")),
        # After a quoted key, and as a block list's item: refused as bad_frontmatter, the
        # rule never loaded (found in review); a list in the list gives its entries.
        ('"paths": [src/**, !src/gen/**]', ("src/**", "!src/gen/**")),
        ("'globs': [*.ts, !*.d.ts]  # sources", ("*.ts", "!*.d.ts")),
        ('"paths": **/*.ts', ("**/*.ts",)),
        ("paths:\n  - [src/**, !src/gen/**]", ("src/**", "!src/gen/**")),
        ("paths:\n  - '*.py'\n  - [!migrations/**, lib/**]", ("*.py", "!migrations/**", "lib/**")),
        ("paths:\n  - [src/**, lib/**]", ("src/**", "lib/**")),
    ],
)
def test_unquoted_globs_are_read_as_written(front: str, patterns: tuple[str, ...]) -> None:
    parsed = frontmatter.split(f"---\n{front}\n---\nbody\n")
    assert frontmatter.path_globs(parsed.meta) == patterns
    assert parsed.body == "body\n"


@pytest.mark.parametrize(
    ("front", "meta"),
    [
        # The `!` retry's space cut is for globs only: another key's `! keep  this` (YAML's
        # bare tag, refused, then quoted) kept its text, as Claude Code's retry reads it.
        (
            "description: ! keep  this\npaths:\n  - ! gen/**",
            {"description": "! keep  this", "paths": ["!gen/**"]},
        ),
        (
            "tags:\n  - ! a b\nglobs: [src/**, ! gen/**]",
            {"tags": ["! a b"], "globs": ["src/**", "!gen/**"]},
        ),
        ('"paths":\n  - ! gen/**\nnotes: [! x]', {"paths": ["!gen/**"], "notes": ["! x"]}),
    ],
)
def test_bang_retry_cuts_spaces_in_glob_keys_only(front: str, meta: dict[str, object]) -> None:
    assert frontmatter.split(f"---\n{front}\n---\nbody\n").meta == meta


def test_unquoted_glob_rule_loads_when_touched(tree: Tree, load: Loader) -> None:
    tree.write(".claude/rules/ts.md", "---\npaths: **/*.ts\n---\nstrict TypeScript")
    tree.write(".claude/rules/src.md", "---\npaths: {src,lib}/**/*.ts\n---\nsrc rules")
    result = load(tree.root, touched=(tree.root / "src/app.ts",))
    assert loaded(result, tree.root) == [".claude/rules/src.md", ".claude/rules/ts.md"]
    assert skips(result, tree.root) == {}


def test_deep_nesting_is_bounded() -> None:
    with pytest.raises(FrontmatterError):
        frontmatter.split("---\nx:\n  - " + "[" * 5000 + "\n---\nbody\n")
    # As a `key: value`, Claude Code's retry reads it as text.
    assert frontmatter.split("---\nx: " + "[" * 5000 + "\n---\nbody\n").meta == {"x": "[" * 5000}


def test_oversized_frontmatter() -> None:
    big = "---\n" + "k: " + "v" * (70 * 1024) + "\n---\nbody\n"
    with pytest.raises(FrontmatterError, match="over 64 KiB"):
        frontmatter.split(big)


def test_unclosed_fence_is_body() -> None:
    text = "---\nnot closed\n"
    assert frontmatter.split(text).body == text


def test_non_mapping_yaml_is_body() -> None:
    text = "---\nJust a heading\n---\nmore\n"
    assert frontmatter.split(text).body == text


def test_bom_is_not_frontmatter_breaker() -> None:
    # The loader decodes with utf-8-sig, so a BOM never reaches split().
    data = "\ufeff---\npaths: a/**\n---\nx\n".encode()
    parsed = frontmatter.split(data.decode("utf-8-sig"))
    assert frontmatter.path_globs(parsed.meta) == ("a/**",)


@pytest.mark.parametrize(
    ("patterns", "touched", "expected"),
    [
        (("src/**/*.ts",), "src/a/b/c.ts", True),
        (("src/**/*.ts",), "src/c.ts", True),
        (("src/**/*.ts",), "lib/c.ts", False),
        (("src/{api,web}/**",), "src/web/x/y.js", True),
        (("src/{api,web}/**",), "src/cli/x.js", False),
        (("*.py",), "deep/down/mod.py", True),  # no slash: any depth, like .gitignore
        (("/setup.py",), "sub/setup.py", False),  # leading slash: anchored
        (("/setup.py",), "setup.py", True),
        (("docs/",), "docs/guide/intro.md", True),
        (("./src/*.rs",), "src/main.rs", False),  # a `.` folder, as `ignore` reads it
        (("**/.github/**",), ".github/workflows/ci.yml", True),
        # A pattern that matches a folder matches what is below it, as in .gitignore.
        (("src/api",), "src/api/users/views.py", True),
        (("packages/*",), "packages/ui/button.tsx", True),
        (("migrations",), "db/migrations/001.sql", True),
        (("src/web",), "src/website.py", False),
        (("src/api",), "lib/src/api/x.py", False),  # a slash in it: relative to the base
        (("/setup.py",), "sub/setup.py/x", False),
    ],
)
def test_glob_matching(patterns: tuple[str, ...], touched: str, expected: bool) -> None:
    base = Path("/proj")
    assert globs.matches_any(patterns, base, [(base / touched).as_posix()]) is expected


def test_touched_outside_base_never_matches() -> None:
    assert not globs.matches_any(("**",), Path("/proj/sub"), ["/proj/other/x.ts", "/proj/sub"])


def test_brace_bomb_is_an_error() -> None:
    with pytest.raises(globs.GlobError):
        globs.check_patterns(("{a,b}" * 40,))


def test_folder_pattern_rule_loads_for_a_file_inside(tree: Tree, load: Loader) -> None:
    tree.write(".claude/rules/api.md", "---\npaths: src/api\n---\napi rules")
    tree.write(".claude/rules/web.md", "---\npaths: src/web\n---\nweb rules")
    result = load(tree.root, touched=(tree.root / "src/api/users.py", tree.root / "src/webapp.py"))
    assert loaded(result, tree.root) == [".claude/rules/api.md"]
    assert skips(result, tree.root) == {".claude/rules/web.md": "paths_not_matched"}


def test_an_exclude_naming_a_folder_is_not_everything_below_it() -> None:
    # claudeMdExcludes are matched against a file's path as globs, not as .gitignore.
    assert globs.excluded_by(("**/legacy",), (Path("/w/legacy/CLAUDE.md"),)) is None


def test_excludes() -> None:
    forms = (Path("/w/legacy/CLAUDE.md"), Path("/real/legacy/CLAUDE.md"))
    assert globs.excluded_by(("**/legacy/**",), forms) == "**/legacy/**"
    assert globs.excluded_by(("/real/**/CLAUDE.md",), forms) == "/real/**/CLAUDE.md"
    assert globs.excluded_by(("**/other/**",), forms) is None
    assert globs.invalid_excludes(("ok/**", "{a,b}" * 40)) != []


# Run in a child with a timeout: on a regression the regex backtracks for minutes holding the
# GIL, so no in-process timer could stop it.
_BACKTRACKING = """
import sys, time
from pathlib import Path
from memoryd.rules import globs
hostile = "/".join(["**", "a"] * 8) + "/zz"
deep = "/p/" + "a/" * 400 + "b.py"
start = time.monotonic()
assert not globs.matches_any((hostile,), Path("/p"), [deep])
assert globs.excluded_by((hostile,), (Path(deep),)) is None
assert globs.excluded_by(("/".join(["**", "a"] * 7) + "/**",), (Path(deep),))
print(time.monotonic() - start)
"""


def test_repeated_globstars_match_in_linear_time() -> None:
    try:
        child = subprocess.run(
            [sys.executable, "-c", _BACKTRACKING],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("8 `**/a` pairs against a path of 400 `a/` parts ran past 20 s")
    assert float(child.stdout) < 2.0


def test_more_globstars_than_the_cap_are_refused() -> None:
    hostile = "/".join(["**", "a"] * (globs.MAX_GLOBSTARS + 1))
    with pytest.raises(globs.GlobError, match="more than"):
        globs.check_patterns((hostile,))
    assert globs.excluded_by((hostile,), (Path("/a/a"),)) is None
    assert len(globs.invalid_excludes((hostile,))) == 1
    assert globs.check_patterns(("/".join(["**", "a"] * globs.MAX_GLOBSTARS),)) is None


@pytest.mark.parametrize(
    ("pattern", "path"),
    [
        (p, t)
        for p in (
            "a/**",
            "**",
            "**/x",
            "a/**/b",
            "/x/**",
            "**/y",
            "*",
            "*/**",
            "a//b",
            "a/**/",
            "/*/**/{a,b}/**",
            "**/*.md/x{,y}/**",
            "[ab]/*/**",
            "a**b",
            ".*/**",
            "x/**/?",
            "app/\\[id\\]/**",  # an escaped Next.js-style folder: `[id]`, no class
            "notes/\\*.md",
            "**/\\[legacy\\]/**",
            "**/b",
        )
        for t in (
            "a",
            "x",
            "a/b",
            "/x/y",
            "a/b/c",
            "x/.h",
            "/a",
            "b/xy",
            "a/x/b",
            "axxb",
            "app/[id]/page.tsx",
            "app/i/page.tsx",
            "notes/*.md",
            "notes/todo.md",
            "w/[legacy]/CLAUDE.md",
            "w/l/CLAUDE.md",
            "a/../b",
            "a/./b",
            "..",
        )
    ],
)
def test_matching_agrees_with_wcmatch(pattern: str, path: str) -> None:
    expected = bool(wcglob.compile(pattern, flags=globs._FLAGS).match(path))
    assert globs._Matcher([pattern]).match(path) is expected


def test_a_list_entry_is_one_glob_even_with_spaces() -> None:
    parsed = frontmatter.split(
        '---\npaths:\n  - "my docs/**"\n  - " src/*.py "\n  - ""\n  - "a.py, b/{c,d}.py"\n---\nx\n'
    )
    assert frontmatter.path_globs(parsed.meta) == ("my docs/**", "src/*.py", "a.py", "b/{c,d}.py")


@pytest.mark.parametrize(
    "yaml_text",
    ["updated: 2024-02-30", "when: 2024-01-01 00:00:00 +99:00", "n: 1" + "0" * 5000],
)
def test_scalar_python_cannot_build_is_a_frontmatter_error(yaml_text: str) -> None:
    with pytest.raises(FrontmatterError, match="invalid YAML frontmatter"):
        frontmatter.split(f"---\n{yaml_text}\n---\nbody\n")


def test_impossible_date_or_huge_integer_costs_one_file_not_the_load(
    tree: Tree, load: Loader
) -> None:
    tree.write("CLAUDE.md", "---\nupdated: 2024-02-30\n---\nProject rules. @inc.md\n")
    tree.write("inc.md", "---\nn: 1" + "0" * 5000 + "\n---\nIncluded.\n")
    tree.write(".claude/rules/r.md", "---\npaths: src/**\nreviewed: 2023-04-31\n---\nRule.\n")
    result = load(tree.root, touched=(tree.root / "src" / "a.py",))
    # Not YAML Python can build: the instruction files keep their whole text ...
    assert loaded(result, tree.root) == ["CLAUDE.md", "inc.md"]
    assert result.files[0].content.startswith("---\nupdated: 2024-02-30\n---\nProject rules.")
    assert "Included." in result.files[1].content
    # ... and a rule meant to be conditional is skipped, saying why.
    [bad] = result.skipped
    assert (bad.path, bad.reason) == (tree.root / ".claude/rules/r.md", "bad_frontmatter")
    assert "day is out of range" in bad.detail


def test_when_the_quoted_retry_fails_too_the_error_is_that_of_the_text_as_written() -> None:
    # Guard for keeping the first parse's error (it was found by parsing the text again).
    with pytest.raises(FrontmatterError, match=r"scanning an alias[\s\S]*line 1") as err:
        frontmatter.split("---\npaths: **/*.ts\nbad:\n  - [unclosed\n---\nbody\n")
    assert "flow sequence" not in str(err.value)  # the retry's own error, on line 2


_Form = Literal["NFC", "NFD"]


@pytest.mark.parametrize(("form_of_rule", "form_of_path"), [("NFD", "NFC"), ("NFC", "NFD")])
def test_a_name_matches_in_either_unicode_form(form_of_rule: _Form, form_of_path: _Form) -> None:
    # Found by a bug hunt: `paths: café/**` with a decomposed `é` (pasted from macOS's
    # Finder) never matched `café/x.py` as the editor reported it, composed.
    rule = unicodedata.normalize(form_of_rule, "docs/café/**")
    path = unicodedata.normalize(form_of_path, "/w/docs/café/x.py")
    assert globs.matches_any((rule,), Path("/w"), [path])
    excluded = unicodedata.normalize(form_of_rule, "**/café/**")
    assert globs.excluded_by((excluded,), (Path(path),)) == excluded
