from __future__ import annotations

import re
from pathlib import Path

import pytest

from memoryd.session.template import (
    MAX_TEMPLATE_BYTES,
    SECTIONS,
    builtin_template,
    is_empty_summary,
    load_template,
    user_template_path,
)
from tests.conftest import IsolatedEnv

SPEC_ORDER = [
    "Session Title",
    "Current State",
    "Task specification",
    "Files and Functions",
    "Workflow",
    "Errors & Corrections",
    "Codebase and System Documentation",
    "Learnings",
    "Key results",
    "Worklog",
]


def test_builtin_template_has_the_spec_sections_in_order_each_with_an_italic_line() -> None:
    lines = builtin_template().splitlines()
    headings = [line[2:] for line in lines if line.startswith("# ")]
    assert headings == SPEC_ORDER
    for index, line in enumerate(lines):
        if line.startswith("# "):
            assert re.fullmatch(r"_[^_].*_", lines[index + 1]), lines[index + 1]
    assert len(SECTIONS) == 10


def test_user_template_path_is_under_the_config_dir(isolated_env: IsolatedEnv) -> None:
    assert (
        user_template_path()
        == isolated_env.config_dir / "session-memory" / "config" / "template.md"
    )


def test_user_template_replaces_the_builtin_one() -> None:
    path = user_template_path()
    path.parent.mkdir(parents=True)
    path.write_text("# Goal\n_what we want_\n\n# Notes\n_anything_")
    template = load_template()
    assert template.text == "# Goal\n_what we want_\n\n# Notes\n_anything_\n"
    assert template.source == str(path)
    assert template.warning is None


def test_missing_user_template_means_builtin_without_warning() -> None:
    template = load_template()
    assert template.source == "builtin"
    assert template.warning is None


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"", "empty"),
        (b"  \n\n", "empty"),
        (b"# T\x00\x01", "not a text file"),
        (b"\xff\xfe# T", "not UTF-8"),
        (b"#" * (MAX_TEMPLATE_BYTES + 1), "over"),
    ],
)
def test_unusable_user_template_falls_back_with_a_reason(content: bytes, why: str) -> None:
    path = user_template_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    template = load_template()
    assert template.source == "builtin"
    assert template.warning is not None
    assert why in template.warning


def test_a_directory_as_template_falls_back(tmp_path: Path) -> None:
    user_template_path().mkdir(parents=True)
    template = load_template()
    assert template.source == "builtin"
    assert template.warning is not None


def test_empty_summary_detection() -> None:
    assert is_empty_summary("")
    assert is_empty_summary(builtin_template())
    assert is_empty_summary("\n\n" + builtin_template() + "\n")
    assert not is_empty_summary(
        builtin_template().replace("# Worklog\n", "# Worklog\n- ran tests\n")
    )
    assert not is_empty_summary("# Session Title\n_x_\nFixing the login bug\n")
    # An italic line that is not right under a heading is a note.
    assert not is_empty_summary("# Learnings\n_what worked_\n\n_use the staging db_\n")


def test_user_template_boilerplate_counts_as_empty() -> None:
    user = "# Goal\n_what we want_\nFill in below.\n\n# Notes\n"
    assert is_empty_summary(user, (user,))
    assert not is_empty_summary(user + "the cache key is wrong\n", (user,))


def test_template_only_notes_with_a_byte_order_mark_are_empty() -> None:
    # Found by a bug hunt: Notepad's BOM made the first heading no heading, the notes passed
    # for notes, and compact replaced the transcript with an empty template.
    assert is_empty_summary("\ufeff" + builtin_template())
    assert not is_empty_summary("\ufeff" + builtin_template() + "real notes\n")
