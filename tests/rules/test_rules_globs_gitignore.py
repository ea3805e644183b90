"""`paths:` patterns read as .gitignore reads them (Claude Code matches them with the `ignore`
package): `!` negation, the last matching pattern deciding, a folder once matched never taken
back, a trailing `/` naming folders at any depth. Found by a bug hunt (session 21): the
expected values below are what `ignore` 7.0 answers for each pair."""

from __future__ import annotations

import sys
import unicodedata
from pathlib import Path

import pytest

from memoryd.rules import globs
from tests.rules.conftest import Loader, Tree
from tests.rules.rules_helpers import loaded, skips

BASE = Path("/proj")


@pytest.mark.parametrize(
    ("patterns", "touched", "expected"),
    [
        # `!` takes back what the patterns before it matched: TS sources, not their tests.
        (("src/**/*.ts", "!**/*.test.ts"), "src/a.test.ts", False),
        (("src/**/*.ts", "!**/*.test.ts"), "src/a.ts", True),
        (("*.ts", "!*.d.ts"), "types/x.d.ts", False),
        # The last pattern that matches decides.
        (("**/*.md", "!docs/**", "docs/keep.md"), "docs/keep.md", True),
        (("**/*.md", "!docs/**", "docs/keep.md"), "docs/other.md", False),
        # Below a folder already matched, nothing is taken back (git cannot re-include there).
        (("src/**", "!src/gen/**"), "src/gen/x.ts", True),
        (("src/", "!src/a.ts"), "src/a.ts", True),
        (("lib", "!lib/x.py"), "lib/x.py", True),
        # A negated folder takes back the folder, not the files matched in it.
        (("*.py", "!tests/"), "tests/t.py", True),
        (("*.py", "!tests/**"), "tests/t.py", False),
        # Negations alone match nothing.
        (("!gen/**",), "gen/a.py", False),
        (("!gen/**",), "src/a.py", False),
        # A bare `!` (or `!/`) names nothing, and `ignore` drops it (it was `!**`, taking back
        # every match before it), as it drops an empty pattern.
        (("src/**", "!"), "src/a.py", True),
        (("src/**", "!/"), "src/a.py", True),
        (("src/**", "! "), "src/a.py", True),
        (("src/**", "!./"), "src/a.py", True),
        (("!",), "src/a.py", False),
        (("",), "src/a.py", False),
        (("src/**", "!**"), "src/a.py", False),
        # A trailing `/` names a folder at any depth, as `*.py` names a file at any depth ...
        (("docs/",), "pkg/docs/guide.md", True),
        (("gen/",), "src/gen/x.ts", True),
        (("/gen/",), "src/gen/x.ts", False),
        # ... and never a file, nor a path that stops at the folder itself.
        (("x/**/",), "x/y", False),
        (("notes/",), "notes", False),
        # Names match whatever their case, as `ignore` matches by default (they were
        # compared case-sensitively; on macOS's file system `SRC/a.ts` is `src/a.ts`).
        (("SRC/*.ts",), "src/a.ts", True),
        (("*.TS",), "src/a.ts", True),
        (("src/**/*.ts", "!**/*.TEST.ts"), "src/a.test.ts", False),
        (("[A-Z]*.md",), "readme.md", True),
        (("Docs/",), "pkg/docs/a.md", True),
        (("café/**",), "CAFÉ/x", True),
        (("straße/*",), "STRASSE/x", False),  # one letter is two only in full case folding
        # ... and as `ignore`'s JavaScript regex (`i`, no `u`) folds them: by the upper case
        # of one UTF-16 unit, never from a non-ASCII letter to an ASCII one (Python's
        # IGNORECASE matched each of these pairs, and a class by every fold of its members).
        (("\u017f.md",), "s.md", False),  # long s
        (("s.md",), "\u017f.md", False),
        (("\u212a.md",), "k.md", False),  # Kelvin sign (NFC makes it `K`)
        (("K.md",), "\u212a.md", False),
        (("\u212a.md",), "\u212a.md", True),
        (("\u0131.md",), "i.md", False),  # dotless i
        (("i.md",), "\u0131.md", False),
        (("\u0130.md",), "i.md", False),  # dotted I
        (("I.md",), "\u0130.md", False),
        (("\u00df.md",), "\u1e9e.md", False),  # ß, upper-cased to SS, and capital ẞ
        (("\u1e9e.md",), "\u00df.md", False),
        (("[\u00e9-\ufb00].md",), "i.md", False),  # the range holds ı and İ
        (("[\u00e0-\u00ff].md",), "\u0178.md", True),  # ÿ in the range, Ÿ its upper case
        (("\u00b5.md",), "\u03bc.md", True),  # micro sign and mu: both upper-case to Μ
        (("\u03c3.md",), "\u03c2.md", True),  # σ and final ς: Σ
        # An astral character is two units: two `?`, and two members of a class.
        (("?.md",), "\U0001f600.md", False),
        (("??.md",), "\U0001f600.md", True),
        (("[\U0001f600].md",), "\U0001f600.md", False),
        (("\U00010400.md",), "\U00010428.md", False),  # Deseret: no case without `u`
        # A class as git's wildmatch reads it, and `ignore` 7.0.17 with it: a range out of
        # order keeps its lower end alone (wcmatch dropped it: `[c-a]` matched nothing,
        # `[!c-a]` anything, and a `-` after it opened another range).
        (("[c-a]",), "c", True),
        (("[c-a]",), "b", False),
        (("[c-a]",), "a", False),
        (("[c-a].md",), "C.md", True),
        (("[xc-a]",), "c", True),
        (("[c-\\a]",), "c", True),
        (("[!c-a]",), "c", False),
        (("[!c-a]",), "q", True),
        (("[c-a-z]",), "-", True),
        (("[c-a-z]",), "y", False),
        (("[z-a]x",), "zx", True),
        (("[\u00e9-a]",), "\u00c9", True),
        (("[]-a]",), "_", True),  # a `]` first is a member, and opens the range
        # A pattern git reads where wcmatch wrote a bad escape (the rule was bad_frontmatter):
        # `c`, the range `c-[` out of order, the members `:alph`, then a `]` after the class.
        (("[^\\c-[:alpha:]]",), "0]", True),
        (("[^\\c-[:alpha:]]",), "c]", False),
        (("[^\\c-[:alpha:]]",), "h]", False),
        (("[[:alpha:]x",), "a", False),  # a class never closed: git matches nothing
        (("a[b",), "a[b", False),
        (("[[:foo:]]",), "f", False),  # an unknown class name, likewise
        (("[[:foo:]]",), "[[:foo:]]", False),
        (("[[:a]",), "[", True),  # no `:]`: `[` and `:` are members, as `[:a`
        # A whole part of two or more `*` is `**` to git and `ignore` (it was one name).
        (("a/***/b",), "a/x/y/b", True),
        (("a/***/b",), "a/b", True),
        (("***/b",), "x/y/b", True),
        (("a***",), "ab/c", True),
        # What a .gitignore cannot hold `ignore` drops: a comment, a lone trailing `\`.
        (("#x.md",), "#x.md", False),
        (("\\#x.md",), "#x.md", True),
        (("*.md", "!#x.md"), "#x.md", False),
        (("a.md\\",), "a.md", False),
        # A `/` in a class is one of its members, as git reads it, never a folder's end
        # (session 24: `x[a/b]y` was the names `x[a` and `b]y`, and matched nothing).
        (("x[a/b]y",), "xay", True),
        (("x[a/b]y",), "xby", True),
        (("x[a/b]y",), "x/y", False),
        (("x[a/b]y",), "d/xay", False),  # the `/` anchors it, as one outside a class does
        (("d/x[a/b]y/*.ts",), "d/xby/q.ts", True),
        (("x[!/]y",), "xay", True),
        (("a[/]b",), "a/b", False),
        (("x[/-9]",), "x5", True),
        (("x[/-9]",), "x.", False),
        (("x[+-/]",), "x.", True),
        (("x[/b",), "x/b", False),
        # What follows a `!` is read as written: `! a.ts` takes back ` a.ts` (it took back
        # `a.ts`).
        (("*.ts", "! a.ts"), "d/a.ts", True),
        (("*.ts", "! a.ts"), "d/ a.ts", False),
        # A leading `./` is a `.` folder, which no path holds: `ignore` matches nothing (it
        # was cut, and `./A` matched `a`); and a bare `/` names nothing (it matched all).
        (("./A",), "a", False),
        (("./src/*.rs",), "src/main.rs", False),
        (("src/*.rs", "!./src/main.rs"), "src/main.rs", True),
        (("/",), "src/a.py", False),
        (("//",), "a", False),
    ],
)
def test_paths_are_matched_as_gitignore_matches(
    patterns: tuple[str, ...], touched: str, expected: bool
) -> None:
    assert globs.matches_any(patterns, BASE, [(BASE / touched).as_posix()]) is expected


def test_nfc_turns_no_other_non_ascii_character_into_an_ascii_one() -> None:
    # `globs._nfc` keeps these as written, so that the Kelvin sign is no `K` (nor `k`), as
    # for `ignore`; a Unicode that adds one must add it there.
    to_ascii = {
        chr(code)
        for code in range(0x80, 0x110000)
        if unicodedata.normalize("NFC", chr(code)).isascii()
    }
    assert to_ascii == {"\u037e", "\u1fef", "\u212a"}
    assert globs._nfc("e\u0301\u212a\u037e\u1fef") == "\u00e9\u212a\u037e\u1fef"


def test_no_folded_unit_is_folded_again() -> None:
    # A folded name holds only units the folding leaves alone, so a class need not take the
    # others out (`globs._class_range`).
    table = globs._fold_table()
    assert table[ord("\u00ff")] == ord("\u0178")
    assert ord("\u017f") not in table  # its upper case is ASCII `S`
    assert not set(table.values()) & set(table)


def test_a_rule_leaving_out_its_tests_is_not_loaded_for_a_test(tree: Tree, load: Loader) -> None:
    tree.write(
        ".claude/rules/ts.md",
        '---\npaths:\n  - "src/**/*.ts"\n  - "!**/*.test.ts"\n---\nTS sources only.\n',
    )
    touched_test = load(tree.root, touched=(tree.root / "src/api/users.test.ts",))
    assert loaded(touched_test, tree.root) == []
    assert skips(touched_test, tree.root) == {".claude/rules/ts.md": "paths_not_matched"}
    touched_source = load(tree.root, touched=(tree.root / "src/api/users.ts",))
    assert loaded(touched_source, tree.root) == [".claude/rules/ts.md"]


def test_an_unquoted_negation_is_read_as_a_pattern(tree: Tree, load: Loader) -> None:
    # YAML reads a plain `!x` as a tag: the retry quotes it, as Claude Code's parser does.
    tree.write(".claude/rules/py.md", "---\npaths:\n  - '*.py'\n  - !migrations/**\n---\nPy.\n")
    result = load(tree.root, touched=(tree.root / "migrations/001.py",))
    assert skips(result, tree.root) == {".claude/rules/py.md": "paths_not_matched"}
    assert loaded(load(tree.root, touched=(tree.root / "db/models.py",)), tree.root) == [
        ".claude/rules/py.md"
    ]


def test_a_rule_matches_a_path_in_another_case_an_exclude_does_not(
    tree: Tree, load: Loader
) -> None:
    tree.write(".claude/rules/ts.md", "---\npaths: SRC/**/*.TS\n---\nTS.\n")
    result = load(tree.root, touched=(tree.root / "src/api/users.ts",))
    assert loaded(result, tree.root) == [".claude/rules/ts.md"]
    # claudeMdExcludes are plain globs, matched as Claude Code's picomatch matches them.
    assert globs.excluded_by(("**/SRC/CLAUDE.md",), (Path("/p/src/CLAUDE.md"),)) is None
    assert globs.excluded_by(("**/src/CLAUDE.md",), (Path("/p/src/CLAUDE.md"),)) is not None


@pytest.mark.parametrize(
    "front",
    [
        "paths: [*.py, !migrations/**]",  # a flow list: one string `[*.py` / `!migrations/**]`
        "paths:\n  - '*.py'\n  - ! migrations/**",  # YAML's `!` tag: the negation dropped
        '"paths": [*.py, !migrations/**]',  # a quoted key: bad_frontmatter, never loaded
        "paths:\n  - [*.py, !migrations/**]",  # a block list's item: bad_frontmatter too
    ],
)
def test_an_unquoted_negation_in_other_forms_is_read_as_one(
    tree: Tree, load: Loader, front: str
) -> None:
    tree.write(".claude/rules/py.md", f"---\n{front}\n---\nPy.\n")
    result = load(tree.root, touched=(tree.root / "migrations/001.py",))
    assert skips(result, tree.root) == {".claude/rules/py.md": "paths_not_matched"}
    assert loaded(load(tree.root, touched=(tree.root / "db/models.py",)), tree.root) == [
        ".claude/rules/py.md"
    ]


def _counted_steps(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names `globs._step` is given from now on, in order."""
    steps: list[str] = []
    real_step = globs._step

    def counting_step(
        parts: tuple[globs._Part, ...], positions: frozenset[int], name: str
    ) -> frozenset[int]:
        steps.append(name)
        return real_step(parts, positions, name)

    monkeypatch.setattr(globs, "_step", counting_step)
    return steps


def _ten_folders_of_files() -> globs.TouchedPaths:
    """2,000 touched files in ten folders, /proj/pkg/modN/sub."""
    return globs.TouchedPaths(sorted(f"/proj/pkg/mod{j % 10}/sub/file{j}.ts" for j in range(2000)))


def test_many_paths_in_few_folders_step_each_folder_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A load judges every touched path against every rule: 100 rules and a session of
    # 20,000 files took ~29 s when each path was walked name by name (now under 2 s, see
    # the docs). A folder's names are stepped once; its files are then tried by their name.
    steps = _counted_steps(monkeypatch)
    touched = _ten_folders_of_files()
    patterns = ("services/**/*.py", "*.proto")
    assert not globs.matches_any(patterns, BASE, touched)
    # 10 folders of 3 names (pkg, modN, sub; pkg once) for each of the two patterns.
    assert len(steps) == 2 * (1 + 10 + 10)
    assert globs.matches_any(("*.proto", "pkg/mod3/sub/file1993.ts"), BASE, touched)


def test_a_folder_only_negations_can_match_below_is_not_walked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Review of session 22: `!**/*.test.ts` matches at any depth, so it kept every folder of
    # a session's paths open though only a negation could match there, which takes back and
    # never loads: each folder stepped and each file's name tried, for every such rule (100
    # of them and 50,000 paths outside src/, 4-8 s a load). Such a folder is decided no.
    steps = _counted_steps(monkeypatch)
    touched = _ten_folders_of_files()
    patterns = ("src/**/*.ts", "!**/*.test.ts")
    assert not globs.matches_any(patterns, BASE, touched)
    assert steps == ["pkg", "pkg"]  # each pattern's step of the first folder, then no more
    for path, expected in (("src/a/b.ts", True), ("src/a/b.test.ts", False), ("b.ts", False)):
        assert globs.matches_any(patterns, BASE, [f"/proj/{path}"]) is expected


def test_a_bare_negation_does_not_keep_a_rule_from_loading(tree: Tree, load: Loader) -> None:
    # Found by a bug hunt: read as `!**`, it took back every path, and the rule never loaded.
    tree.write(".claude/rules/src.md", '---\npaths:\n  - "src/**"\n  - "!"\n---\nSrc.\n')
    result = load(tree.root, touched=(tree.root / "src/a.py",))
    assert loaded(result, tree.root) == [".claude/rules/src.md"]


@pytest.mark.parametrize(
    ("pattern", "touched", "expected"),
    [
        # What `ignore` 7.0.17 answers for each.
        ("[\u00a0-\uffff].md", "\u00e9.md", True),
        ("[\u00a0-\uffff].md", "\u00c9.md", True),
        ("[\u00a0-\uffff].md", "\uffff.md", True),
        ("[\u00a0-\uffff].md", "a.md", False),
        ("[\u00a0-\uffff].md", "\u009f.md", False),
        ("[\u00a0-\uffff].md", "\U0001f600.md", False),  # two units
        ("[!A-\uffff]", "0", True),
        ("[!A-\uffff]", "a", False),  # `a` is `A` whatever the case
        ("[\u0000-\u0060\u007b-\uffff]", "a", True),
        ("[!\u0000-\u0060\u007b-\uffff]", "a", False),
        ("[!\u0000-\u0060\u007b-\uffff]", "\u00e9", False),
        ("[\u0020-\uffff]", "\u0178", True),
        ("[!\u00b6-\uffff]", "\u00b5", False),  # µ is Μ (U+039C) whatever the case
        ("[!\u00b6-\uffff]", "\u00ff", False),
    ],
)
def test_a_wide_class_matches_what_its_members_match(
    pattern: str, touched: str, expected: bool
) -> None:
    assert globs.matches_any((pattern,), BASE, [(BASE / touched).as_posix()]) is expected


def test_a_wide_class_is_compiled_as_one_range_above_the_bmp() -> None:
    # Review of session 22: `re` builds a class of the BMP unit by unit, in Python, ~8 ms
    # for `[\u00a0-\uffff]` (its case folding included), and a rule of 240 of them held a
    # load ~2.5 s (bench/bench_rules_wide_classes.py). Folded names and their regexes hold
    # non-ASCII units moved to plane 15, where `re` keeps a range as one.
    regex = globs._name_matcher("[\u00a0-\uffff]" * 240, True).pattern
    assert regex.count("[\\U000f00a0-\\U000fffff") == 240
    assert "\\uffff" not in regex


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        # What picomatch 2.3 answers (a JavaScript regex without `u`: UTF-16 units).
        ("**/?.md", "/p/\U0001f600.md", False),
        ("**/??.md", "/p/\U0001f600.md", True),
        ("**/[\U0001f600].md", "/p/\U0001f600.md", False),
        ("**/[\u00e9-\u017a]*", "/p/\u00e9", True),
        ("**/caf\u00e9/*", "/p/CAF\u00c9/x", False),
        ("**/ca?\u00e9/*", "/p/caX\u00e9/x", True),
        # A class opening with `!` holds `!`: picomatch negates `[^a]` alone without `posix`
        # (session 24: `[!a]` was negated, and excluded `b`, a file Claude Code loads).
        ("/r/[!a]/CLAUDE.md", "/r/b/CLAUDE.md", False),
        ("/r/[!a]/CLAUDE.md", "/r/a/CLAUDE.md", True),
        ("/r/[!a]/CLAUDE.md", "/r/!/CLAUDE.md", True),
        ("/r/[!a-c]x/CLAUDE.md", "/r/dx/CLAUDE.md", False),
        ("/r/[^a]/CLAUDE.md", "/r/b/CLAUDE.md", True),
        ("/r/[^a]/CLAUDE.md", "/r/a/CLAUDE.md", False),
        ("/r/\\[!a]/CLAUDE.md", "/r/[!a]/CLAUDE.md", True),
        # A class of none of the characters picomatch's regex escapes is also its text: the
        # folder `[id]` of a Next.js route (session 24: such a CLAUDE.md was never excluded).
        ("**/app/[id]/CLAUDE.md", "/r/app/[id]/CLAUDE.md", True),
        ("**/app/[id]/CLAUDE.md", "/r/app/i/CLAUDE.md", True),
        ("**/app/[id]/CLAUDE.md", "/r/app/[i]/CLAUDE.md", False),
        ("/r/[!a]/CLAUDE.md", "/r/[!a]/CLAUDE.md", True),
        ("/r/x[id]y[q]/CLAUDE.md", "/r/x[id]yq/CLAUDE.md", True),
        ("/r/[a-c]/CLAUDE.md", "/r/[a-c]x/CLAUDE.md", False),  # `-`: a class alone
        # ... and a path equal to the pattern matches, whatever it holds.
        ("/r/app/[...slug]/CLAUDE.md", "/r/app/[...slug]/CLAUDE.md", True),
        ("/r/*/[...slug]/CLAUDE.md", "/r/app/[...slug]/CLAUDE.md", False),
    ],
)
def test_an_exclude_reads_names_in_utf16_units(pattern: str, path: str, expected: bool) -> None:
    # Session 23: excludes are read in units as picomatch reads them (`?` was one emoji),
    # and (session 24) its classes as picomatch reads them.
    assert (globs.excluded_by((pattern,), (Path(path),)) is not None) is expected


def test_a_wide_exclude_class_is_compiled_as_one_range_above_the_bmp() -> None:
    # Session 23: excludes are moved above the BMP as `paths:` are (a repository's settings
    # of 240 `[\u0100-\u7fff]` took ~1.8 s to compile, now ~0.1).
    regex = globs._name_matcher("[\u0100-\u7fff]" * 240).pattern
    assert regex.count("[\\U000f0100-\\U000f7fff]") == 240


def test_the_moved_units_table_is_small() -> None:
    # A dict of the 65,408 moved units (and their ints) took 7 MB of the daemon's memory
    # each, for folded and plain names: two 256 KiB strings now.
    for fold in (True, False):
        table = globs._shift_table(fold)
        assert sys.getsizeof(table) < 300_000
        assert table[ord("a")] == "a"
    assert globs._shift_table(True)[0xFF] == chr(0x178 + globs._SHIFT)  # ÿ folds to Ÿ
    assert globs._shift_table(False)[0xFF] == chr(0xFF + globs._SHIFT)
