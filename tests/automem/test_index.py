"""MEMORY.md: line format, parsing, upsert/remove, reconcile and the two caps."""

from __future__ import annotations

import pytest

from memoryd.automem import index as ix


def test_index_line_format() -> None:
    assert ix.index_line("Title", "a.md", "hook") == "- [Title](a.md) — hook"


def test_index_line_without_hook_and_hostile_text_stays_one_line() -> None:
    line = ix.index_line("Bad]\n[x](y)", "f.md", "two\nlines\x00")
    assert "\n" not in line
    assert "\x00" not in line
    (entry,) = ix.parse_index(line)
    assert entry.title == "Bad] [x](y)"
    assert entry.file == "f.md"
    assert entry.hook == "two lines"
    assert ix.index_line("T", "f.md", "") == "- [T](f.md)"


def test_file_names_with_spaces_and_parens_round_trip() -> None:
    line = ix.index_line("T", "my note (1).md", "h")
    assert ix.parse_index(line)[0].file == "my note (1).md"


def test_parse_ignores_prose_and_keeps_line_numbers() -> None:
    text = "# Memory\n\nsome prose\n- [A](a.md) — first\n* [B](b.md)\n- not a link\n"
    entries = ix.parse_index(text)
    assert [(e.title, e.file, e.hook, e.lineno) for e in entries] == [
        ("A", "a.md", "first", 3),
        ("B", "b.md", "", 4),
    ]


def test_upsert_appends_then_replaces_in_place() -> None:
    text = ix.upsert("", "a.md", "- [A](a.md) — one")
    text = ix.upsert(text, "b.md", "- [B](b.md) — two")
    text = ix.upsert(text, "a.md", "- [A2](a.md) — new")
    assert text == "- [A2](a.md) — new\n- [B](b.md) — two\n"


def test_upsert_collapses_duplicate_lines_for_one_file() -> None:
    text = "- [A](a.md) — x\nprose\n- [A again](a.md) — y\n"
    assert ix.upsert(text, "a.md", "- [A](a.md) — z") == "- [A](a.md) — z\nprose\n"


def test_remove_only_that_file() -> None:
    text = "# head\n- [A](a.md) — x\n- [B](b.md) — y\n"
    assert ix.remove(text, "a.md") == "# head\n- [B](b.md) — y\n"
    assert ix.remove(text, "zzz.md") == text


def test_dangling_ignores_urls() -> None:
    text = "- [A](a.md)\n- [Gone](gone.md)\n- [Web](https://example.com/x)\n"
    assert [e.file for e in ix.dangling(text, ["a.md"])] == ["gone.md"]


def test_reconcile_adds_missing_and_drops_dangling() -> None:
    text = "# Index\n- [A](a.md) — kept as written\n- [Gone](gone.md) — x\n"
    out = ix.reconcile(text, {"a.md": ("A new", "ignored"), "b.md": ("B", "hook b")})
    assert out == "# Index\n- [A](a.md) — kept as written\n- [B](b.md) — hook b\n"


def test_truncate_under_both_caps_is_untouched() -> None:
    text = "".join(f"- [T{i}](f{i}.md) — h\n" for i in range(ix.MAX_INDEX_LINES))
    cut = ix.truncate(text)
    assert (cut.text, cut.truncated, cut.cap, cut.warning) == (text, False, None, None)


def test_truncate_line_cap() -> None:
    text = "".join(f"- [T{i}](f{i}.md) — h\n" for i in range(ix.MAX_INDEX_LINES + 1))
    cut = ix.truncate(text)
    assert cut.truncated
    assert cut.cap == "lines"
    body, warning = cut.text.rsplit("\n\n", 1)
    assert body.count("\n") + 1 == ix.MAX_INDEX_LINES
    assert "f199.md" in body
    assert "f200.md" not in body
    assert "201 lines (limit 200)" in warning


@pytest.mark.parametrize("separator", ["\r", "\f", "\u2028", "\x85"])
def test_truncate_counts_only_newline_terminated_lines(separator: str) -> None:
    text = "".join(f"- [T{i}](f{i}.md) — one{separator}two\n" for i in range(ix.MAX_INDEX_LINES))
    cut = ix.truncate(text)
    assert (cut.text, cut.truncated) == (text, False)
    cut = ix.truncate(text + "- [Last](last.md)\n")
    assert cut.cap == "lines"
    body = cut.text.split("\n\n> WARNING")[0] + "\n"
    assert body == text
    assert "201 lines (limit 200)" in (cut.warning or "")


def test_truncate_byte_cap_cuts_at_a_newline() -> None:
    line = "- [" + "x" * 200 + "](f.md) — hook\n"  # 218 bytes (— is 3); 150 lines > 25,000 bytes
    text = line * 150
    cut = ix.truncate(text)
    assert cut.cap == "bytes"
    kept = cut.text.split("\n\n> WARNING")[0] + "\n"
    assert len(kept.encode()) <= ix.MAX_INDEX_BYTES
    assert kept == line * (ix.MAX_INDEX_BYTES // len(line.encode()))
    assert "limit 25,000" in (cut.warning or "")


def test_truncate_byte_cap_counts_bytes_not_characters() -> None:
    line = "- [" + "é" * 100 + "](f.md)\n"  # 2 bytes per é
    text = line * 200
    assert len(text) < 25_000 < len(text.encode())
    cut = ix.truncate(text)
    assert cut.cap == "bytes"
    kept = cut.text.split("\n\n> WARNING")[0]
    assert len(kept.encode()) <= ix.MAX_INDEX_BYTES
    assert all(row == line.rstrip("\n") for row in kept.splitlines())


def test_truncate_lines_then_bytes_names_the_byte_cap() -> None:
    line = "- [" + "y" * 300 + "](f.md)\n"
    cut = ix.truncate(line * 250)
    assert cut.cap == "bytes"


def test_truncate_single_huge_line_keeps_nothing_but_the_warning() -> None:
    cut = ix.truncate("x" * 30_000)
    assert cut.truncated
    assert cut.text.startswith("\n> WARNING")


@pytest.mark.parametrize("count", [0, 1, 199, 200])
def test_truncate_boundaries_not_cut(count: int) -> None:
    text = "a\n" * count
    assert not ix.truncate(text).truncated
