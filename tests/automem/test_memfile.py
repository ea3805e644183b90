"""Memory file format: parsing never raises, rendering validates, file names are safe."""

from __future__ import annotations

import pytest

from memoryd.automem import memfile
from memoryd.errors import InvalidParams, TooLarge


def test_round_trip() -> None:
    text = memfile.render_memory("project", "Release: March 5", "freeze date", "Body\n**Why:** x")
    parsed = memfile.parse_memory(text, "fallback")
    assert (parsed.name, parsed.description, parsed.type, parsed.problem) == (
        "Release: March 5",
        "freeze date",
        "project",
        None,
    )
    assert parsed.body == "Body\n**Why:** x"


def test_yaml_special_characters_are_quoted() -> None:
    text = memfile.render_memory("user", "name: with # and 'quotes'", "- starts with dash", "b")
    parsed = memfile.parse_memory(text, "f")
    assert parsed.name == "name: with # and 'quotes'"
    assert parsed.description == "- starts with dash"


def test_no_frontmatter_is_a_memory_with_a_problem() -> None:
    parsed = memfile.parse_memory("just some notes about deploys\n", "notes")
    assert parsed.problem == "no frontmatter"
    assert parsed.name == "notes"
    assert parsed.type is None
    assert "deploys" in parsed.body


def test_broken_frontmatter_keeps_text_as_body() -> None:
    # Broken for Claude Code too: `[unclosed` is no `key: value` line its retry quotes.
    text = "---\nname: n\n- [unclosed\ntype: user\n---\nthe body about kubernetes\n"
    parsed = memfile.parse_memory(text, "f")
    assert parsed.problem is not None
    assert parsed.problem.startswith("broken frontmatter")
    assert "kubernetes" in parsed.body


@pytest.mark.parametrize(
    ("line", "name"),
    [
        ("name: Fix: use uv", "Fix: use uv"),
        ("name: [draft] release notes", "[draft] release notes"),
        ("name: @alice owns deploys", "@alice owns deploys"),
        ("name: `uv run` not pip", "`uv run` not pip"),
        ("name: *Important* rule", "*Important* rule"),
        ('name: Say "uv": always \\o/', 'Say "uv": always \\o/'),
        ("name:\tFix: tabbed", "Fix: tabbed"),
    ],
)
@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_a_header_claude_code_reads_by_quoting_is_read(line: str, name: str, eol: str) -> None:
    # Found by a bug hunt: YAML refuses these plain values, and Claude Code's frontmatter
    # parser reads them again with each such value double-quoted; memoryd lost the whole
    # header (the file name as its name, no description, no type, `broken frontmatter`).
    text = eol.join(["---", line, "description: Ops: who deploys", "type: project", "---", "b"])
    parsed = memfile.parse_memory(text, "fallback")
    assert (parsed.name, parsed.description, parsed.type, parsed.problem) == (
        name,
        "Ops: who deploys",
        "project",
        None,
    )


def _alias_bomb(depth: int) -> str:
    lines = ["---", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, depth)]
    return "\n".join([*lines, "name: n", f"description: *a{depth - 1}", "type: user", "---", "b"])


def test_yaml_alias_bomb_is_broken_frontmatter_not_a_hang() -> None:
    # 10**12 list items once expanded (by `str()` of the description, or a JSON dump).
    parsed = memfile.parse_memory(_alias_bomb(12), "fallback")
    assert parsed.problem is not None
    assert parsed.problem.startswith("broken frontmatter")
    assert (parsed.name, parsed.description, parsed.metadata) == ("fallback", "", {})


def test_plain_yaml_anchor_free_frontmatter_still_parses() -> None:
    parsed = memfile.parse_memory("---\nname: n\ndescription: d\ntype: user\n---\nbody", "f")
    assert (parsed.name, parsed.type, parsed.problem) == ("n", "user", None)


def test_deeply_nested_yaml_is_broken_frontmatter() -> None:
    text = "---\nname: " + "[" * 5000 + "]" * 5000 + "\n---\nbody"
    parsed = memfile.parse_memory(text, "fallback")
    assert parsed.problem == "broken frontmatter: RecursionError"
    assert parsed.body == text


def test_unknown_type_is_listed_as_invalid() -> None:
    parsed = memfile.parse_memory("---\nname: n\ndescription: d\ntype: secret\n---\nb", "f")
    assert parsed.type is None
    assert parsed.problem == "invalid type 'secret'"


def test_non_string_fields_reported() -> None:
    parsed = memfile.parse_memory("---\nname: [3]\ntype: user\n---\nb", "f")
    assert parsed.name == "f"
    assert parsed.problem == "missing name; missing description"


def test_unknown_type_refused_on_write() -> None:
    with pytest.raises(
        InvalidParams, match="type: must be one of user, feedback, project, reference"
    ):
        memfile.render_memory("note", "n", "d", "b")


@pytest.mark.parametrize(
    ("name", "description"),
    [
        ("", "d"),
        ("n", " "),
        ("a\nb", "d"),
        ("n", "x\x00y"),
        ("n" * 201, "d"),
        ("n", "d\r"),
        ("a\x85b", "d"),  # YAML reads U+0085 back as a space: another name
        ("n", "d\u2028e"),
    ],
)
def test_bad_fields_refused(name: str, description: str) -> None:
    with pytest.raises(InvalidParams):
        memfile.render_memory("user", name, description, "b")


@pytest.mark.parametrize("char", ["\u202a", "\u202e", "\u2066", "\u2069"])
@pytest.mark.parametrize("field", ["name", "description"])
def test_bidirectional_controls_refused(field: str, char: str) -> None:
    # Trojan Source: `Deploy \u202eyrros ton` shows in a terminal as "Deploy not sorry".
    fields = {"name": "n", "description": "d", field: f"Deploy {char}yrros ton"}
    with pytest.raises(InvalidParams, match=f"{field}: .*U\\+{ord(char):04X} here"):
        memfile.render_memory("user", fields["name"], fields["description"], "b")


def test_right_to_left_text_and_marks_are_kept() -> None:
    # Hebrew, and the right-to-left mark a keyboard types, are text: only the embeddings,
    # overrides and isolates are refused.
    text = memfile.render_memory("user", "שלום \u200fעולם", "d", "b")
    assert "שלום \u200fעולם" in text


def test_fields_derived_from_a_note_drop_bidirectional_controls() -> None:
    assert memfile.as_field("a \u202bשלום\u202c b\u2069") == "a שלום b"


def test_nul_in_body_refused() -> None:
    with pytest.raises(InvalidParams, match="NUL"):
        memfile.render_memory("user", "n", "d", "a\x00b")


def test_ten_megabyte_body_is_too_large() -> None:
    with pytest.raises(TooLarge, match="at most 200,000 bytes"):
        memfile.render_memory("user", "n", "d", "x" * 10_000_000)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("../x", "user_x.md"),
        ("/etc/passwd", "user_etc_passwd.md"),
        ("a\x00b", "user_a_b.md"),
        ("..", "user_memory.md"),
        ("Café Déjà-vu!", "user_cafe_deja_vu.md"),
        ("日本語", "user_memory.md"),
    ],
)
def test_hostile_names_make_safe_file_names(name: str, expected: str) -> None:
    assert memfile.file_name_for("user", name) == expected


def test_slug_is_capped() -> None:
    assert len(memfile.slug("word " * 100)) <= 60
