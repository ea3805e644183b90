"""MEMORY.md: line format, parsing, upsert/remove, reconcile and the two caps."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.automem import index as ix
from tests.automem.run_apart import output_of
from tests.conftest import DaemonHandle


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


BIDI_AND_C1 = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\x85\x9b"


def test_a_line_holds_no_bidi_or_c1_control_from_a_hand_made_memory() -> None:
    # Review of session 22: a name, description or file name from a hand-made memory kept its
    # bidirectional controls (and C1 controls, CSI among them) in the line memoryd wrote, so
    # MEMORY.md opened in a terminal editor showed the line reordered (`user_dm.png`).
    file = "user_\u202egnp\x9b.md"
    line = ix.index_line("Ta\u202ebs\u2067x\x9b", file, "in\u2066den\u202dt\x85s")
    assert not any(c in line for c in BIDI_AND_C1)
    (entry,) = ix.parse_index(line)
    assert (entry.title, entry.hook) == ("Tabsx", "indent s")
    assert ix.meaning(entry.forms, lambda name: name == file) == (file,)
    # With no title, the line names the file: on one line, its brackets escaped.
    (untitled,) = ix.parse_index(ix.index_line("", "a]\u202eb.md", ""))
    assert (untitled.title, untitled.file) == ("a]b.md", "a]\u202eb.md")


def test_file_names_with_spaces_and_parens_round_trip() -> None:
    line = ix.index_line("T", "my note (1).md", "h")
    assert ix.parse_index(line)[0].file == "my note (1).md"


@pytest.mark.parametrize(
    "name",
    [
        "meeting%20notes.md",  # a browser download's name
        "100%.md",
        " x.md",
        "a  b.md",
        "tab\there.md",
        "x)y(z.md",
        "<angled>.md",
        "line\nbreak.md",
        "会议 记录.md",
        "nbsp\u00a0and\u3000wide.md",
        "sub/dir/n.md",
    ],
)
def test_every_file_name_comes_back_from_its_own_line(name: str) -> None:
    line = ix.index_line("T", name, "h")
    assert "\n" not in line
    (entry,) = ix.parse_index(line)
    assert entry.file == name
    # The orphan check finds it listed, so it never appends a second line (it did for
    # `meeting%20notes.md`, `a  b.md`: one more line per sweep); ` x.md` named `x.md`.
    assert ix.unlisted(line, [name, "x.md"]) == ["x.md"]
    assert ix.dangling(line, [name]) == []
    assert ix.reconcile(f"{line}\n", {name: ("T", "h")}) == f"{line}\n"


def test_links_written_by_hand_point_at_their_files() -> None:
    text = (
        "- [A](./a.md) — mine\n"
        "- [B](b.md#why) — mine\n"
        '- [C](c.md "C title") — mine\n'
        "- [E](<e e.md>) — mine\n"
        "- [D](sub/../d.md) — mine\n"
        "- [H](x#y.md) — a name holding #\n"
        "- [P](a%20b.md) — written by another tool for `a b.md`\n"
        "- [W](https://example.com/x.md) — not a file\n"
        "- [Gone](gone.md) — dangling\n"
    )
    files = ["a.md", "b.md", "c.md", "e e.md", "d.md", "x#y.md", "a b.md"]
    assert ix.unlisted(text, files) == []
    assert [e.file for e in ix.dangling(text, files)] == ["gone.md"]
    # A write elsewhere drops the dangling line only: the hand-written hooks stay.
    kept = ix.apply(text, {"new.md": "- [N](new.md)"}, present={*files, "new.md"})
    assert kept == text.replace("- [Gone](gone.md) — dangling\n", "") + "- [N](new.md)\n"
    assert ix.reconcile(text, dict.fromkeys(files, ("T", "h"))) == kept.replace(
        "- [N](new.md)\n", ""
    )
    # A write to one of them replaces its line, wherever it is and however it was written.
    replaced = ix.apply(text, {"e e.md": ix.index_line("E2", "e e.md", "new")})
    assert "- [E2](e%20e.md) — new\n" in replaced
    assert "<e e.md>" not in replaced
    assert ix.remove(text, "c.md") == text.replace('- [C](c.md "C title") — mine\n', "")


def test_a_byte_order_mark_or_crlf_does_not_hide_a_line() -> None:
    # An editor on Windows saves MEMORY.md so; the first line was unparsed, its file an orphan.
    text = "\ufeff- [A](a.md) — first\r\n- [B](b.md) — second\r\n"
    assert [(e.file, e.hook) for e in ix.parse_index(text)] == [
        ("a.md", "first"),
        ("b.md", "second"),
    ]
    assert ix.unlisted(text, ["a.md", "b.md"]) == []


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


def test_truncate_over_both_caps_gives_the_index_size_and_names_both_caps() -> None:
    line = "- [" + "y" * 300 + "](f.md)\n"
    text = line * 250
    cut = ix.truncate(text)
    assert cut.cap == "bytes"
    assert f"250 lines (limit 200) and {len(text.encode()):,} bytes (limit 25,000)" in (
        cut.warning or ""
    )
    # Only the start of a larger file was read: its size is the file's, its lines a floor.
    cut = ix.truncate(text, file_size=2_000_000)
    assert "at least 250 lines (limit 200) and 2,000,000 bytes" in (cut.warning or "")


def test_remove_and_upsert_ask_the_disk_only_about_lines_that_may_mean_the_file() -> None:
    """A delete at 10,000 memories lstat'ed every index line (121-417 ms on the loop): only a
    line with the file among its forms can mean it."""
    text = "".join(f"- [M{i}](m{i}.md) — hook\n" for i in range(1000)) + "- [A](a%20b.md) — x\n"
    asked: list[str] = []

    def exists(name: str) -> bool:
        asked.append(name)
        return name != "a b.md"

    assert ix.remove(text, "a%20b.md", exists) == "".join(text.splitlines(True)[:-1])
    assert asked == ["a b.md", "a%20b.md"]
    asked.clear()
    assert ix.upsert(text, "m5.md", "- [M5](m5.md) — new", exists).count("— new") == 1
    assert asked == ["m5.md"]


@pytest.mark.parametrize("padding", [("", "\n"), ("", "\n\n  \n"), ("\n\n", ""), ("\n", "\t\n")])
def test_truncate_blank_lines_around_the_index_are_not_counted(
    padding: tuple[str, str],
) -> None:
    # 200 entries and a blank line after them (or before) were "cut" at the line cap, with a
    # warning that only 200 lines were loaded; Claude Code trims the index before counting.
    before, after = padding
    text = before + "".join(f"- [M{i}](m{i}.md) — h\n" for i in range(200)) + after
    cut = ix.truncate(text)
    assert (cut.text, cut.truncated, cut.warning) == (text, False, None)
    cut = ix.truncate(text.replace("- [M0]", "- [X](x.md)\n- [M0]"))
    assert cut.truncated
    assert "201 lines (limit 200)" in (cut.warning or "")
    assert cut.text.startswith("- [X](x.md)\n")  # blank lines before it are no line either
    assert cut.text.count("\n- [") == 199


async def test_get_context_does_not_call_a_padded_index_cut(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    memdir.mkdir(parents=True)
    (memdir / "MEMORY.md").write_text(
        "".join(f"- [M{i}](m{i}.md) — hook {i}\n" for i in range(200)) + "\n\n"
    )
    ctx = await daemon.call("get_context", cwd=str(project))
    assert ctx["index_truncated"] is False
    assert "WARNING" not in ctx["claude_md"]
    assert "- [M199](m199.md) — hook 199" in ctx["claude_md"]


CRLF_INDEX = "# Memory\r\n\r\n- [A](a.md) — first\r\n- [B](b.md) — second\r\n"


def test_every_rewrite_keeps_crlf_line_endings() -> None:
    # A MEMORY.md saved on Windows: rewritten with LF, git showed every line changed.
    assert ix.upsert(CRLF_INDEX, "c.md", "- [C](c.md) — third") == (
        CRLF_INDEX + "- [C](c.md) — third\r\n"
    )
    assert ix.upsert(CRLF_INDEX, "a.md", "- [A](a.md) — new") == CRLF_INDEX.replace("first", "new")
    assert ix.remove(CRLF_INDEX, "a.md") == "# Memory\r\n\r\n- [B](b.md) — second\r\n"
    assert ix.apply(CRLF_INDEX, {"c.md": "- [C](c.md)"}, present={"b.md", "c.md"}) == (
        "# Memory\r\n\r\n- [B](b.md) — second\r\n- [C](c.md)\r\n"
    )
    assert ix.reconcile(CRLF_INDEX, {"a.md": ("A", "first"), "c.md": ("C", "x")}) == (
        "# Memory\r\n\r\n- [A](a.md) — first\r\n- [C](c.md) — x\r\n"
    )
    merged, lossless = ix.merge_added_entries(CRLF_INDEX, "- [D](d.md) — mine\n")
    assert (merged, lossless) == (CRLF_INDEX + "- [D](d.md) — mine\r\n", True)
    assert ix.appended("- [A](a.md)\r\n- [B](b.md)", ["- [C](c.md)"]) == (
        "- [A](a.md)\r\n- [B](b.md)\r\n- [C](c.md)\r\n"
    )


def test_a_rewrite_keeps_each_lines_own_ending_and_adds_the_files_most_common() -> None:
    mixed = "# Memory\n- [A](a.md) — first\r\n- [B](b.md) — second\r\n"
    assert ix.upsert(mixed, "c.md", "- [C](c.md)") == mixed + "- [C](c.md)\r\n"
    assert ix.upsert("", "a.md", "- [A](a.md)") == "- [A](a.md)\n"


@pytest.mark.parametrize("inside", ["\x0c", "\x1c", "\x85", "\u2028", "\u2029", "\x0b"])
def test_a_character_that_splitlines_breaks_at_stays_inside_its_line(inside: str) -> None:
    # str.splitlines breaks a line there: the rewrite wrote it back as two lines.
    text = f"- [A](a.md) — one{inside}two\n- [B](b.md) — second\n"
    assert ix.upsert(text, "c.md", "- [C](c.md)") == text + "- [C](c.md)\n"
    assert ix.remove(text, "b.md") == f"- [A](a.md) — one{inside}two\n"
    assert [e.lineno for e in ix.parse_index(text)] == [0, 1]


async def test_a_crlf_index_stays_crlf_through_writes_deletes_and_reconcile(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    memdir.mkdir(parents=True)
    (memdir / "user_a.md").write_text("---\nname: A\ndescription: a\ntype: user\n---\n\nA.\n")
    index = memdir / "MEMORY.md"
    index.write_bytes("# Memory\r\n\r\n- [A](user_a.md) — a\r\n".encode())
    written = await daemon.call(
        "memory.write", cwd=str(project), type="user", name="B", description="b", body="B."
    )
    assert index.read_bytes() == (
        "# Memory\r\n\r\n- [A](user_a.md) — a\r\n- [B](user_b.md) — b\r\n".encode()
    )
    await daemon.call("memory.delete", cwd=str(project), path=written["path"])
    (memdir / "user_c.md").write_text("---\nname: C\ndescription: c\ntype: user\n---\n\nC.\n")
    await daemon.call("memory.reconcile", cwd=str(project))
    assert index.read_bytes() == (
        "# Memory\r\n\r\n- [A](user_a.md) — a\r\n- [C](user_c.md) — c\r\n".encode()
    )


@pytest.mark.parametrize(
    ("target", "forms"),
    [
        ('c.md "C title"', ("c.md",)),
        ("c.md 'C title'", ("c.md",)),
        ('c.md\t \t"T"', ("c.md",)),
        ('c d.md "T"', ("c d.md",)),
        ('c.md"T"', ('c.md"T"',)),  # no whitespace before it: no title
        ('c.md "T" "U"', ('c.md "T"',)),
        ('"T"', ('"T"',)),
        ('c.md "', ('c.md "',)),
    ],
)
def test_a_link_title_is_read_as_it_was(target: str, forms: tuple[str, ...]) -> None:
    assert ix.link_forms(target) == forms


def test_a_long_run_of_spaces_in_a_link_is_read_once() -> None:
    # The title regex went over the spaces again from each character: 60,000 held
    # memory.list 29 s, and a synced team/MEMORY.md may hold far more.
    code = (
        "from memoryd.automem import index as ix; "
        "line = '- [a](x' + ' ' * 400_000 + 'y \"T\")\\n'; "
        "print(ix.parse_index(line)[0].file)"
    )
    assert output_of(code) == "x" + " " * 400_000 + "y"
