"""Trees a bug hunt built (session 15): what the loader must neither read nor lose.

A link past the text-only allow-list, a rules link to a whole disk, a path the Markdown
lexer read as emphasis, a `CLAUDE.md` opening with a `---` block that is no YAML, dotfiles
on the allow-list, a file name that is not UTF-8.
"""

from __future__ import annotations

import os

import pytest

from memoryd.daemon.protocol.framing import encode_one
from memoryd.rules import loader
from memoryd.rules.loader import (
    MAX_CONTEXT_BYTES,
    MAX_FILE_BYTES,
    MAX_INCLUDES_PER_FILE,
    MAX_RULE_FOLDERS,
    MAX_SKIPPED,
)
from memoryd.rules.model import ContextResult
from tests.conftest import DaemonHandle
from tests.rules.conftest import Loader, Tree
from tests.rules.rules_helpers import loaded, skips


def _text(result: ContextResult) -> str:
    return "\n".join(f.content for f in result.files)


def test_a_link_named_like_text_to_a_secret_is_not_included(tree: Tree, load: Loader) -> None:
    tree.write(".env", "API_KEY=sk-live-123")
    tree.link("docs/notes.md", "../.env")
    tree.write("CLAUDE.md", "@docs/notes.md\n@.env\n")
    result = load(tree.root)
    assert "sk-live-123" not in _text(result)
    assert skips(result, tree.root) == {"docs/notes.md": "not_text", ".env": "not_text"}
    (refused,) = [s for s in result.skipped if s.path == tree.root / "docs/notes.md"]
    assert f"links to {tree.root / '.env'}" in refused.detail


def test_dotfiles_on_the_allow_list_are_included_and_env_files_are_not(
    tree: Tree, load: Loader
) -> None:
    tree.write(".gitignore", "node_modules/")
    tree.write(".editorconfig", "root = true")
    tree.write("Dockerfile", "FROM debian")
    tree.write(".env.local", "SECRET=1")
    tree.write("CLAUDE.md", "@.gitignore\n@.editorconfig\n@./Dockerfile\n@.env.local\n")
    result = load(tree.root)
    assert loaded(result, tree.root) == ["CLAUDE.md", ".gitignore", ".editorconfig", "Dockerfile"]
    assert skips(result, tree.root) == {".env.local": "not_text"}


def test_underscores_in_an_include_path_are_kept(tree: Tree, load: Loader) -> None:
    tree.write("pkg/__init__.py", "init")
    tree.write("docs/_draft_.md", "draft")
    tree.write("docs/__snapshots__/ui.md", "ui")
    tree.write("docs/bold.md", "bold")
    tree.write(
        "CLAUDE.md",
        "See @pkg/__init__.py\nSee @docs/_draft_.md\nSee @docs/__snapshots__/ui.md\n"
        "**@docs/bold.md**\n",
    )
    result = load(tree.root)
    assert loaded(result, tree.root) == [
        "CLAUDE.md",
        "pkg/__init__.py",
        "docs/_draft_.md",
        "docs/__snapshots__/ui.md",
        "docs/bold.md",
    ]
    assert skips(result, tree.root) == {}


def test_a_claude_md_opening_with_a_block_that_is_no_yaml_is_all_instructions(
    tree: Tree, load: Loader
) -> None:
    text = "---\nBuild: run `make`. Test: run `make test`: always.\n---\n\nNever push to main.\n"
    tree.write("CLAUDE.md", text)
    tree.write(".claude/rules/bad.md", "---\npaths:\n  - [oops\n---\nonly for some files")
    result = load(tree.root)
    assert loaded(result, tree.root) == ["CLAUDE.md"]
    assert "Never push to main." in _text(result)
    assert "run `make test`" in _text(result)
    assert skips(result, tree.root) == {".claude/rules/bad.md": "bad_frontmatter"}


def test_a_rules_link_to_a_large_tree_is_read_only_so_far(tree: Tree, load: Loader) -> None:
    for i in range(MAX_RULE_FOLDERS + 100):
        tree.write(f"disk/d{i:04}/x.md", f"rule {i}")
    tree.write(".claude/rules/own.md", "own rule")
    tree.link(".claude/rules/shared", tree.root / "disk")
    result = load(tree.root)
    rules = [p for p in loaded(result, tree.root) if p.startswith(".claude/rules/")]
    assert ".claude/rules/own.md" in rules
    assert MAX_RULE_FOLDERS - 10 < len(rules) < MAX_RULE_FOLDERS + 1
    too_many = [s for s in result.skipped if s.reason == "too_many"]
    assert len(too_many) == 1  # once, not once per folder left
    assert f"over {MAX_RULE_FOLDERS} folders" in too_many[0].detail


def test_a_reply_naming_a_file_that_is_not_utf8_is_sent() -> None:
    name = os.fsdecode(b"r\xe9gle.md")  # Python's surrogate escape for the byte 0xE9
    line = encode_one({"path": name})
    assert line == b'{"path":"r\\udce9gle.md"}'


async def test_get_context_answers_with_a_rule_named_in_latin_1(
    daemon: DaemonHandle, tree: Tree
) -> None:
    tree.git_repo()
    tree.write("CLAUDE.md", "top")
    rules = tree.mkdir(".claude/rules")
    (rules / os.fsdecode(b"r\xe9gle.md")).write_bytes(b"a rule\n")
    reply = await daemon.call("get_context", cwd=str(tree.root))
    assert "a rule" in reply["claude_md"]
    assert any(f["path"].endswith("r\udce9gle.md") for f in reply["files"])


async def test_large_includes_are_skipped_past_the_context_budget_not_the_whole_load(
    daemon: DaemonHandle, tree: Tree
) -> None:
    tree.git_repo()
    line = "- endpoint /v1/thing does stuff\n"
    each = MAX_FILE_BYTES // len(line) - 1000  # under the per-file cap, together far over
    for i in range(5):
        tree.write(f"docs/api{i}.md", line * each)
    tree.write(
        "CLAUDE.md", "Never push to main.\n" + "".join(f"@docs/api{i}.md\n" for i in range(5))
    )
    reply = await daemon.call("get_context", cwd=str(tree.root))
    assert "Never push to main." in reply["claude_md"]
    assert len(reply["claude_md"].encode()) <= MAX_CONTEXT_BYTES + 10_000
    over = {s["path"] for s in reply["skipped"] if s["reason"] == "too_large"}
    assert over == {str(tree.root / f"docs/api{i}.md") for i in range(1, 5)}


def test_skips_past_the_cap_are_counted_once(tree: Tree, load: Loader) -> None:
    tree.write("CLAUDE.md", "".join(f"@m{i}.md\n" for i in range(MAX_SKIPPED + 500)))
    result = load(tree.root)
    assert len(result.skipped) == MAX_SKIPPED + 1
    assert result.skipped[-1].reason == "too_many"
    assert "500 more files skipped" in result.skipped[-1].detail


def test_a_flood_of_include_references_is_followed_only_so_far(tree: Tree, load: Loader) -> None:
    # A repository's 3.7 MB CLAUDE.md of 240,000 distinct `@d/m<N>.md` held its load ~10 s.
    refs = " ".join(f"@d/m{i}.md" for i in range(MAX_INCLUDES_PER_FILE + 500))
    for i in range(MAX_INCLUDES_PER_FILE + 500):
        tree.write(f"d/m{i}.md", f"doc {i}")
    tree.write("CLAUDE.md", refs)
    result = load(tree.root)
    assert len(result.files) == 1 + MAX_INCLUDES_PER_FILE
    assert result.files[-1].path == tree.root / f"d/m{MAX_INCLUDES_PER_FILE - 1}.md"
    (flood,) = [s for s in result.skipped if s.reason == "too_many"]
    assert flood.path == tree.root / "CLAUDE.md"
    assert flood.detail.startswith("500 of its @includes not followed")


def test_include_references_are_capped_per_context(
    tree: Tree, load: Loader, monkeypatch: pytest.MonkeyPatch
) -> None:
    per_file, per_context = 50, 120
    monkeypatch.setattr(loader, "MAX_INCLUDES_PER_FILE", per_file)
    monkeypatch.setattr(loader, "MAX_INCLUDES", per_context)
    for n in range(3):
        for i in range(per_file):
            tree.write(f"d{n}/m{i}.md", "x")
        tree.write(
            f".claude/rules/r{n}.md", " ".join(f"@../../d{n}/m{i}.md" for i in range(per_file))
        )
    result = load(tree.root)
    assert len(result.files) == 3 + per_context
    (flood,) = [s for s in result.skipped if s.reason == "too_many"]
    assert flood.path == tree.root / ".claude/rules/r2.md"
    assert flood.detail.startswith("30 of its @includes not followed")


def test_nested_includes_use_up_the_contexts_room_as_they_go(
    tree: Tree, load: Loader, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by a review: the context's room was judged once per file, before its includes
    # were followed, so the includes of the files it included overshot the cap (11,995
    # followed against 10,000; up to the per-file cap more at each level).
    monkeypatch.setattr(loader, "MAX_INCLUDES_PER_FILE", 10)
    monkeypatch.setattr(loader, "MAX_INCLUDES", 25)
    for i in range(10):
        tree.write(f"d/c{i}.md", " ".join(f"@m{i}_{j}.md" for j in range(10)))
        for j in range(10):
            tree.write(f"d/m{i}_{j}.md", "x")
    tree.write("CLAUDE.md", " ".join(f"@d/c{i}.md" for i in range(10)))
    result = load(tree.root)
    included = [f for f in result.files if f.reason == "include"]
    assert len(included) == 25


def test_rule_files_past_the_cap_in_one_folder_are_skipped_once(
    tree: Tree, load: Loader, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by a bug hunt: 10,000 rules in one folder gave 8,000 `too_many` skips, one per file
    # past the cap, which filled the listed skips and hid the rules judged after them (a
    # conditional rule's `paths_not_matched`), and each of them was stat'ed for nothing.
    monkeypatch.setattr(loader, "MAX_RULE_FILES", 20)
    tree.write(".claude/rules/a-conditional.md", "---\npaths: src/**\n---\nonly for src")
    for i in range(100):
        tree.write(f".claude/rules/r{i:03}.md", f"rule {i}")
    result = load(tree.root)
    rules = [p for p in loaded(result, tree.root) if p.startswith(".claude/rules/")]
    assert rules == [f".claude/rules/r{i:03}.md" for i in range(19)]
    too_many = [s for s in result.skipped if s.reason == "too_many"]
    assert len(too_many) == 1
    assert too_many[0].detail == "more than 20 rule files"
    assert skips(result, tree.root)[".claude/rules/a-conditional.md"] == "paths_not_matched"


async def test_an_include_of_control_characters_costs_itself_not_the_whole_reply(
    daemon: DaemonHandle, tree: Tree
) -> None:
    # Found by a bug hunt (session 21): a terminal capture (`@build.log`, 4 MB, mostly
    # escapes) fits the 6 MiB budget as bytes, but JSON writes each ESC as `\u001b`: the
    # reply, 22 MB, went over the 16 MiB cap and the whole get_context failed with -32004,
    # on every call.
    tree.git_repo()
    line = "\x1b" * 7 + "\n"
    tree.write("build.log", line * (4_000_000 // len(line)))
    tree.write("CLAUDE.md", "Never push to main.\n@build.log\n")
    reply = await daemon.call("get_context", cwd=str(tree.root))
    assert "Never push to main." in reply["claude_md"]
    assert [s["reason"] for s in reply["skipped"]] == ["too_large"]
    assert reply["skipped"][0]["path"] == str(tree.root / "build.log")


def test_the_budget_counts_what_paths_add_to_the_reply(
    tree: Tree, load: Loader, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each file's path goes out twice (its heading, its `files` entry), its parent's once:
    # 10,000 empty includes of 4 KiB paths made an 80 MB reply from no text at all.
    monkeypatch.setattr(loader, "MAX_CONTEXT_BYTES", 120_000)
    folder = "/".join(["d" * 200] * 4)
    refs = [f"{folder}/{i:03}.md" for i in range(100)]
    for ref in refs:
        tree.write(ref, "")
    tree.write("CLAUDE.md", "\n".join(f"@{ref}" for ref in refs))
    result = load(tree.root)
    paths = sum(2 * len(str(f.path)) + len(str(f.parent or "")) for f in result.files)
    assert 1 < len(result.files) < 101
    assert paths + len(result.files[0].content) <= 120_000
    assert {s.reason for s in result.skipped} == {"too_large"}


def test_skips_listed_are_bounded_in_bytes_too(tree: Tree, load: Loader) -> None:
    # 1,000 missing includes of 3 KB paths: 6 MB of skips (path, detail and parent) before.
    folder = "/".join(["m" * 200] * 15)
    tree.write("CLAUDE.md", "\n".join(f"@{folder}/{i:04}.md" for i in range(1000)))
    result = load(tree.root)
    listed = result.skipped[:-1]
    assert sum(len(str(s.path)) + len(s.detail) + len(str(s.parent)) for s in listed) <= (
        loader.MAX_SKIPPED_BYTES
    )
    assert result.skipped[-1].reason == "too_many"
    assert result.skipped[-1].detail == (
        f"{1000 - len(listed):,} more files skipped; only the first {len(listed):,} are listed"
    )


def test_the_budget_counts_what_a_rules_globs_add_to_the_reply(
    tree: Tree, load: Loader, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found in review (session 21): a loaded rule's globs go out twice (its heading, its
    # `files` entry) and were not counted: 300 rules of 199 globs each (under the 64 KiB
    # frontmatter cap) and one line of text made a 36 MB reply, over the 16 MiB cap.
    monkeypatch.setattr(loader, "MAX_CONTEXT_BYTES", 200_000)
    patterns = "".join(f'  - "src/{"d" * 100}{i:03}/**"\n' for i in range(150))
    for n in range(10):
        tree.write(f".claude/rules/r{n}.md", f'---\npaths:\n  - "*.py"\n{patterns}---\nRule {n}.\n')
    result = load(tree.root, touched=(tree.root / "a.py",))
    globs_out = sum(2 * len(", ".join(f.globs or ())) for f in result.files)
    text_out = sum(len(f.content) + 2 * len(str(f.path)) for f in result.files)
    assert 1 < len(result.files) < 10
    assert globs_out + text_out <= 200_000
    assert {s.reason for s in result.skipped} == {"too_large"}
